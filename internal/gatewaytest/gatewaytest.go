// Package gatewaytest puts together the gateways tests run against, as
// `vigil serve` puts one together: a store, an engine on it with the
// gateway's hub attached, and the gateway; on PostgreSQL the hub knows the
// store is shared and the gateway follows what other gateways on the
// database commit. Transports' tests serve the gateway with their own
// handlers.
package gatewaytest

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/node"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Options say how to put a gateway together. The zero value is a gateway
// on a fresh SQLite file in the test's temporary directory.
type Options struct {
	// Path is the SQLite file; "" means a new one in the test's temporary
	// directory (Open only: New needs a path or a schema).
	Path string
	// SQLite is the SQLite store's options. An empty Synchronous means
	// NORMAL: a test never loses power, so it does not wait for the disk.
	SQLite sqlitestore.Options
	// Schema, when set, puts the gateway on that schema of the test
	// PostgreSQL database (internal/pgtest) instead of SQLite.
	Schema string
	// Engine is the engine's options; the hub is attached to them. A zero
	// PruneInterval means -1: no automatic prune, since tests prune when
	// they say so.
	Engine vigil.Options
	// Gateway is the gateway's options; its Hub is always the one attached
	// to the engine. An unset Clock is the real one, whatever the
	// engine's.
	Gateway gateway.Options
	// Wrap, when set, wraps the store the engine and the gateway are given
	// (to make it fail, say).
	Wrap func(Store) Store
	// WrapSessions, when set, wraps the store the gateway alone is given
	// (to count its calls, say); the engine keeps its own.
	WrapSessions func(sessions.Store) sessions.Store
	// Metrics makes the engine's metrics as vigil serve makes them, the
	// store's figures registered and the gateway's deltas observed, for a
	// transport's handler to serve (Gateway.Metrics).
	Metrics bool
}

// Store is what a gateway is put together on: the engine's store and the
// gateway's sessions in one, as both stores are.
type Store interface {
	vigil.Store
	sessions.Store
}

// Gateway is a gateway put together, with its parts.
type Gateway struct {
	Gateway *gateway.Gateway
	Engine  *vigil.Engine
	Hub     *gateway.Hub
	// Metrics is the engine's metrics, when Options.Metrics asked for them.
	Metrics *metrics.Metrics
	// SQLite is the store on SQLite, and Postgres on PostgreSQL; the
	// other is nil.
	SQLite   *sqlitestore.Store
	Postgres *pgstore.Store

	closeOnce sync.Once
	close     func()
}

// Store is the store the gateway was put together on.
func (g *Gateway) Store() sessions.Store {
	if g.Postgres != nil {
		return g.Postgres
	}
	return g.SQLite
}

// Close stops following the database, then closes the gateway, the engine
// and the store, in that order. Calling it again does nothing.
func (g *Gateway) Close() { g.closeOnce.Do(g.close) }

// Open puts a gateway together for t, failing t if it cannot, and closes
// it when t ends (unless the test closed it first).
func Open(t testing.TB, o Options) *Gateway {
	t.Helper()
	if o.Path == "" && o.Schema == "" {
		o.Path = filepath.Join(t.TempDir(), "v.db")
	}
	g, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// New puts a gateway together, as vigil serve does (package node), on a
// store opened here; the caller closes it. o names a SQLite file or a
// PostgreSQL schema.
func New(ctx context.Context, o Options) (*Gateway, error) {
	var (
		st Store
		gw = &Gateway{}
	)
	switch {
	case o.Schema != "":
		pg, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: o.Schema})
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w", err)
		}
		gw.Postgres, st = pg, pg
	case o.Path != "":
		o.SQLite.Synchronous = cmp.Or(o.SQLite.Synchronous, "NORMAL")
		lite, err := sqlitestore.Open(ctx, o.Path, o.SQLite)
		if err != nil {
			return nil, fmt.Errorf("open the SQLite store: %w", err)
		}
		gw.SQLite, st = lite, lite
	default:
		return nil, fmt.Errorf("gatewaytest: no SQLite path and no PostgreSQL schema")
	}
	if o.Engine.PruneInterval == 0 {
		o.Engine.PruneInterval = -1
	}
	closeStore := st.Close
	if o.Wrap != nil {
		st = o.Wrap(st)
	}
	if o.Gateway.Clock == nil {
		// A test that drives the engine's clock by hand still has the
		// gateway's waits time out on their own.
		o.Gateway.Clock = clock.Real{}
	}
	var given sessions.Store
	if o.WrapSessions != nil {
		given = o.WrapSessions(st)
	}
	n, err := node.Open(ctx, node.Options{Store: st, Sessions: given, Logger: o.Engine.Logger,
		Engine: o.Engine, Gateway: o.Gateway, Metrics: o.Metrics})
	if err != nil {
		closeStore()
		return nil, err
	}
	gw.Gateway, gw.Engine, gw.Hub, gw.Metrics = n.Gateway(), n.Engine(), n.Gateway().Hub(), n.Metrics()
	gw.close = func() {
		n.Close()
		closeStore()
	}
	return gw, nil
}

// PanicReading is an Options.WrapSessions whose read of the session key
// panics, as a bug would; every other call goes to the store.
func PanicReading(key string) func(sessions.Store) sessions.Store {
	return func(s sessions.Store) sessions.Store { return panicking{Store: s, key: key} }
}

type panicking struct {
	sessions.Store
	key string
}

func (p panicking) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if ref.Key == p.key {
		panic("a bug in reading " + ref.Key)
	}
	return p.Store.Session(ctx, ref)
}
