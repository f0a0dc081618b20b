package sessionstest

// Recorded sessions: what PutRecorded stores and keeps, how ListRecorded
// lists, and that they go with DeleteRecorded or a rollback.

import (
	"context"
	"reflect"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

func newRecorded(ref vigil.SessionRef, kind, runtime string) sessions.Recorded {
	return sessions.Recorded{Ref: ref, Kind: kind, Runtime: runtime, CreatedAt: baseTime, UpdatedAt: baseTime}
}

func putRecorded(t *testing.T, b Backend, rs ...sessions.Recorded) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, r := range rs {
			if err := tx.PutRecorded(ctx, r); err != nil {
				t.Fatalf("PutRecorded(%s): %v", r.Ref, err)
			}
		}
	})
}

func readRecorded(t *testing.T, b Backend, ref vigil.SessionRef) (sessions.Recorded, bool) {
	t.Helper()
	r, ok, err := b.RecordedSession(t.Context(), ref)
	if err != nil {
		t.Fatalf("RecordedSession(%s): %v", ref, err)
	}
	return r, ok
}

func listRecorded(t *testing.T, b Backend, f sessions.ListFilter) []vigil.SessionRef {
	t.Helper()
	rs, err := b.ListRecorded(t.Context(), f)
	if err != nil {
		t.Fatalf("ListRecorded(%+v): %v", f, err)
	}
	refs := []vigil.SessionRef{}
	for _, r := range rs {
		refs = append(refs, r.Ref)
	}
	return refs
}

func testRecordedRoundTrip(t *testing.T, b Backend) {
	want := newRecorded(alphaDM, sessions.KindOther, "langgraph")
	putRecorded(t, b, want)
	got, ok := readRecorded(t, b, alphaDM)
	if !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("RecordedSession = %+v, %v; want %+v", got, ok, want)
	}
	var inTx sessions.Recorded
	update(t, b, func(ctx context.Context, tx writeTx) {
		var err error
		if inTx, ok, err = tx.GetRecorded(ctx, alphaDM); err != nil || !ok {
			t.Fatalf("GetRecorded = %v, %v", ok, err)
		}
	})
	if !reflect.DeepEqual(inTx, want) {
		t.Errorf("GetRecorded = %+v, want %+v", inTx, want)
	}
	if _, ok := readRecorded(t, b, betaMain); ok {
		t.Error("a session never recorded reads as recorded")
	}
}

func testPutRecordedAgain(t *testing.T, b Backend) {
	putRecorded(t, b, newRecorded(alphaDM, sessions.KindOther, "langgraph"))
	again := sessions.Recorded{Ref: alphaDM, Kind: sessions.KindMain, CreatedAt: baseTime + 5, UpdatedAt: baseTime + 5}
	putRecorded(t, b, again)
	got, _ := readRecorded(t, b, alphaDM)
	want := sessions.Recorded{Ref: alphaDM, Kind: sessions.KindOther, Runtime: "langgraph", CreatedAt: baseTime, UpdatedAt: baseTime + 5}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded again without a runtime: %+v, want %+v (kind, runtime and creation kept)", got, want)
	}
	again.Runtime, again.UpdatedAt = "openai-agents", baseTime+7
	putRecorded(t, b, again)
	got, _ = readRecorded(t, b, alphaDM)
	want.Runtime, want.UpdatedAt = "openai-agents", baseTime+7
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("recorded again naming a runtime: %+v, want %+v", got, want)
	}
}

func testListRecorded(t *testing.T, b Backend) {
	kinds := map[vigil.SessionRef]string{alphaMain: sessions.KindMain, alphaChild: sessions.KindSubAgent, betaChild: sessions.KindSubAgent}
	for _, ref := range slices.Backward(every) {
		kind := kinds[ref]
		if kind == "" {
			kind = sessions.KindOther
		}
		putRecorded(t, b, newRecorded(ref, kind, ""))
	}
	if got := listRecorded(t, b, sessions.ListFilter{Limit: all}); !reflect.DeepEqual(got, every) {
		t.Errorf("ListRecorded = %v, want %v", got, every)
	}
	if got := listRecorded(t, b, sessions.ListFilter{After: alphaChild, Limit: 2}); !reflect.DeepEqual(got, every[3:5]) {
		t.Errorf("ListRecorded after %s, 2 = %v, want %v", alphaChild, got, every[3:5])
	}
	if got := listRecorded(t, b, sessions.ListFilter{AgentID: "beta", Limit: all}); !reflect.DeepEqual(got, every[4:]) {
		t.Errorf("ListRecorded of beta = %v, want %v", got, every[4:])
	}
	want := []vigil.SessionRef{alphaChild, betaChild}
	if got := listRecorded(t, b, sessions.ListFilter{Kind: sessions.KindSubAgent, Limit: all}); !reflect.DeepEqual(got, want) {
		t.Errorf("ListRecorded of sub-agents = %v, want %v", got, want)
	}
}

func testDeleteRecorded(t *testing.T, b Backend) {
	putRecorded(t, b, newRecorded(alphaDM, sessions.KindOther, ""), newRecorded(alphaChild, sessions.KindSubAgent, ""))
	update(t, b, func(ctx context.Context, tx writeTx) {
		if deleted, err := tx.DeleteRecorded(ctx, alphaDM); err != nil || !deleted {
			t.Fatalf("DeleteRecorded = %v, %v; want deleted", deleted, err)
		}
		if deleted, err := tx.DeleteRecorded(ctx, betaMain); err != nil || deleted {
			t.Fatalf("DeleteRecorded of a session never recorded = %v, %v", deleted, err)
		}
	})
	if _, ok := readRecorded(t, b, alphaDM); ok {
		t.Error("a deleted recorded session is still read")
	}
	if _, ok := readRecorded(t, b, alphaChild); !ok {
		t.Error("another recorded session went with the deletion")
	}
}

func testRecordedWritesRollBack(t *testing.T, b Backend) {
	kept := newRecorded(alphaDM, sessions.KindOther, "langgraph")
	putRecorded(t, b, kept)
	ctx := t.Context()
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	st := sessionTx(t, tx)
	moved := kept
	moved.Runtime, moved.UpdatedAt = "other", baseTime+9
	if err := st.PutRecorded(ctx, moved); err != nil {
		t.Fatalf("PutRecorded: %v", err)
	}
	if err := st.PutRecorded(ctx, newRecorded(betaMain, sessions.KindMain, "")); err != nil {
		t.Fatalf("PutRecorded: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if got, _ := readRecorded(t, b, alphaDM); !reflect.DeepEqual(got, kept) {
		t.Errorf("after a rolled-back write: %+v, want %+v", got, kept)
	}
	if _, ok := readRecorded(t, b, betaMain); ok {
		t.Error("a session recorded in a rolled-back transaction is read")
	}
}
