// Package node assembles one gateway process: the store a database names,
// the engine on it, the hub of live events, the gateway, the webhook
// dispatcher, and, on a PostgreSQL database that other gateways may
// share, the change listener that keeps this process current with what
// they commit. It is the one place these parts are put together: every
// command that runs a gateway (vigil serve, vigil mcp --db, vigil demo,
// vigil bench) opens a Node from one Options value, then mounts its own
// transports on Node.Gateway.
//
// It sits above the gateway, the engine and the stores, and below the
// commands; no transport is imported here.
//
// # Lifecycle
//
// When Open returns without error, these run until Close:
//
//   - the engine's background upkeep: the paced rewrite of the cursors
//     the startup sweep re-notified, and the automatic prunes
//     (vigil.Options.PruneInterval);
//   - the gateway's looks at open runs for attention
//     (gateway.Options.StuckAfter, AttentionEvery) and, when it may read
//     transcripts, its checks of adopted sessions
//     (gateway.Options.Upstream);
//   - one delivery worker per agent that has a webhook (Options.Webhooks);
//   - on PostgreSQL, the change listener (Node.Listening reports whether
//     it is connected).
//
// The startup sweep itself is done before Open returns: every pending
// notice is queued again.
//
// Close stops them in this order, each once the one before has stopped:
// the change listener (so nothing more reaches the gateway from other
// processes), the gateway (waiting turns and sends end at once; its
// loops stop), the engine (it refuses new writes and waits for those
// already queued), the webhook workers (the engine wakes nobody any more;
// deliveries still queued are abandoned), and last the store, when the
// node opened it. When Close returns no goroutine the node started is
// running. Transports mounted on the gateway are the caller's: stop them
// first.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/webhook"
)

// Store is what a gateway runs on: the engine's storage and the
// gateway's, on one database.
type Store interface {
	vigil.Store
	sessions.Store
}

// Options say what a node runs on and how its parts are configured.
type Options struct {
	// DB names the database: a postgres:// or postgresql:// URL (with an
	// optional schema=NAME parameter, the schema of vigil's tables), or
	// else a SQLite file, whose directory is created when missing. It is
	// not read when Store is set.
	DB string
	// Synchronous is a SQLite file's synchronous setting: FULL (also
	// when empty) or NORMAL.
	Synchronous string
	// Store, when set, is an open store to run on instead of opening DB.
	// The node does not close it: its owner does, after Close.
	Store Store
	// Sessions, when set, is what the gateway reads and writes sessions
	// through instead of the store itself (a wrapper that counts or fails
	// its calls, say); the engine keeps the store.
	Sessions sessions.Store

	// Logger hears of the store's migrations and background failures,
	// the engine's, the gateway's, the webhooks' and the change
	// listener's; nil discards. It is the default of Engine.Logger and
	// Gateway.Logger.
	Logger *slog.Logger
	// Engine configures the engine. The node adds its own hooks (the hub,
	// the webhooks) after any OnWake, OnNotice and OnRecord given here.
	Engine vigil.Options
	// Gateway configures the gateway. Its Hub is the node's own, whatever
	// is set here; an unset Clock is the engine's, so one manual clock
	// drives both; with Metrics, an unset ObserveDelta is the metrics'.
	Gateway gateway.Options
	// Webhooks are the agents' webhooks, by agent id: each wake of one of
	// the agent's sessions is POSTed there (webhook.New checks them).
	Webhooks map[string]webhook.Target
	// Metrics makes Node.Metrics a registry of the engine's, the
	// webhooks' and the store's figures, which the gateway's reads of
	// changes are timed into.
	Metrics bool
}

