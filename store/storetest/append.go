package storetest

// Appending: the sequences Append hands out, the fields an event keeps,
// and dedupe keys.

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

func wantEvent(t *testing.T, what string, got, want vigil.Event) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %s\n want %s", what, fmtEvent(got), fmtEvent(want))
	}
}

func fmtEvent(e vigil.Event) string {
	payload := "nil"
	if e.Payload != nil {
		payload = fmt.Sprintf("%q", string(e.Payload))
	}
	return fmt.Sprintf("{Sequence:%d AgentID:%q SessionKey:%q SessionID:%q Kind:%q ActorType:%q ActorID:%q RunID:%q "+
		"OccurredAt:%d RecordedAt:%d Summary:%q Payload:%s DedupeKey:%q}",
		e.Sequence, e.AgentID, e.SessionKey, e.SessionID, e.Kind, e.ActorType, e.ActorID, e.RunID,
		e.OccurredAt, e.RecordedAt, e.Summary, payload, e.DedupeKey)
}

func testAppendSequences(t *testing.T, s vigil.Store) {
	var all []int64
	// Several sessions, several transactions, several events per transaction.
	all = append(all, appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2), newEvent(alphaMain, 3))...)
	all = append(all, appendAll(t, s, newEvent(alphaGlobal, 4))...)
	all = append(all, appendAll(t, s, newEvent(betaGlobal, 5), newEvent(alphaMain, 6))...)
	for i := 1; i < len(all); i++ {
		if all[i] <= all[i-1] {
			t.Fatalf("sequences %v are not strictly increasing across sessions and transactions", all)
		}
	}
	// Each event is stored under the sequence Append set.
	h := fullHistory(t, s, alphaMain)
	wantSequences(t, "History of alpha main", h.Events, all[0], all[2], all[5])
	for i, e := range h.Events {
		if want := fmt.Sprintf("event %d", []int{1, 3, 6}[i]); e.Summary != want {
			t.Errorf("event %d has summary %q, want %q", e.Sequence, e.Summary, want)
		}
	}
	wantSequences(t, "History of beta main", fullHistory(t, s, betaMain).Events, all[1])
	wantSequences(t, "History of alpha/global", fullHistory(t, s, alphaGlobal).Events, all[3])
	wantSequences(t, "History of beta/global", fullHistory(t, s, betaGlobal).Events, all[4])
	// A rolled-back transaction does not disturb later allocation.
	tx, err := s.BeginWrite(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	mustAppend(t, t.Context(), tx, newEvent(alphaMain, 7))
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	next := appendAll(t, s, newEvent(betaMain, 8))[0]
	if next <= all[len(all)-1] {
		t.Errorf("sequence after a rollback is %d, not above the last committed %d", next, all[len(all)-1])
	}
}

func testSequencesNeverReused(t *testing.T, s vigil.Store) {
	last := appendAll(t, s, newEvent(alphaMain, 1), newEvent(betaMain, 2))[1]
	check := func(what string, next int64, floor int64) {
		t.Helper()
		if next <= floor {
			t.Fatalf("%s: next sequence %d is not above %d, which was already handed out", what, next, floor)
		}
	}

	// Prune everything, the newest event included.
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	next := appendAll(t, s, newEvent(alphaMain, 3))[0]
	check("after pruning every event", next, last)
	last = next

	// Delete the session holding the newest event.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatal(err)
		}
	})
	next = appendAll(t, s, newEvent(alphaMain, 4))[0]
	check("after deleting the session with the newest event", next, last)
	last = next

	// Append, delete and append again inside one transaction.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		e := newEvent(betaGlobal, 5)
		check("in a transaction", mustAppend(t, ctx, tx, e), last)
		last = e.Sequence
		if err := tx.DeleteSession(ctx, betaGlobal); err != nil {
			t.Fatal(err)
		}
		again := newEvent(betaGlobal, 6)
		check("after a delete in the same transaction", mustAppend(t, ctx, tx, again), last)
		last = again.Sequence
		if _, err := tx.PruneEvents(ctx, math.MaxInt64, math.MaxInt64, 100); err != nil {
			t.Fatal(err)
		}
		n := newEvent(betaGlobal, 7)
		check("after a prune in the same transaction", mustAppend(t, ctx, tx, n), last)
		last = n.Sequence
	})
	next = appendAll(t, s, newEvent(betaMain, 8))[0]
	check("after the transaction", next, last)
	last = next

	// A dropped duplicate uses up a sequence that pruning or deleting the
	// original does not free.
	k := appendAll(t, s, withDedupe(newEvent(gammaOther, 9), "k"))[0]
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.Append(ctx, withDedupe(newEvent(gammaOther, 10), "k")); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
		if err := tx.DeleteSession(ctx, gammaOther); err != nil {
			t.Fatal(err)
		}
	})
	prune(t, s, math.MaxInt64, math.MaxInt64, 100)
	next = appendAll(t, s, newEvent(gammaOther, 11))[0]
	check("after a dropped duplicate, delete and prune", next, k+1)
}

