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
	"log/slog"
	"path/filepath"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/internal/pgtest"
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
	// to the engine.
	Gateway gateway.Options
	// Wrap, when set, wraps the store the engine and the gateway are given
	// (to make it fail, say). The engine looks for a store's optional
	// interfaces, so a wrapper that keeps the store's speed-ups embeds the
	// concrete store.
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

// New puts a gateway together; the caller closes it. o names a SQLite
// file or a PostgreSQL schema.
func New(ctx context.Context, o Options) (*Gateway, error) {
	var (
		st Store
		gw = &Gateway{Hub: gateway.NewHub()}
	)
	switch {
	case o.Schema != "":
		pg, err := pgstore.Open(ctx, pgtest.URL(), pgstore.Options{Schema: o.Schema})
		if err != nil {
			return nil, fmt.Errorf("open the PostgreSQL store: %w", err)
		}
		gw.Postgres, st = pg, pg
		gw.Hub.ShareStore()
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
	eng, err := vigil.Open(ctx, st, gw.Hub.Attach(o.Engine))
	if err != nil {
		closeStore()
		return nil, fmt.Errorf("open the engine: %w", err)
	}
	gw.Engine = eng
	if o.Metrics {
		gw.Metrics = metrics.New(eng)
		if err := gw.Metrics.RegisterStore(st); err != nil {
			eng.Close()
			closeStore()
			return nil, fmt.Errorf("register the store's metrics: %w", err)
		}
		o.Gateway.ObserveDelta = gw.Metrics.ObserveDelta
	}
	var given sessions.Store = st
	if o.WrapSessions != nil {
		given = o.WrapSessions(st)
	}
	o.Gateway.Hub = gw.Hub
	gw.Gateway = gateway.New(eng, given, o.Gateway)
	stopFollowing := func() {}
	if gw.Postgres != nil {
		stopFollowing = follow(gw, cmp.Or(o.Gateway.Logger, slog.New(slog.DiscardHandler)))
	}
	gw.close = func() {
		stopFollowing()
		gw.Gateway.Close()
		eng.Close()
		closeStore()
	}
	return gw, nil
}

// follow keeps g current with what other gateways commit to its database,
// wired as `vigil serve` wires it, until the returned stop is called.
func follow(g *Gateway, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.Postgres.Follow(ctx, g.Engine, pgstore.FollowOptions{
			Logger:     log,
			OnAppended: g.Gateway.EventsAppendedElsewhere,
			OnMessages: func(ctx context.Context, as []pgstore.Arrival) {
				for _, a := range as {
					if err := g.Gateway.MessageArrived(ctx, a.Session, a.MessageID); err != nil && ctx.Err() == nil {
						log.Error("a message stored by another gateway", "err", err)
					}
				}
			},
			OnResync: func(ctx context.Context) {
				if err := g.Gateway.Recheck(ctx); err != nil && ctx.Err() == nil {
					log.Error("recheck waiting turns and sends", "err", err)
				}
			},
		})
	}()
	return func() {
		cancel()
		<-done
	}
}
