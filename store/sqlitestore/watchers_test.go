package sqlitestore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

// Whatever a mix of cursor writes, moves, bulk deletes, expiry, SQLite
// ending a transaction early (as it does when a statement in it is
// interrupted), rollbacks and commits did, a target's
// cursors read through the kept rows are exactly what the file holds, with
// the held moves over them, whether listed anew or appended to a list.
func TestKeptWatcherRowsAnswerExactlyAsTheFile(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(dir, fmt.Sprintf("w%d.db", run)), Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		targets := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:t1"}, {AgentID: "a", Key: "agent:a:t2"}, {AgentID: "b", Key: "agent:b:t1"}}
		watchers := []string{"agent:w1:main", "agent:w2:main", "agent:a:t1"}
		fromFile := func(tx *Tx, target vigil.SessionRef) []vigil.Cursor {
			cs, err := tx.c.queryCursors(cursorsOnTargetQuery, target.AgentID, target.Key)
			if err != nil {
				rt.Fatal(err)
			}
			for i := range cs {
				cs[i] = tx.overlay(cs[i])
			}
			return cs
		}
		check := func(tx *Tx, what string) {
			for _, target := range targets {
				got, err := tx.CursorsOnTarget(ctx, nil, target)
				if err != nil {
					rt.Fatal(err)
				}
				want := fromFile(tx, target)
				byWatcher := func(a, b vigil.Cursor) int { return strings.Compare(a.Watcher, b.Watcher) }
				slices.SortFunc(got, byWatcher)
				slices.SortFunc(want, byWatcher)
				if !reflect.DeepEqual(got, want) && (len(got) > 0 || len(want) > 0) {
					rt.Fatalf("after %s, CursorsOnTarget(%s)\n kept: %+v\n file: %+v", what, target.Key, got, want)
				}
				// Appended to a list, the same cursors follow what it held.
				held := vigil.Cursor{Watcher: "agent:held:main", LastSeen: 7}
				appended, err := tx.CursorsOnTarget(ctx, []vigil.Cursor{held}, target)
				if err != nil {
					rt.Fatal(err)
				}
				slices.SortFunc(appended[1:], byWatcher)
				if appended[0] != held || !reflect.DeepEqual(appended[1:], got) && (len(got) > 0 || len(appended) > 1) {
					rt.Fatalf("after %s, AppendCursorsOnTarget(%s) to one held cursor: %+v; CursorsOnTarget: %+v", what,
						target.Key, appended, got)
				}
			}
		}
		var seq int64
		for range rapid.IntRange(1, 12).Draw(rt, "txs") {
			t, err := s.BeginWrite(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			tx := t.(*Tx)
			check(tx, "begin")
			ended := false // SQLite ended the transaction
			for i := range rapid.IntRange(1, 6).Draw(rt, "ops") {
				target := rapid.SampledFrom(targets).Draw(rt, "target")
				w := rapid.SampledFrom(watchers).Draw(rt, "watcher")
				var what string
				switch op := rapid.IntRange(0, 8).Draw(rt, "op"); op {
				case 0, 1:
					seq++
					what = "PutCursor"
					err = tx.PutCursor(ctx, vigil.Cursor{Watcher: w, Target: target, LastSeen: seq, Notified: seq, Material: seq, UpdatedAt: seq})
				case 2, 3:
					what = "MoveCursors"
					ev := vigil.Event{AgentID: target.AgentID, SessionKey: target.Key, Kind: vigil.KindGoalChanged,
						ActorType: vigil.ActorAgent, Summary: "goal updated"}
					if _, err = tx.Append(ctx, &ev); err == nil {
						var cs []vigil.Cursor
						if cs, err = tx.CursorsOnTarget(ctx, nil, target); err == nil {
							for j := range cs {
								cs[j].Material, cs[j].UpdatedAt = ev.Sequence, ev.Sequence
							}
							err = tx.MoveCursors(ctx, cs)
						}
					}
				case 4:
					what = "DeleteCursor"
					_, err = tx.DeleteCursor(ctx, w, target)
				case 5:
					what = "DeleteWatcherCursors"
					_, err = tx.DeleteWatcherCursors(ctx, w)
				case 6:
					what = "DeleteSession"
					err = tx.DeleteSession(ctx, target)
				case 7:
					what = "ExpireCursors"
					_, err = tx.ExpireCursors(ctx, rapid.Int64Range(0, seq+1).Draw(rt, "before"), 2)
				case 8:
					// As SQLite does when a statement in it is interrupted.
					what = "SQLite ending the write on its own"
					_, err = tx.c.exec(`ROLLBACK`)
					ended = true
				}
				if err != nil {
					rt.Fatalf("%s: %v", what, err)
				}
				if ended {
					// Nothing the store runs may now write the file outside a
					// transaction.
					if err := tx.PutCursor(ctx, vigil.Cursor{Watcher: w, Target: target}); !errors.Is(err, ErrTxEnded) {
						rt.Fatalf("PutCursor after SQLite ended the transaction: %v, want ErrTxEnded", err)
					}
					break
				}
				check(tx, fmt.Sprintf("%s (op %d)", what, i))
			}
			if rapid.Bool().Draw(rt, "commit") {
				if err := tx.Commit(); err != nil && !ended {
					rt.Fatal(err)
				}
			} else if err := tx.Rollback(); err != nil {
				rt.Fatal(err)
			}
		}
	})
}
