package sessionstest

// Session rows: what PutSession stores and the reads return, labels, and
// listing.

import (
	"context"
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

func testSessionRoundTrip(t *testing.T, b Backend) {
	full := newSession(alphaChild, sessions.KindSubAgent, "researcher — ünïcödé")
	bare := sessions.Session{Ref: betaGlobal, SessionID: "inc-1", Kind: sessions.KindOther, CreatedAt: baseTime, UpdatedAt: baseTime}
	// A goal with only a status is still a goal.
	statusOnly := newSession(alphaMain, sessions.KindMain, "")
	statusOnly.Goal = &sessions.Goal{Status: sessions.GoalPaused}
	putSessions(t, b, full, bare, statusOnly)
	for _, want := range []sessions.Session{full, bare, statusOnly} {
		got, ok := readSession(t, b, want.Ref)
		wantSession(t, "Session("+want.Ref.String()+")", got, ok, want)
	}
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, want := range []sessions.Session{full, bare, statusOnly} {
			got, ok, err := tx.GetSession(ctx, want.Ref)
			if err != nil {
				t.Fatalf("Tx.GetSession(%s): %v", want.Ref, err)
			}
			wantSession(t, "Tx.GetSession("+want.Ref.String()+")", got, ok, want)
		}
	})
}

func testPutSessionReplaces(t *testing.T, b Backend) {
	first := newSession(alphaMain, sessions.KindMain, "lead")
	putSessions(t, b, first)
	// A reset: a new incarnation, no goal, another label, inbox read on.
	// CreatedAt is kept as the gateway keeps it: whether a replacement
	// may change it is not part of the contract.
	next := first
	next.SessionID, next.Label, next.SpawnedBy, next.Goal = "inc-2", "lead-2", "", nil
	next.InboxSeen, next.UpdatedAt = 9, baseTime+50
	putSessions(t, b, next)
	got, ok := readSession(t, b, alphaMain)
	wantSession(t, "Session after replacing", got, ok, next)
	wantRefs(t, "ListSessions after replacing", list(t, b, sessions.ListFilter{Limit: all}), alphaMain)
	if s, ok := byLabel(t, b, alphaMain.AgentID, "lead"); ok {
		t.Errorf("SessionByLabel(the replaced label) = %s, want not found", fmtSession(s))
	}
	got, ok = byLabel(t, b, alphaMain.AgentID, "lead-2")
	wantSession(t, "SessionByLabel(the new label)", got, ok, next)

	// And a goal set again.
	again := next
	again.Goal = &sessions.Goal{Objective: "again", Status: sessions.GoalBlocked, UpdatedAt: baseTime + 60}
	putSessions(t, b, again)
	got, ok = readSession(t, b, alphaMain)
	wantSession(t, "Session after setting a goal again", got, ok, again)
}

func testKeyedByAgentAndKey(t *testing.T, b Backend) {
	alpha := newSession(alphaGlobal, sessions.KindOther, "shared")
	beta := newSession(betaGlobal, sessions.KindOther, "shared")
	beta.SessionID = "inc-beta"
	putSessions(t, b, alpha, beta)
	ms := appendMessages(t, b, newMessage(alphaGlobal, 1), newMessage(betaGlobal, 2))

	got, ok := readSession(t, b, alphaGlobal)
	wantSession(t, "Session(alpha/global)", got, ok, alpha)
	got, ok = readSession(t, b, betaGlobal)
	wantSession(t, "Session(beta/global)", got, ok, beta)
	got, ok = byLabel(t, b, "beta", "shared")
	wantSession(t, "SessionByLabel(beta, shared)", got, ok, beta)
	wantMessages(t, "Messages(alpha/global)", messages(t, b, alphaGlobal, 0, all), ms[0])
	wantMessages(t, "Messages(beta/global)", messages(t, b, betaGlobal, 0, all), ms[1])

	deleteSessionRow(t, b, alphaGlobal)
	got, ok = readSession(t, b, betaGlobal)
	wantSession(t, "Session(beta/global) after deleting alpha/global", got, ok, beta)
	wantMessages(t, "Messages(beta/global) after deleting alpha/global", messages(t, b, betaGlobal, 0, all), ms[1])
}