func testEventRoundTrip(t *testing.T, s vigil.Store) {
	full := vigil.Event{
		AgentID:    "alpha",
		SessionKey: "agent:alpha:subagent:c1",
		SessionID:  "incarnation-7",
		Kind:       vigil.KindRunFailed,
		ActorType:  vigil.ActorAgent,
		ActorID:    "agent:alpha:main",
		RunID:      "run-42",
		OccurredAt: baseTime - 5_000,
		RecordedAt: baseTime,
		Summary:    "child run failed — ünïcödé ✓",
		Payload:    json.RawMessage(`{"channel":"slack","nested":{"a":[1,2,3]},"outcome":"error","turns":3}`),
		DedupeKey:  "run-42:failed",
	}
	bare := vigil.Event{
		AgentID: "beta", SessionKey: "global", Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem,
		OccurredAt: baseTime + 1, RecordedAt: baseTime + 2, Summary: "session compacted",
		Payload: json.RawMessage(`{"x":"y"}`),
	}
	e1, e2 := full, bare
	seqs := appendAll(t, s, &e1, &e2)
	full.Sequence, bare.Sequence = seqs[0], seqs[1]
	wantEvent(t, "Append left the event", e1, full)

	h := fullHistory(t, s, alphaChild)
	if len(h.Events) != 1 {
		t.Fatalf("History of %s has %d events, want 1", alphaChild, len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], full)
	h = fullHistory(t, s, betaGlobal)
	if len(h.Events) != 1 {
		t.Fatalf("History of %s has %d events, want 1", betaGlobal, len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], bare)

	// Every kind and actor type round-trips.
	kinds := []vigil.Kind{vigil.KindHumanDirectMessage, vigil.KindGoalChanged, vigil.KindChildSpawned,
		vigil.KindRunCompleted, vigil.KindRunFailed, vigil.KindCompacted}
	actors := []vigil.ActorType{vigil.ActorHuman, vigil.ActorAgent, vigil.ActorSystem}
	var evs []*vigil.Event
	for i, k := range kinds {
		e := newEvent(gammaOther, i)
		e.Kind, e.ActorType = k, actors[i%len(actors)]
		evs = append(evs, e)
	}
	appendAll(t, s, evs...)
	h = fullHistory(t, s, gammaOther)
	if len(h.Events) != len(evs) {
		t.Fatalf("History of %s has %d events, want %d", gammaOther, len(h.Events), len(evs))
	}
	for i, e := range evs {
		wantEvent(t, "History returned", h.Events[i], *e)
	}
}

