package client_test

import (
	"context"
	"fmt"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// closers end what startVigil started, once the tests and examples ran.
var closers []func()

func TestMain(m *testing.M) {
	code := m.Run()
	for i := len(closers) - 1; i >= 0; i-- {
		closers[i]()
	}
	os.Exit(code)
}

// startVigil serves a fresh gateway without tokens (every request is its
// local admin, as with vigil serve on loopback) for one example, and
// returns its URL. Its ids count up from 1, so examples can show them.
func startVigil() string {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "vigil-client-example-")
	if err != nil {
		log.Fatal(err)
	}
	store, err := sqlitestore.Open(ctx, filepath.Join(dir, "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		log.Fatal(err)
	}
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, store, hub.Attach(vigil.Options{PruneInterval: -1}))
	if err != nil {
		log.Fatal(err)
	}
	var ids atomic.Int64
	g := gateway.New(eng, store, gateway.Options{Hub: hub, NewID: func() string { return fmt.Sprintf("%016x", ids.Add(1)) }})
	creds, err := gateway.NewCredentials(gateway.Config{}, "")
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(g, httpapi.Options{Credentials: creds}))
	closers = append(closers, func() {
		g.Close()
		srv.CloseClientConnections()
		srv.Close()
		eng.Close()
		store.Close()
		os.RemoveAll(dir)
	})
	return srv.URL
}
