package sqlitestore

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// A record moves the cursors of a target's watchers (held in memory) and
// creates the cursors of others (written to the file) in one commit. A
// read of the target's cursors that this commit overlaps answers with all
// of it or none of it: never the file's rows from before the commit under
// the moves it held, nor the other way round.
func TestACursorReadSeesACommitWhole(t *testing.T) {
	ctx := context.Background()
	s := openTestStore(t, Options{})
	target := vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	moved := vigil.Cursor{Watcher: "agent:beta:main", Target: target}
	created := vigil.Cursor{Watcher: "agent:gamma:main", Target: target}
	write := func(f func(tx *Tx) error) {
		t.Helper()
		tx, err := s.begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := f(tx); err != nil {
			tx.Rollback()
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(func(tx *Tx) error { return tx.PutCursor(ctx, moved) })

	// The commit lands between the read's rows and the moves laid over
	// them.
	committed := false
	testHookCursorsRead = func() {
		if committed {
			return
		}
		committed = true
		write(func(tx *Tx) error {
			m := moved
			m.Material, m.UpdatedAt = 7, 7
			if err := tx.MoveCursors(ctx, []vigil.Cursor{m}); err != nil {
				return err
			}
			c := created
			c.Material, c.UpdatedAt = 7, 7
			return tx.PutCursor(ctx, c)
		})
	}
	t.Cleanup(func() { testHookCursorsRead = func() {} })

	cs, err := s.Cursors(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	if !committed {
		t.Fatal("the commit did not overlap the read")
	}
	before := len(cs) == 1 && cs[0].Material == 0
	after := len(cs) == 2 && cs[0].Material == 7 && cs[1].Material == 7
	if !before && !after {
		t.Fatalf("Cursors = %+v: part of one commit", cs)
	}
}