func testEmptyFieldsRoundTrip(t *testing.T, s vigil.Store) {
	want := vigil.Event{
		AgentID: "alpha", SessionKey: "agent:alpha:main", Kind: vigil.KindGoalChanged, ActorType: vigil.ActorHuman,
		// SessionID, ActorID, RunID, Summary, DedupeKey empty; Payload nil.
	}
	e := want
	want.Sequence = appendAll(t, s, &e)[0]
	h := fullHistory(t, s, alphaMain)
	if len(h.Events) != 1 {
		t.Fatalf("History has %d events, want 1", len(h.Events))
	}
	got := h.Events[0]
	wantEvent(t, "History returned", got, want)
	if got.Payload != nil {
		t.Errorf("nil payload came back as %#v, want nil", got.Payload)
	}

	// Two events without a dedupe key, one with a payload and one without,
	// keep their own payloads.
	withPayload := newEvent(alphaMain, 1)
	withPayload.Payload = json.RawMessage(`{"turns":1}`)
	without := newEvent(alphaMain, 2)
	appendAll(t, s, withPayload, without)
	h = history(t, s, alphaMain, want.Sequence, 10)
	if len(h.Events) != 2 {
		t.Fatalf("History has %d events, want 2", len(h.Events))
	}
	wantEvent(t, "History returned", h.Events[0], *withPayload)
	wantEvent(t, "History returned", h.Events[1], *without)
	if h.Events[1].Payload != nil {
		t.Errorf("nil payload came back as %#v, want nil", h.Events[1].Payload)
	}
}

func testDedupeReturnsFirst(t *testing.T, s vigil.Store) {
	first := newEvent(alphaMain, 1)
	first.SessionID, first.ActorID, first.RunID = "inc-1", "agent:beta:main", "run-1"
	first.Payload = json.RawMessage(`{"outcome":"completed"}`)
	withDedupe(first, "k1")
	stored := *first
	stored.Sequence = appendAll(t, s, first)[0]

	second := newEvent(alphaMain, 2)
	second.Kind, second.ActorType, second.Summary = vigil.KindCompacted, vigil.ActorSystem, "something else"
	second.Payload = json.RawMessage(`{"other":true}`)
	withDedupe(second, "k1")
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		ok, err := tx.Append(ctx, second)
		if err != nil {
			t.Fatalf("Append duplicate: %v", err)
		}
		if ok {
			t.Fatalf("Append of a duplicate dedupe key reported appended (sequence %d)", second.Sequence)
		}
	})
	wantEvent(t, "Append of a duplicate filled the event with", *second, stored)

	// The first event is the only one, unchanged, and the version is its.
	h := fullHistory(t, s, alphaMain)
	if len(h.Events) != 1 {
		t.Fatalf("History has %d events after a duplicate, want 1", len(h.Events))
	}
	wantEvent(t, "History after a duplicate", h.Events[0], stored)
	wantBounds(t, "History after a duplicate", h, stored.Sequence, 0, stored.Sequence)
	wantVersion(t, s, alphaMain, stored.Sequence)

	// A duplicate of an event without payload fills a nil payload.
	noPayload := withDedupe(newEvent(betaMain, 3), "k2")
	storedNP := *noPayload
	storedNP.Sequence = appendAll(t, s, noPayload)[0]
	dup := withDedupe(newEvent(betaMain, 4), "k2")
	dup.Payload = json.RawMessage(`{"a":1}`)
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if ok, err := tx.Append(ctx, dup); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	wantEvent(t, "Append of a duplicate filled the event with", *dup, storedNP)
}

func testDedupeSameTx(t *testing.T, s vigil.Store) {
	var first, dup, after vigil.Event
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		first = *withDedupe(newEvent(alphaMain, 1), "k")
		mustAppend(t, ctx, tx, &first)
		dup = *withDedupe(newEvent(alphaMain, 2), "k")
		ok, err := tx.Append(ctx, &dup)
		if err != nil {
			t.Fatalf("Append duplicate: %v", err)
		}
		if ok {
			t.Fatal("Append of a key appended earlier in the same transaction reported appended")
		}
		wantEvent(t, "duplicate in the same transaction filled the event with", dup, first)
		after = *newEvent(alphaMain, 3)
		mustAppend(t, ctx, tx, &after)
		if v := txVersion(t, ctx, tx, alphaMain); v != after.Sequence {
			t.Errorf("Tx.Version = %d, want %d", v, after.Sequence)
		}
	})
	if after.Sequence < first.Sequence+2 {
		t.Errorf("append after a dedupe drop got sequence %d; the drop should have used up one after %d",
			after.Sequence, first.Sequence)
	}
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, first.Sequence, after.Sequence)
}

