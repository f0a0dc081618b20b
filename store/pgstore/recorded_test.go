package pgstore_test

import (
	"context"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/store/pgstore"
)

// A schema of the build before recorded sessions were kept knows every
// session the log or the cursors name that no row hosts as recorded once
// migrated: an adopted one with its catalog as its runtime, a watcher that
// is only a key, and not a hosted one.
func TestMigratingKeepsTheSessionsRecordedBeforeAsRecorded(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	s, err := pgstore.Open(ctx, testURL(), pgstore.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO events (sequence, agent_id, session_key, kind, actor_type, occurred_at, recorded_at, summary)
			VALUES (1, 'ext', 'agent:ext:lg:t1', 'goal_changed', 'human', 10, 10, 'goal updated'),
			(2, 'ext', 'agent:ext:lg:t1', 'goal_changed', 'human', 20, 20, 'goal updated'),
			(3, 'main', 'agent:main:subagent:w', 'created', 'agent', 30, 30, 'session created'),
			(4, 'main', 'agent:main:claude-cli:x', 'adopted', 'human', 40, 40, 'session adopted')`,
		`INSERT INTO sessions (agent_id, session_key, session_id, kind, inbox_seen, created_at, updated_at)
			VALUES ('main', 'agent:main:subagent:w', 's1', 'subagent', 0, 30, 30)`,
		`INSERT INTO cursors (target_agent, target_key, watcher, last_seen, notified, material, updated_at)
			VALUES ('ext', 'agent:ext:lg:t1', 'agent:ext:supervisor', 1, 1, 1, 15)`,
		`INSERT INTO upstream_links (agent_id, session_key, catalog_id, host_id, thread_id, marker, created_at, updated_at)
			VALUES ('main', 'agent:main:claude-cli:x', 'claude-cli', 'gateway:local', 'x', '{}', 40, 40)`,
		// As the build before left the schema: without migration 7 and
		// those after it.
		`DROP TABLE recorded_sessions`,
		`DROP INDEX sessions_by_parent`,
		`DELETE FROM schema_migrations WHERE version >= 7`,
	} {
		if _, err := pgstore.PoolOf(s).Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s.Close()
	s = open(t, schema)
	got, err := s.ListRecorded(ctx, sessions.ListFilter{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	ref := func(agent, key string) vigil.SessionRef { return vigil.SessionRef{AgentID: agent, Key: key} }
	want := []sessions.Recorded{
		{Ref: ref("ext", "agent:ext:lg:t1"), Kind: sessions.KindOther, CreatedAt: 10, UpdatedAt: 20},
		{Ref: ref("ext", "agent:ext:supervisor"), Kind: sessions.KindOther, CreatedAt: 15, UpdatedAt: 15},
		{Ref: ref("main", "agent:main:claude-cli:x"), Kind: sessions.KindOther, Runtime: "claude-cli", CreatedAt: 40, UpdatedAt: 40},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded after the migration:\n got %+v\nwant %+v", got, want)
	}
}
