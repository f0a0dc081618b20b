package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/redact"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// store is what a gateway runs on: the engine's storage and the gateway's.
type store interface {
	vigil.Store
	sessions.Store
}

// scratch is a fresh, empty store for one measurement.
type scratch struct {
	store
	sqlite *sqlitestore.Store // nil on PostgreSQL
	pg     *pgstore.Store     // nil on SQLite
	// raw is a pool of the PostgreSQL server's own, on the store's
	// schema, for the ceilings that measure it without vigil; nil on
	// SQLite.
	raw *pgxpool.Pool
	// url opens the same store in another process (`vigil serve --db`).
	url   string
	close func() error
}

// syncModes are the durability settings the record workloads compare:
// SQLite's synchronous FULL and NORMAL, or PostgreSQL's server setting.
func (e *env) syncModes() []string {
	if e.pg {
		return []string{""}
	}
	return []string{"FULL", "NORMAL"}
}

// label prefixes a case with its durability setting.
func label(sync, rest string) string {
	if sync == "" {
		return rest
	}
	return sync + ", " + rest
}

// open returns a fresh store: a new SQLite file with the given synchronous
// setting, or a new schema in the PostgreSQL database.
func (e *env) open(ctx context.Context, name, sync string) (*scratch, error) {
	if e.pg {
		return e.openPG(ctx)
	}
	return e.openSQLite(ctx, name, sync)
}

// openSQLite returns a new SQLite file with the given synchronous setting,
// whatever store the run is on.
func (e *env) openSQLite(ctx context.Context, name, sync string) (*scratch, error) {
	path := e.path(name)
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: sync})
	if err != nil {
		return nil, err
	}
	return &scratch{store: st, sqlite: st, url: path, close: func() error {
		err := st.Close()
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
		return err
	}}, nil
}

// openPG returns a new schema in the run's PostgreSQL database (--db).
func (e *env) openPG(ctx context.Context) (*scratch, error) {
	b := make([]byte, 6)
	rand.Read(b)
	schema := "vigil_bench_" + hex.EncodeToString(b)
	base, err := stripSchema(e.cfg.DB)
	if err != nil {
		return nil, err
	}
	st, err := pgstore.Open(ctx, base, pgstore.Options{Schema: schema})
	if err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(base)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("the PostgreSQL URL: %w", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	raw, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		st.Close()
		return nil, fmt.Errorf("open a pool on scratch schema %s: %w", schema, err)
	}
	u, _ := url.Parse(base)
	q := u.Query()
	q.Set("schema", schema)
	u.RawQuery = q.Encode()
	return &scratch{store: st, pg: st, raw: raw, url: u.String(), close: func() error {
		raw.Close()
		st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("drop scratch schema %s: %w", schema, err)
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			return fmt.Errorf("drop scratch schema %s: %w", schema, err)
		}
		return nil
	}}, nil
}

// stripSchema removes vigil's own schema=NAME parameter from a URL: the
// bench makes schemas of its own.
func stripSchema(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", fmt.Errorf("--db: not a valid URL: %w", redact.ParseError(raw))
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), nil
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// engine opens an engine on st with automatic pruning off, so a workload
// measures only what it asks for.
func engine(ctx context.Context, st vigil.Store, opts vigil.Options) (*vigil.Engine, error) {
	opts.Logger = quiet
	if opts.PruneInterval == 0 {
		opts.PruneInterval = -1
	}
	return vigil.Open(ctx, st, opts)
}

// Keys the workloads use.
func targetKey(i int) string           { return fmt.Sprintf("agent:bench:subagent:t%d", i) }
func watcherKey(i int) string          { return fmt.Sprintf("agent:bench:w%d", i) }
func targetRef(i int) vigil.SessionRef { return vigil.MustRef(targetKey(i)) }

// humanMessage is the record every record workload makes: what a person
// typing into a watched session produces.
func humanMessage(target vigil.SessionRef) vigil.Record {
	return vigil.Record{Session: target, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		ActorID: "telegram:42", Summary: "human message via telegram", Payload: []byte(`{"channel":"telegram"}`)}
}

// inStoreBatches runs n steps in write transactions of st itself, at most
// per steps each, outside any engine: for loading rows through the store's
// own writes when a workload measures nothing of how they got there. An
// engine on st must have no write running meanwhile.
func inStoreBatches(ctx context.Context, st vigil.Store, n, per int, step func(ctx context.Context, tx vigil.Tx, i int) error) error {
	for from := 0; from < n; from += per {
		tx, err := st.BeginWrite(ctx)
		if err != nil {
			return err
		}
		for i := from; i < min(from+per, n) && err == nil; i++ {
			err = step(ctx, tx, i)
		}
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			tx.Rollback()
			return err
		}
	}
	return nil
}

// inBatches runs n steps in writes of at most per steps each.
func inBatches(ctx context.Context, eng *vigil.Engine, n, per int, step func(ctx context.Context, txn *vigil.Txn, i int) error) error {
	for from := 0; from < n; from += per {
		to := min(from+per, n)
		if err := eng.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
			for i := from; i < to; i++ {
				if err := step(ctx, txn, i); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}