func testDedupeUsesSequence(t *testing.T, s vigil.Store) {
	a := appendAll(t, s, withDedupe(newEvent(alphaMain, 1), "k"))[0]
	// A transaction whose only append is dropped, committed.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		dup := withDedupe(newEvent(alphaMain, 2), "k")
		if ok, err := tx.Append(ctx, dup); err != nil || ok {
			t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
		}
	})
	b := appendAll(t, s, newEvent(betaMain, 3))[0]
	if b < a+2 {
		t.Errorf("after %d and a dropped duplicate, the next append got %d: the drop's sequence was reused", a, b)
	}
	// Several drops in a row use up one sequence each.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i := range 3 {
			dup := withDedupe(newEvent(alphaMain, 10+i), "k")
			if ok, err := tx.Append(ctx, dup); err != nil || ok {
				t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
			}
		}
	})
	c := appendAll(t, s, newEvent(betaMain, 4))[0]
	if c < b+4 {
		t.Errorf("after %d and three dropped duplicates, the next append got %d, want at least %d", b, c, b+4)
	}
}

func testDedupePerSession(t *testing.T, s vigil.Store) {
	refs := []vigil.SessionRef{alphaMain, betaMain, alphaGlobal, betaGlobal, alphaChild}
	var evs []*vigil.Event
	for i, r := range refs {
		evs = append(evs, withDedupe(newEvent(r, i), "same-key"))
	}
	seqs := appendAll(t, s, evs...) // fails unless every one is appended
	for i, r := range refs {
		wantSequences(t, "History of "+r.String(), fullHistory(t, s, r).Events, seqs[i])
	}
	// Each session's copy deduplicates against its own event only.
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		for i, r := range refs {
			dup := withDedupe(newEvent(r, 100+i), "same-key")
			ok, err := tx.Append(ctx, dup)
			if err != nil || ok {
				t.Fatalf("Append duplicate on %s = %v, %v; want false, nil", r, ok, err)
			}
			if dup.Sequence != seqs[i] || dup.Session() != r {
				t.Errorf("duplicate on %s filled with event %d of %s, want %d", r, dup.Sequence, dup.Session(), seqs[i])
			}
		}
	})
}

func testEmptyDedupeKey(t *testing.T, s vigil.Store) {
	seqs := appendAll(t, s, newEvent(alphaMain, 1), newEvent(alphaMain, 2))
	seqs = append(seqs, appendAll(t, s, newEvent(alphaMain, 3))...)
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, seqs...)
}

func testDedupeRetainedOnly(t *testing.T, s vigil.Store) {
	// After the session is deleted its dedupe keys are gone with its events.
	first := appendAll(t, s, withDedupe(newEvent(alphaMain, 1), "k"))[0]
	update(t, s, func(ctx context.Context, tx vigil.Tx) {
		if err := tx.DeleteSession(ctx, alphaMain); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	again := appendAll(t, s, withDedupe(newEvent(alphaMain, 2), "k"))[0] // fails unless appended
	if again <= first {
		t.Errorf("re-appended event got sequence %d, not above %d", again, first)
	}
	// After the event is pruned its key is no longer present either.
	if n := prune(t, s, again, math.MaxInt64, 10); n != 1 {
		t.Fatalf("PruneEvents deleted %d events, want 1", n)
	}
	third := appendAll(t, s, withDedupe(newEvent(alphaMain, 3), "k"))[0]
	wantSequences(t, "History", fullHistory(t, s, alphaMain).Events, third)
}
