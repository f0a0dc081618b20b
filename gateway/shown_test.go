package gateway_test

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// statusJSON is a status as the HTTP API writes it, and checks that it is
// what encoding/json gives for the same answer.
func statusJSON(t interface {
	Helper()
	Fatal(...any)
	Fatalf(string, ...any)
}, out gateway.StatusOutput) []byte {
	t.Helper()
	got, err := out.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		t.Fatal(err)
	}
	if want := bytes.TrimSuffix(b.Bytes(), []byte("\n")); !bytes.Equal(got, want) {
		t.Fatalf("the status encoded itself as\n%s\nnot as\n%s", got, want)
	}
	return got
}

func TestADeltaReadAgainAfterAPruneHasNoPrunedEventAndReportsTheGap(t *testing.T) {
	st, err := sqlitestore.Open(ctx, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, st, hub.Attach(vigil.Options{PruneInterval: -1, MaxEvents: 4}))
	if err != nil {
		t.Fatal(err)
	}
	g := gateway.New(eng, st, gateway.Options{Hub: hub})
	t.Cleanup(func() { g.Close(); eng.Close(); st.Close() })
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	ann, key, zero := caller(t, g, person, ""), sp.ChildSessionKey, 0
	for _, m := range []string{"one", "two", "three", "four", "five", "six"} {
		if _, err := g.Send(ctx, ann, gateway.SendInput{SessionKey: key, Message: m, TimeoutSeconds: &zero}); err != nil {
			t.Fatal(err)
		}
	}
	since := int64(0)
	before, err := g.Status(ctx, ann, gateway.StatusInput{SessionKey: key, ChangesSince: &since})
	if err != nil {
		t.Fatal(err)
	}
	statusJSON(t, before)
	if _, err := eng.Prune(ctx); err != nil {
		t.Fatal(err)
	}
	after, err := g.Status(ctx, ann, gateway.StatusInput{SessionKey: key, ChangesSince: &since})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		StateChanges struct {
			Events                    []struct{ Sequence int64 }
			HistoryGap                bool
			EarliestAvailableSequence int64
		}
	}
	if err := json.Unmarshal(statusJSON(t, after), &got); err != nil {
		t.Fatal(err)
	}
	sc := got.StateChanges
	if !sc.HistoryGap || len(sc.Events) == 0 || len(sc.Events) >= len(before.StateChanges.Events) {
		t.Fatalf("after the prune: %d events (gap %v), before it %d", len(sc.Events), sc.HistoryGap, len(before.StateChanges.Events))
	}
	for _, e := range sc.Events {
		if e.Sequence < sc.EarliestAvailableSequence {
			t.Fatalf("event %d was pruned (the earliest kept is %d), yet it is shown", e.Sequence, sc.EarliestAvailableSequence)
		}
	}
}
