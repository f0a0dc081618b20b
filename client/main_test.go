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

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/leaktest"
)

// closers end what startVigil started, once the tests and examples ran.
var closers []func()

func TestMain(m *testing.M) {
	leaktest.Main(m, func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	})
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
	var ids atomic.Int64
	gw, err := gatewaytest.New(ctx, gatewaytest.Options{Path: filepath.Join(dir, "vigil.db"),
		Gateway: gateway.Options{NewID: func() string { return fmt.Sprintf("%016x", ids.Add(1)) }}})
	if err != nil {
		log.Fatal(err)
	}
	creds, err := gateway.NewCredentials(gateway.Config{}, "")
	if err != nil {
		log.Fatal(err)
	}
	serving, stop := context.WithCancel(ctx)
	srv := httptest.NewServer(httpapi.New(gw.Gateway, httpapi.Options{Credentials: creds, Context: serving}))
	closers = append(closers, func() {
		stop()
		srv.CloseClientConnections()
		srv.Close()
		gw.Close()
		os.RemoveAll(dir)
	})
	return srv.URL
}
