package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// sessionStore is what the gateway runs on: the engine's storage and the
// gateway's, on one database.
type sessionStore interface {
	vigil.Store
	sessions.Store
}

// isPostgresURL reports whether a --db value names a PostgreSQL database.
func isPostgresURL(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// postgresTarget splits a postgres:// --db value into the server's URL
// and vigil's schema: a schema=NAME parameter is vigil's, not the
// server's, and keeps vigil's tables in their own schema.
func postgresTarget(db string) (server, schema string, err error) {
	u, err := url.Parse(db)
	if err != nil {
		return "", "", fmt.Errorf("--db: not a valid URL: %w", err)
	}
	q := u.Query()
	schema = q.Get("schema")
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String(), schema, nil
}

// openStore opens the database a --db value names: a postgres:// URL
// (optionally with schema=NAME for vigil's tables), or else a SQLite file
// (its directory created if needed). log hears of each schema migration
// applied, and of the failures a SQLite store's background work has no
// caller to return to; synchronous applies to SQLite only.
func openStore(ctx context.Context, db, synchronous string, log *slog.Logger) (sessionStore, error) {
	if isPostgresURL(db) {
		server, schema, err := postgresTarget(db)
		if err != nil {
			return nil, err
		}
		st, err := pgstore.Open(ctx, server, pgstore.Options{Schema: schema, Logger: log})
		if err != nil {
			return nil, err
		}
		return st, nil
	}
	if err := os.MkdirAll(filepath.Dir(db), 0o700); err != nil {
		return nil, fmt.Errorf("create database directory: %w", err)
	}
	st, err := sqlitestore.Open(ctx, db, sqlitestore.Options{Synchronous: synchronous, Logger: log})
	if err != nil {
		return nil, err
	}
	return st, nil
}
