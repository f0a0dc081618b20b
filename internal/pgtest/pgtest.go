// Package pgtest connects tests to the PostgreSQL test server and gives each
// test a schema of its own. Without a server a test is skipped with a
// message, except under CI (CI=true), where a missing server fails it: CI
// must provide one.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DefaultURL is the local server with trust authentication.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// URL is the database tests use: $VIGIL_TEST_POSTGRES, or DefaultURL.
func URL() string {
	if u := os.Getenv("VIGIL_TEST_POSTGRES"); u != "" {
		return u
	}
	return DefaultURL
}

// Redacted hides a password in a URL for messages.
func Redacted(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		return u.Redacted()
	}
	return raw
}

// unreachable remembers a failed connection, so the many tests after the
// first do not each wait for a server that is not there.
var unreachable struct {
	sync.Mutex
	err error
}

// Connect opens one plain connection to the test database, or skips t
// (fails it under CI=true) when no server answers.
func Connect(t testing.TB) *pgx.Conn {
	t.Helper()
	u := URL()
	unreachable.Lock()
	err := unreachable.err
	unreachable.Unlock()
	var conn *pgx.Conn
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if conn, err = pgx.Connect(ctx, u); err != nil {
			unreachable.Lock()
			unreachable.err = err
			unreachable.Unlock()
		}
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no PostgreSQL server is reachable at %s (set VIGIL_TEST_POSTGRES; CI=true, so this fails): %v", Redacted(u), err)
		}
		t.Skipf("no PostgreSQL server is reachable at %s (set VIGIL_TEST_POSTGRES to run this on PostgreSQL): %v", Redacted(u), err)
	}
	return conn
}

// Require skips t (fails it under CI=true) when no server is reachable.
func Require(t testing.TB) {
	t.Helper()
	Connect(t).Close(context.Background())
}

// FreshSchema creates an empty schema and drops it, with everything in it,
// when t ends.
func FreshSchema(t testing.TB) string {
	t.Helper()
	conn := Connect(t)
	defer conn.Close(context.Background())
	b := make([]byte, 8)
	rand.Read(b)
	schema := "vigil_test_" + hex.EncodeToString(b)
	if _, err := conn.Exec(context.Background(), `CREATE SCHEMA `+schema); err != nil {
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, URL())
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		// A gateway process killed at the test's end can leave a backend
		// finishing its transaction on the schema's tables; the drop,
		// locking them one by one, may then be chosen as a deadlock's
		// victim. The victim's answer is to run again.
		for attempt := 1; ; attempt++ {
			_, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE`)
			var pgErr *pgconn.PgError
			if err == nil || attempt == 5 || !errors.As(err, &pgErr) || pgErr.Code != "40P01" {
				if err != nil {
					t.Errorf("drop schema %s: %v", schema, err)
				}
				return
			}
		}
	})
	return schema
}