// Node is one gateway process's engine, gateway and background work on
// one store. Its methods are safe for concurrent use.
type Node struct {
	store    Store
	ownStore bool
	eng      *vigil.Engine
	gw       *gateway.Gateway
	hooks    *webhook.Dispatcher
	metrics  *metrics.Metrics
	log      *slog.Logger

	// shared is the store when other processes may append to it (a
	// PostgreSQL database), nil otherwise; listening says whether its
	// change listener is connected.
	shared     *pgstore.Store
	listening  atomic.Bool
	stopListen context.CancelFunc // nil when nothing listens
	listenDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// Open opens the store (unless Options.Store is given), the webhook
// dispatcher, the engine (its startup sweep done when Open returns), the
// gateway and, on PostgreSQL, the change listener; see the package's
// documentation for what then runs. On an error, whatever it had opened
// is closed again.
func Open(ctx context.Context, opts Options) (_ *Node, err error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	n := &Node{store: opts.Store, log: log}
	defer func() {
		if err != nil {
			n.Close()
		}
	}()
	// The webhooks are checked first: a configuration refused for them
	// must not have made, or migrated, the database.
	if n.hooks, err = webhook.New(opts.Webhooks, webhook.Options{Logger: log}); err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	if n.store == nil {
		if n.store, err = OpenStore(ctx, opts.DB, opts.Synchronous, log); err != nil {
			return nil, err
		}
		n.ownStore = true
	}
	hub := gateway.NewHub()
	if ps, ok := n.store.(*pgstore.Store); ok {
		n.shared = ps
		hub.ShareStore() // before the engine records anything
		// The hub gives a follower of a session this process's events at
		// their commit when nothing can come before them, rather than
		// when the commit's notification comes back.
		ps.SetCommitHook(pgstore.CommitHook{Watched: hub.Followed, Committed: hub.CommittedHere})
	}
	eopts := opts.Engine
	if eopts.Logger == nil {
		eopts.Logger = log
	}
	wake := eopts.OnWake
	eopts.OnWake = func(watcher string) {
		if wake != nil {
			wake(watcher)
		}
		n.hooks.Wake(watcher)
	}
	if n.eng, err = vigil.Open(ctx, n.store, hub.Attach(eopts)); err != nil {
		return nil, err
	}
	gopts := opts.Gateway
	gopts.Hub = hub
	if gopts.Logger == nil {
		gopts.Logger = log
	}
	if gopts.Clock == nil {
		gopts.Clock = eopts.Clock
	}
	if opts.Metrics {
		n.metrics = metrics.New(n.eng)
		if err := n.metrics.RegisterWebhooks(n.hooks); err != nil {
			return nil, err
		}
		if err := n.metrics.RegisterStore(n.store); err != nil {
			return nil, err
		}
		if gopts.ObserveDelta == nil {
			gopts.ObserveDelta = n.metrics.ObserveDelta
		}
	}
	var sessionStore sessions.Store = n.store
	if opts.Sessions != nil {
		sessionStore = opts.Sessions
	}
	n.gw = gateway.New(n.eng, sessionStore, gopts)
	if n.shared != nil {
		n.listen()
	}
	return n, nil
}

// Gateway is the node's gateway, for transports to serve.
func (n *Node) Gateway() *gateway.Gateway { return n.gw }

// Engine is the node's engine.
func (n *Node) Engine() *vigil.Engine { return n.eng }

// Store is the store the node runs on.
func (n *Node) Store() Store { return n.store }

// Webhooks is the node's webhook dispatcher.
func (n *Node) Webhooks() *webhook.Dispatcher { return n.hooks }

// Metrics is the node's registry, nil without Options.Metrics.
func (n *Node) Metrics() *metrics.Metrics { return n.metrics }

// Shared reports whether other processes may append to the node's store
// (a PostgreSQL database), whose changes the change listener brings here.
func (n *Node) Shared() bool { return n.shared != nil }

// ErrNotListening is Listening's answer while a shared store's change
// listener is not connected.
var ErrNotListening = errors.New("the change listener is not connected: other gateways' changes are not heard")

// Listening reports whether the node hears what other processes commit:
// nil when its change listener is connected, or when the store is the
// node's own (nothing to hear), ErrNotListening otherwise. It has the
// shape of a readiness check.
func (n *Node) Listening(context.Context) error {
	if n.shared != nil && !n.listening.Load() {
		return ErrNotListening
	}
	return nil
}

// Close stops everything the node runs, in the order the package's
// documentation gives, and closes the store if the node opened it; it
// returns the store's error. It is safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.shared != nil {
			n.shared.SetCommitHook(pgstore.CommitHook{}) // a store passed in outlives the node
		}
		if n.stopListen != nil {
			n.stopListen()
			<-n.listenDone
		}
		if n.gw != nil {
			n.gw.Close()
		}
		if n.eng != nil {
			n.eng.Close()
		}
		if n.hooks != nil {
			n.hooks.Close()
		}
		if n.ownStore && n.store != nil {
			if err := n.store.Close(); err != nil {
				n.closeErr = fmt.Errorf("close the store: %w", err)
			}
		}
	})
	return n.closeErr
}

// listen starts the change listener: it keeps the engine's queues and the
// gateway's waiting turns, sends and streams current with what other
// processes on the same PostgreSQL database commit, until Close.
func (n *Node) listen() {
	ctx, cancel := context.WithCancel(context.Background())
	n.stopListen, n.listenDone = cancel, make(chan struct{})
	g, log := n.gw, n.log
	go func() {
		defer close(n.listenDone)
		n.shared.Follow(ctx, n.eng, pgstore.FollowOptions{
			Logger:     log,
			OnAppended: g.EventsAppendedElsewhere,
			OnCommits: func(ctx context.Context, c pgstore.Commits) {
				if err := g.CommitsHeard(ctx, heard(c)); err != nil && ctx.Err() == nil {
					log.Error("commits heard from other gateways", "err", err)
				}
			},
			OnMessages: func(ctx context.Context, as []pgstore.Arrival) {
				for _, a := range as {
					if err := g.MessageArrived(ctx, a.Session, a.MessageID); err != nil && ctx.Err() == nil {
						log.Error("a message stored by another gateway", "err", err)
					}
				}
			},
			OnResync: func(ctx context.Context) {
				if err := g.Recheck(ctx); err != nil && ctx.Err() == nil {
					log.Error("recheck waiting turns and sends", "err", err)
				}
			},
			OnConnect: func() {
				n.listening.Store(true)
				g.HearCommits(true)
				log.Info("listening for other gateways' changes", "channel", n.shared.Channel())
			},
			OnLost: func(error, time.Duration) {
				n.listening.Store(false)
				g.HearCommits(false)
			},
		})
	}()
}

