package sessionstest

// Child runs: what PutRun stores and the reads return.

import (
	"context"
	"reflect"
	"testing"

	"github.com/vigilhq/vigil/sessions"
)

func putRuns(t *testing.T, b Backend, rs ...sessions.Run) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, r := range rs {
			if err := tx.PutRun(ctx, r); err != nil {
				t.Fatalf("PutRun(%s): %v", r.RunID, err)
			}
		}
	})
}

// wantRun checks what a read of one run found.
func wantRun(t *testing.T, what string, got sessions.Run, found bool, want sessions.Run) {
	t.Helper()
	if !found {
		t.Errorf("%s: not found, want %+v", what, want)
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func testRunRoundTrip(t *testing.T, b Backend) {
	running := sessions.Run{RunID: "run-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime}
	ended := sessions.Run{RunID: "run-2", Session: betaChild, Requester: betaMain.Key, StartedAt: baseTime + 1,
		EndedAt: baseTime + 9, Outcome: "timeout"}
	// A run nobody asked for (started by a person, say).
	bare := sessions.Run{RunID: "run-3", Session: alphaGlobal, StartedAt: baseTime + 2}
	putRuns(t, b, running, ended, bare)
	for _, want := range []sessions.Run{running, ended, bare} {
		got, ok := readRun(t, b, want.RunID)
		wantRun(t, "Run("+want.RunID+")", got, ok, want)
	}
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, want := range []sessions.Run{running, ended, bare} {
			got, ok, err := tx.GetRun(ctx, want.RunID)
			if err != nil {
				t.Fatalf("Tx.GetRun(%s): %v", want.RunID, err)
			}
			wantRun(t, "Tx.GetRun("+want.RunID+")", got, ok, want)
		}
		if r, ok, err := tx.GetRun(ctx, "run-unknown"); err != nil || ok {
			t.Errorf("Tx.GetRun of an unknown run = %+v, %v, %v; want not found", r, ok, err)
		}
	})
}

func testRunEnd(t *testing.T, b Backend) {
	run := sessions.Run{RunID: "run-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime}
	putRuns(t, b, run)
	run.EndedAt, run.Outcome = baseTime+30, "completed"
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.PutRun(ctx, run); err != nil {
			t.Fatalf("PutRun: %v", err)
		}
		got, ok, err := tx.GetRun(ctx, run.RunID)
		if err != nil {
			t.Fatalf("Tx.GetRun: %v", err)
		}
		wantRun(t, "Tx.GetRun in the ending transaction", got, ok, run)
	})
	got, ok := readRun(t, b, run.RunID)
	wantRun(t, "Run after it ended", got, ok, run)
}

func testOpenRuns(t *testing.T, b Backend) {
	if got, err := b.OpenRuns(t.Context()); err != nil || len(got) != 0 {
		t.Fatalf("OpenRuns of an empty store = %+v, %v", got, err)
	}
	late := sessions.Run{RunID: "run-a", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime + 5}
	early := sessions.Run{RunID: "run-b", Session: betaChild, Requester: betaMain.Key, StartedAt: baseTime}
	ended := sessions.Run{RunID: "run-c", Session: alphaGlobal, StartedAt: baseTime - 5, EndedAt: baseTime, Outcome: "completed"}
	putRuns(t, b, late, early, ended)
	got, err := b.OpenRuns(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := []sessions.Run{early, late}; !reflect.DeepEqual(got, want) {
		t.Fatalf("OpenRuns = %+v, want %+v", got, want)
	}
	late.EndedAt, late.Outcome = baseTime+9, "error"
	putRuns(t, b, late)
	if got, err := b.OpenRuns(t.Context()); err != nil || !reflect.DeepEqual(got, []sessions.Run{early}) {
		t.Fatalf("OpenRuns after an end = %+v, %v", got, err)
	}
}