func testSessionByLabel(t *testing.T, b Backend) {
	lead := newSession(alphaMain, sessions.KindMain, "lead")
	helper := newSession(alphaChild, sessions.KindSubAgent, "helper")
	other := newSession(betaMain, sessions.KindMain, "beta-lead")
	putSessions(t, b, lead, helper, other, newSession(alphaDM, sessions.KindOther, ""))
	got, ok := byLabel(t, b, "alpha", "helper")
	wantSession(t, "SessionByLabel(alpha, helper)", got, ok, helper)
	got, ok = byLabel(t, b, "alpha", "lead")
	wantSession(t, "SessionByLabel(alpha, lead)", got, ok, lead)
	for _, q := range []struct{ agent, label string }{
		{"alpha", "beta-lead"}, // another agent's label
		{"beta", "lead"},
		{"alpha", "nobody"},
	} {
		if s, ok := byLabel(t, b, q.agent, q.label); ok {
			t.Errorf("SessionByLabel(%s, %q) = %s, want not found", q.agent, q.label, fmtSession(s))
		}
	}
}

func testLabelConflict(t *testing.T, b Backend) {
	holder := newSession(alphaMain, sessions.KindMain, "lead")
	putSessions(t, b, holder)
	taker := newSession(alphaChild, sessions.KindSubAgent, "lead")

	put := func(s sessions.Session) error {
		t.Helper()
		tx, err := b.BeginWrite(t.Context())
		if err != nil {
			t.Fatalf("BeginWrite: %v", err)
		}
		defer tx.Rollback()
		if err := sessionTx(t, tx).PutSession(t.Context(), s); err != nil {
			return err
		}
		return tx.Commit()
	}
	if err := put(taker); !errors.Is(err, sessions.ErrConflict) {
		t.Fatalf("PutSession with a label another session of the agent has = %v, want an error wrapping ErrConflict", err)
	}
	if s, ok := readSession(t, b, alphaChild); ok {
		t.Errorf("the conflicting session was stored: %s", fmtSession(s))
	}
	got, ok := byLabel(t, b, "alpha", "lead")
	wantSession(t, "SessionByLabel after the conflict", got, ok, holder)

	// The same session keeps its own label; another agent may use it.
	holder.UpdatedAt++
	if err := put(holder); err != nil {
		t.Errorf("PutSession of the label's own holder: %v", err)
	}
	if err := put(newSession(betaMain, sessions.KindMain, "lead")); err != nil {
		t.Errorf("PutSession of another agent's session with the same label: %v", err)
	}
	// A label the holder gave up is free, in the same transaction too.
	update(t, b, func(ctx context.Context, tx writeTx) {
		holder.Label = "former-lead"
		if err := tx.PutSession(ctx, holder); err != nil {
			t.Fatalf("PutSession giving up the label: %v", err)
		}
		if err := tx.PutSession(ctx, taker); err != nil {
			t.Fatalf("PutSession taking a label given up in the same transaction: %v", err)
		}
	})
	got, ok = byLabel(t, b, "alpha", "lead")
	wantSession(t, "SessionByLabel after the label changed hands", got, ok, taker)
	// A label taken earlier in the same transaction conflicts too.
	tx, err := b.BeginWrite(t.Context())
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	defer tx.Rollback()
	stx := sessionTx(t, tx)
	if err := stx.PutSession(t.Context(), newSession(alphaDM, sessions.KindOther, "dm")); err != nil {
		t.Fatal(err)
	}
	if err := stx.PutSession(t.Context(), newSession(alphaGlobal, sessions.KindOther, "dm")); !errors.Is(err, sessions.ErrConflict) {
		t.Errorf("PutSession with a label taken earlier in the same transaction = %v, want an error wrapping ErrConflict", err)
	}
}

// putEvery stores each session of the suite, in an order unlike the
// listing's, with kinds: main for the mains, subagent for the children,
// other for the rest.
func putEvery(t *testing.T, b Backend) map[vigil.SessionRef]sessions.Session {
	t.Helper()
	kinds := map[vigil.SessionRef]string{alphaMain: sessions.KindMain, betaMain: sessions.KindMain,
		alphaChild: sessions.KindSubAgent, betaChild: sessions.KindSubAgent}
	out := map[vigil.SessionRef]sessions.Session{}
	var ss []sessions.Session
	for _, i := range []int{6, 1, 4, 0, 5, 3, 2} {
		ref := every[i]
		kind, ok := kinds[ref]
		if !ok {
			kind = sessions.KindOther
		}
		s := newSession(ref, kind, "")
		out[ref] = s
		ss = append(ss, s)
	}
	putSessions(t, b, ss...)
	return out
}