// heard is what the listener heard as the gateway takes it.
func heard(c pgstore.Commits) gateway.Heard {
	h := gateway.Heard{Events: c.Events, Lost: c.Lost, Uncarried: make([]string, len(c.Uncarried)),
		Deleted: make([]gateway.SessionDeletion, len(c.Deleted))}
	for i, u := range c.Uncarried {
		h.Uncarried[i] = u.Key
	}
	for i, d := range c.Deleted {
		h.Deleted[i] = gateway.SessionDeletion{Session: d.Session, Version: d.Version}
	}
	return h
}

// IsPostgres reports whether a database name is a PostgreSQL URL. A
// URL's scheme is case-insensitive: POSTGRES://… is a server too, not a
// file of that name.
func IsPostgres(db string) bool {
	for _, scheme := range []string{"postgres://", "postgresql://"} {
		if len(db) >= len(scheme) && strings.EqualFold(db[:len(scheme)], scheme) {
			return true
		}
	}
	return false
}

// CheckSQLiteName refuses a database name that is not a PostgreSQL URL
// and cannot be meant as a SQLite file: none at all, or a PostgreSQL
// key=value connection string, which taken as a file name would make a
// file named after its password, shown by every line naming the
// database. The refusal does not quote the name.
func CheckSQLiteName(db string) error {
	if db == "" {
		return errors.New("no database named: give a SQLite file or a postgres:// URL")
	}
	if looksLikeKeywordDSN(db) {
		return errors.New("the database looks like a PostgreSQL key=value connection string, which vigil does not take " +
			"(not shown: it may hold a password): give a postgres:// URL, with the password in PGPASSWORD or ~/.pgpass if you like")
	}
	return nil
}

// keywordDSN are the keywords of libpq's key=value connection strings a
// person would start one with.
var keywordDSN = []string{"host", "hostaddr", "port", "dbname", "user", "password", "passfile", "sslmode", "service",
	"connect_timeout", "application_name", "options"}

// looksLikeKeywordDSN reports whether db is a PostgreSQL key=value
// connection string ("host=... dbname=..."), not a file name.
func looksLikeKeywordDSN(db string) bool {
	for _, field := range strings.Fields(db) {
		k, _, ok := strings.Cut(field, "=")
		if ok && slices.Contains(keywordDSN, strings.ToLower(k)) {
			return true
		}
	}
	return false
}

// PostgresTarget splits a PostgreSQL URL into the server's URL and
// vigil's schema: a schema=NAME parameter is vigil's, not the server's,
// and keeps vigil's tables in their own schema.
func PostgresTarget(db string) (server, schema string, err error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", "", fmt.Errorf("not a valid database URL: %w", redact.ParseError(db))
	}
	// Read strictly: a pair that does not parse would be dropped, and a
	// schema=NAME with it, putting vigil's tables in the default schema.
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", "", fmt.Errorf("not a valid database URL: its query: %w", err)
	}
	schema = q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// MakeSQLiteDir makes the folder of the SQLite file db when it is missing,
// readable by its owner alone, since the database holds every transcript.
// Whatever puts a database there, a gateway or a restore, makes it the
// same way.
func MakeSQLiteDir(db string) error {
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return fmt.Errorf("create database directory: %w", err)
	}
	return nil
}

// OpenStore opens the database db names (see Options.DB) and nothing
// else: a store to migrate or inspect. log hears of each schema migration
// applied, and of the failures a SQLite store's background work has no
// caller to return to; synchronous applies to SQLite only.
func OpenStore(ctx context.Context, db, synchronous string, log *slog.Logger) (Store, error) {
	if IsPostgres(db) {
		server, schema, err := PostgresTarget(db)
		if err != nil {
			return nil, err
		}
		st, err := pgstore.Open(ctx, server, pgstore.Options{Schema: schema, Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	if err := CheckSQLiteName(db); err != nil {
		return nil, err
	}
	if err := MakeSQLiteDir(db); err != nil {
		return nil, err
	}
	st, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Synchronous: synchronous, Logger: log})
	if err != nil {
		return nil, err
	}
	return st, nil
}
