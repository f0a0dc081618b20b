package pgstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/sessions"
)

// The gateway counts an owner's push configs and adds one only under its
// limits. Two gateways on one schema each doing so at once must not both
// count before either commits: the second count waits for the first
// writer, then sees its config, so the limits hold across gateways.
func TestASecondWriterCountsPushConfigsOnlyOnceTheFirstHasCommitted(t *testing.T) {
	schema := freshSchema(t)
	name := fmt.Sprintf("vigil-test-second-%d", time.Now().UnixNano())
	s1, s2 := open(t, schema), openNamed(t, schema, name)
	ctx := t.Context()
	const owner = "token|ci"

	first := begin(t, s1)
	firstRows := first.Rows().(sessions.Tx)
	if n, err := firstRows.CountPushConfigs(ctx, alphaMain, owner); err != nil || n != (sessions.PushCount{}) {
		t.Fatalf("the first count: %+v, %v; want none", n, err)
	}
	cfg := sessions.PushConfig{Session: alphaMain, Owner: owner, ID: "one", URL: "https://example.test/hook",
		Token: "a-token", Protocol: "1.0", CreatedAt: 1}
	if err := firstRows.PutPushConfig(ctx, cfg); err != nil {
		t.Fatal(err)
	}

	second := begin(t, s2)
	type counted struct {
		n   sessions.PushCount
		err error
	}
	done := make(chan counted, 1)
	go func() {
		n, err := second.Rows().(sessions.Tx).CountPushConfigs(context.Background(), alphaMain, owner)
		done <- counted{n, err}
	}()
	conn := connect(t)
	defer conn.Close(context.Background())
	testwait.Until(t, "the second count waits for a lock or is answered", func() bool {
		if len(done) > 0 {
			return true
		}
		var waiting int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, name).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		return waiting > 0
	})
	if len(done) > 0 {
		c := <-done
		t.Fatalf("the second writer counted %+v (err %v) while the first's config was uncommitted: both may add one past a limit",
			c.n, c.err)
	}
	if err := first.Commit(); err != nil {
		t.Fatal(err)
	}
	c := <-done
	if want := (sessions.PushCount{OnSession: 1, OfOwner: 1, All: 1}); c.err != nil || c.n != want {
		t.Fatalf("the second count after the first commit: %+v, %v; want %+v", c.n, c.err, want)
	}
}