func testListOrder(t *testing.T, b Backend) {
	stored := putEvery(t, b)
	var want []sessions.Session
	for _, ref := range every {
		want = append(want, stored[ref])
	}
	wantSessions(t, "ListSessions", list(t, b, sessions.ListFilter{Limit: all}), want...)
}

func testListPages(t *testing.T, b Backend) {
	putEvery(t, b)
	pages := []struct {
		after vigil.SessionRef
		limit int
		want  []vigil.SessionRef
	}{
		{vigil.SessionRef{}, 3, every[0:3]},
		{every[2], 3, every[3:6]},
		{every[5], 3, every[6:]},
		{every[6], 3, nil},
		{vigil.SessionRef{}, 1, every[0:1]},
		{vigil.SessionRef{}, all, every},
		// A position that names no session: after it in the order.
		{vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:m"}, 2, every[1:3]},
		{vigil.SessionRef{AgentID: "alpha", Key: "zzz"}, 2, every[4:6]},
		{vigil.SessionRef{AgentID: "b"}, all, every[4:]},
		{vigil.SessionRef{AgentID: "zeta"}, all, nil},
	}
	for _, p := range pages {
		wantRefs(t, "ListSessions(after "+p.after.String()+")", list(t, b, sessions.ListFilter{After: p.after, Limit: p.limit}), p.want...)
	}
}

func testListFilters(t *testing.T, b Backend) {
	putEvery(t, b)
	filters := []struct {
		f    sessions.ListFilter
		want []vigil.SessionRef
	}{
		{sessions.ListFilter{AgentID: "alpha"}, []vigil.SessionRef{alphaDM, alphaMain, alphaChild, alphaGlobal}},
		{sessions.ListFilter{AgentID: "beta"}, []vigil.SessionRef{betaMain, betaChild, betaGlobal}},
		{sessions.ListFilter{AgentID: "gamma"}, nil},
		{sessions.ListFilter{Kind: sessions.KindMain}, []vigil.SessionRef{alphaMain, betaMain}},
		{sessions.ListFilter{Kind: sessions.KindOther}, []vigil.SessionRef{alphaDM, alphaGlobal, betaGlobal}},
		{sessions.ListFilter{AgentID: "beta", Kind: sessions.KindSubAgent}, []vigil.SessionRef{betaChild}},
		{sessions.ListFilter{AgentID: "alpha", Kind: sessions.KindOther, After: alphaDM}, []vigil.SessionRef{alphaGlobal}},
		{sessions.ListFilter{Kind: sessions.KindOther, After: alphaGlobal}, []vigil.SessionRef{betaGlobal}},
		{sessions.ListFilter{AgentID: "alpha", After: alphaMain, Limit: 1}, []vigil.SessionRef{alphaChild}},
	}
	for _, c := range filters {
		if c.f.Limit == 0 {
			c.f.Limit = all
		}
		wantRefs(t, "ListSessions("+fmtFilter(c.f)+")", list(t, b, c.f), c.want...)
	}
}

func fmtFilter(f sessions.ListFilter) string {
	return "agent " + f.AgentID + ", kind " + f.Kind + ", after " + f.After.String()
}

func testDeleteSessionRow(t *testing.T, b Backend) {
	gone := newSession(alphaChild, sessions.KindSubAgent, "helper")
	kept := newSession(alphaMain, sessions.KindMain, "lead")
	putSessions(t, b, gone, kept)
	ms := appendMessages(t, b, newMessage(alphaChild, 1), newMessage(alphaMain, 2), newMessage(alphaChild, 3))
	runs := []sessions.Run{
		{RunID: "run-gone-1", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime},
		{RunID: "run-gone-2", Session: alphaChild, Requester: alphaMain.Key, StartedAt: baseTime, EndedAt: baseTime + 5, Outcome: "completed"},
		{RunID: "run-kept", Session: alphaMain, Requester: betaMain.Key, StartedAt: baseTime},
	}
	putRuns(t, b, runs...)

	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.DeleteSessionRow(ctx, alphaChild); err != nil {
			t.Fatalf("DeleteSessionRow: %v", err)
		}
		if s, ok, err := tx.GetSession(ctx, alphaChild); err != nil || ok {
			t.Errorf("Tx.GetSession after DeleteSessionRow = %s, %v, %v; want not found", fmtSession(s), ok, err)
		}
		if ms, err := tx.MessagesAfter(ctx, alphaChild, 0, all); err != nil || len(ms) != 0 {
			t.Errorf("Tx.MessagesAfter after DeleteSessionRow = %s, %v; want none", fmtMessages(ms), err)
		}
		if r, ok, err := tx.GetRun(ctx, "run-gone-1"); err != nil || ok {
			t.Errorf("Tx.GetRun after DeleteSessionRow = %+v, %v, %v; want not found", r, ok, err)
		}
	})
	if s, ok := readSession(t, b, alphaChild); ok {
		t.Errorf("Session after DeleteSessionRow = %s, want not found", fmtSession(s))
	}
	wantMessages(t, "Messages after DeleteSessionRow", messages(t, b, alphaChild, 0, all))
	for _, id := range []string{"run-gone-1", "run-gone-2"} {
		if r, ok := readRun(t, b, id); ok {
			t.Errorf("Run(%s) after DeleteSessionRow = %+v, want not found", id, r)
		}
	}
	wantRefs(t, "ListSessions after DeleteSessionRow", list(t, b, sessions.ListFilter{Limit: all}), alphaMain)
	// Another session keeps its row, transcript and runs; the label is
	// free again.
	got, ok := readSession(t, b, alphaMain)
	wantSession(t, "the other session", got, ok, kept)
	wantMessages(t, "the other session's transcript", messages(t, b, alphaMain, 0, all), ms[1])
	r, ok := readRun(t, b, "run-kept")
	wantRun(t, "the other session's run", r, ok, runs[2])
	if s, ok := byLabel(t, b, "alpha", "helper"); ok {
		t.Errorf("SessionByLabel(the deleted session's label) = %s, want not found", fmtSession(s))
	}
	putSessions(t, b, newSession(alphaDM, sessions.KindOther, "helper"))
}

