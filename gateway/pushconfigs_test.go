package gateway_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/sessions"
)

// blockedBehind counts the backends of the test database waiting for a
// lock that the backend pid holds, or, with pid 0, for any lock.
func blockedBehind(t *testing.T, conn *pgx.Conn, pid uint32) int {
	t.Helper()
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		AND CASE WHEN $1 = 0 THEN cardinality(pg_blocking_pids(pid)) > 0 ELSE $1 = ANY(pg_blocking_pids(pid)) END`,
		int(pid)).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A push config never outlives its task: one set on a gateway while
// another gateway of the database deletes the session either is refused
// (the session is gone) or is deleted with it.
func TestAPushConfigSetWhileAnotherGatewayDeletesItsSessionGoesWithTheSession(t *testing.T) {
	pgtest.Require(t)
	schema := pgtest.FreshSchema(t)
	setter, deleter := gatewayOnPostgres(t, schema), gatewayOnPostgres(t, schema)
	task := vigil.MustRef(graphStory(t, deleter))
	cfg := sessions.PushConfig{Session: task, ID: "hook", URL: "https://example.test/hook", Token: "a-token",
		Protocol: "1.0", CreatedAt: 1}

	// A row of the config's key, inserted and not committed, holds the
	// setter's insert of it back once the setter has found the session.
	hold := pgtest.Connect(t)
	defer hold.Close(context.Background())
	blocker, err := hold.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(context.Background())
	table := pgx.Identifier{schema, "push_configs"}.Sanitize()
	if _, err := blocker.Exec(ctx, `INSERT INTO `+table+` (agent_id, session_key, owner, config_id, url, token,
		protocol, created_at) VALUES ($1, $2, $3, $4, 'https://example.test/other', 'other', '1.0', 1)`,
		task.AgentID, task.Key, gateway.PushOwner(person), cfg.ID); err != nil {
		t.Fatal(err)
	}
	set, setBy := make(chan error, 1), caller(t, setter, person, "")
	go func() { set <- setter.SetPushConfig(ctx, setBy, cfg, gateway.PushLimits{}.WithDefaults()) }()
	look := pgtest.Connect(t)
	defer look.Close(context.Background())
	testwait.Until(t, "the setter waits for the held row", func() bool {
		return len(set) > 0 || blockedBehind(t, look, hold.PgConn().PID()) > 0
	})
	if len(set) > 0 {
		t.Fatalf("the setter did not wait for the held row: %v", <-set)
	}

	deleted, deletedBy := make(chan error, 1), caller(t, deleter, person, "")
	go func() {
		_, err := deleter.Delete(ctx, deletedBy, gateway.SessionInput{SessionKey: task.Key})
		deleted <- err
	}()
	testwait.Until(t, "the delete ends or waits for the setter", func() bool {
		return len(deleted) > 0 || blockedBehind(t, look, 0) > 1
	})
	if err := blocker.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-set; err != nil && gateway.Code(err) != gateway.CodeNotFound {
		t.Fatalf("setting the config: %v", err)
	}
	if err := <-deleted; err != nil {
		t.Fatalf("deleting the session: %v", err)
	}
	left, err := setter.StoredPushConfigs(ctx, sessions.PushFilter{Session: task})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Fatalf("%d push configs outlived their deleted task: %+v", len(left), left)
	}
}

// The gateway bounds the fields it stores whichever transport hands it a
// config: one over a bound is refused as invalid, naming the field and
// the bound, and nothing is stored.
func TestAPushConfigFieldOverItsBoundIsRefusedByTheGateway(t *testing.T) {
	g, _ := newGateway(t)
	task := vigil.MustRef(graphStory(t, g))
	c := caller(t, g, person, "")
	cfg := sessions.PushConfig{Session: task, ID: "hook", URL: "https://example.test/" +
		strings.Repeat("p", gateway.MaxPushURLBytes), Token: "a-push-secret-of-some-length", Protocol: "1.0", CreatedAt: 1}
	err := g.SetPushConfig(ctx, c, cfg, gateway.PushLimits{}.WithDefaults())
	if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "url") ||
		!strings.Contains(err.Error(), fmt.Sprint(gateway.MaxPushURLBytes)) {
		t.Fatalf("a URL over its bound: %v, want invalid naming url and %d", err, gateway.MaxPushURLBytes)
	}
	if left, err := g.StoredPushConfigs(ctx, sessions.PushFilter{}); err != nil || len(left) != 0 {
		t.Fatalf("stored after the refusal: %d configs, %v", len(left), err)
	}
}
