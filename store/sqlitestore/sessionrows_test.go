package sqlitestore

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"pgregory.net/rapid"
)

// Whatever a mix of session writes (new rows, upserts of existing ones,
// changes of a row's counters only, stores of a row unchanged, deletes),
// rollbacks and commits did, a
// session read through the kept rows, inside a write or outside one, is
// exactly what the file holds.
func TestKeptSessionRowsAnswerExactlyAsTheFile(t *testing.T) {
	dir := t.TempDir()
	run := 0
	rapid.Check(t, func(rt *rapid.T) {
		run++
		ctx := context.Background()
		s, err := Open(ctx, filepath.Join(dir, fmt.Sprintf("s%d.db", run)), Options{Synchronous: "NORMAL"})
		if err != nil {
			rt.Fatal(err)
		}
		defer s.Close()
		refs := []vigil.SessionRef{{AgentID: "a", Key: "agent:a:main"}, {AgentID: "a", Key: "agent:a:subagent:x"},
			{AgentID: "b", Key: "agent:b:main"}}
		check := func(tx *Tx, what string) {
			for _, ref := range refs {
				var want sessions.Session
				var wantOK bool
				if err := s.reading(ctx, func(c conn) error {
					var err error
					want, wantOK, err = c.getSession(sessionByRefQuery, ref.AgentID, ref.Key)
					return err
				}); err != nil {
					rt.Fatal(err)
				}
				got, ok, err := s.Session(ctx, ref)
				if err != nil {
					rt.Fatal(err)
				}
				if ok != wantOK || !reflect.DeepEqual(got, want) {
					rt.Fatalf("after %s, Session(%s)\n kept: %v %+v\n file: %v %+v", what, ref.Key, ok, got, wantOK, want)
				}
				if got.Goal != nil {
					got.Goal.Status = "changed by the caller" // must not reach the next reader
				}
				if tx == nil {
					continue
				}
				inTx, ok, err := tx.GetSession(ctx, ref)
				if err != nil {
					rt.Fatal(err)
				}
				fileTx, fileOK, err := tx.c.getSession(sessionByRefQuery, ref.AgentID, ref.Key)
				if err != nil {
					rt.Fatal(err)
				}
				if ok != fileOK || !reflect.DeepEqual(inTx, fileTx) {
					rt.Fatalf("after %s, in the write GetSession(%s)\n kept: %v %+v\n file: %v %+v", what, ref.Key, ok, inTx, fileOK, fileTx)
				}
			}
		}
		at := int64(1000)
		for step := range rapid.IntRange(1, 12).Draw(rt, "transactions") {
			vtx, err := s.BeginWrite(ctx)
			if err != nil {
				rt.Fatal(err)
			}
			tx := vtx.(*Tx)
			for op := range rapid.IntRange(1, 4).Draw(rt, fmt.Sprintf("ops%d", step)) {
				ref := refs[rapid.IntRange(0, len(refs)-1).Draw(rt, fmt.Sprintf("ref%d.%d", step, op))]
				at++
				what := rapid.SampledFrom([]string{"read", "put", "put goal", "touch", "put unchanged", "delete"}).
					Draw(rt, fmt.Sprintf("op%d.%d", step, op))
				switch what {
				case "read":
					if _, _, err := tx.GetSession(ctx, ref); err != nil {
						rt.Fatal(err)
					}
				case "put", "put goal":
					sess := sessions.Session{Ref: ref, SessionID: fmt.Sprint("id", at), Kind: sessions.KindMain,
						CreatedAt: at, UpdatedAt: at}
					if what == "put goal" {
						sess.Goal = &sessions.Goal{Objective: "ship", Status: sessions.GoalActive, UpdatedAt: at}
					}
					if err := tx.PutSession(ctx, sess); err != nil {
						rt.Fatal(err)
					}
				case "touch", "put unchanged":
					// What a send or a turn does: read the row, change its
					// counters (or nothing), and store it.
					sess, ok, err := tx.GetSession(ctx, ref)
					if err != nil {
						rt.Fatal(err)
					}
					if !ok {
						continue
					}
					if what == "touch" {
						sess.InboxSeen, sess.UpdatedAt = at, at
					}
					if err := tx.PutSession(ctx, sess); err != nil {
						rt.Fatal(err)
					}
				case "delete":
					if err := tx.DeleteSessionRow(ctx, ref); err != nil {
						rt.Fatal(err)
					}
				}
				check(tx, fmt.Sprintf("%s of %s in write %d", what, ref.Key, step))
			}
			if rapid.Bool().Draw(rt, fmt.Sprintf("commit%d", step)) {
				if err := tx.Commit(); err != nil {
					rt.Fatal(err)
				}
			} else if err := tx.Rollback(); err != nil {
				rt.Fatal(err)
			}
			check(nil, fmt.Sprintf("the end of write %d", step))
		}
	})
}