func testSessionsAreTheCallersToChange(t *testing.T, b Backend) {
	putSessions(t, b, newSession(alphaChild, sessions.KindSubAgent, ""))
	const written = "ship it"
	update(t, b, func(ctx context.Context, tx writeTx) {
		// Locked to change, as the gateway locks a session it writes: a
		// store may keep in the transaction what it reads under the lock.
		if err := tx.Lock(ctx, []vigil.Lock{{Session: alphaChild, Intent: vigil.LockToChange, Appends: 1}}); err != nil {
			t.Fatalf("Lock(%s): %v", alphaChild, err)
		}
		get := func(what string) sessions.Session {
			t.Helper()
			s, ok, err := tx.GetSession(ctx, alphaChild)
			if err != nil || !ok {
				t.Fatalf("Tx.GetSession(%s) %s: found %v, %v", alphaChild, what, ok, err)
			}
			if s.Goal == nil || s.Goal.Objective != written {
				t.Errorf("Tx.GetSession(%s) %s: goal %+v, want the objective written, %q", alphaChild, what, s.Goal, written)
			}
			return s
		}
		s, _, err := tx.GetSession(ctx, alphaChild)
		if err != nil {
			t.Fatalf("Tx.GetSession(%s): %v", alphaChild, err)
		}
		s.Goal = &sessions.Goal{Objective: written, Status: sessions.GoalActive, UpdatedAt: baseTime + 9}
		if err := tx.PutSession(ctx, s); err != nil {
			t.Fatalf("PutSession(%s): %v", alphaChild, err)
		}
		s.Goal.Objective = "changed by the writer after its write"
		read := get("after the write")
		if read.Goal != nil {
			read.Goal.Objective = "changed by a reader"
		}
		get("after a reader changed its copy")
	})
	got, ok := readSession(t, b, alphaChild)
	if !ok || got.Goal == nil || got.Goal.Objective != written {
		t.Errorf("Session(%s) once committed: found %v, goal %+v, want the objective written, %q", alphaChild, ok, got.Goal, written)
	}
}
