package sessionstest

// Upstream links: what PutUpstreamLink stores, which links WatchedLinks
// lists, and what deletes a link and what leaves it.

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// newLink is a complete link of ref on host; its marker is JSON as
// package upstream writes one, with a detail that tells links apart.
func newLink(ref vigil.SessionRef, host string) sessions.Link {
	return sessions.Link{Session: ref, CatalogID: "claude-cli", HostID: host, ThreadID: "t-" + ref.Key,
		Marker:    []byte(fmt.Sprintf(`{"format":"claude-cli","path":"/home/u/.claude/projects/p/%s.jsonl","offset":0,"linked":"2026-01-01T00:00:00Z","generation":0}`, ref.AgentID)),
		CreatedAt: baseTime, UpdatedAt: baseTime}
}

func putLinks(t *testing.T, b Backend, ls ...sessions.Link) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, l := range ls {
			if err := tx.PutUpstreamLink(ctx, l); err != nil {
				t.Fatalf("PutUpstreamLink(%s): %v", l.Session, err)
			}
		}
	})
}

func readLink(t *testing.T, b Backend, ref vigil.SessionRef) (sessions.Link, bool) {
	t.Helper()
	l, ok, err := b.UpstreamLink(t.Context(), ref)
	if err != nil {
		t.Fatalf("UpstreamLink(%s): %v", ref, err)
	}
	return l, ok
}

func watchedLinks(t *testing.T, b Backend, host string, after vigil.SessionRef, limit int) []vigil.SessionRef {
	t.Helper()
	ls, err := b.WatchedLinks(t.Context(), host, after, limit)
	if err != nil {
		t.Fatalf("WatchedLinks(%s, %s, %d): %v", host, after, limit, err)
	}
	refs := []vigil.SessionRef{}
	for _, l := range ls {
		refs = append(refs, l.Session)
	}
	return refs
}

// watch gives target a watcher.
func watch(t *testing.T, b Backend, watcher string, target vigil.SessionRef) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.PutCursor(ctx, vigil.Cursor{Watcher: watcher, Target: target, UpdatedAt: baseTime}); err != nil {
			t.Fatalf("PutCursor(%s on %s): %v", watcher, target, err)
		}
	})
}

// wantLink checks what a read of one link found.
func wantLink(t *testing.T, what string, got sessions.Link, found bool, want sessions.Link) {
	t.Helper()
	switch {
	case !found:
		t.Errorf("%s: not found, want %+v", what, want)
	case !reflect.DeepEqual(got, want):
		t.Errorf("%s:\n got  %+v (marker %s)\n want %+v (marker %s)", what, got, got.Marker, want, want.Marker)
	}
}

func wantNoLink(t *testing.T, what string, b Backend, ref vigil.SessionRef) {
	t.Helper()
	if l, ok := readLink(t, b, ref); ok {
		t.Errorf("%s: UpstreamLink(%s) = %+v, want none", what, ref, l)
	}
}

func testLinkRoundTrip(t *testing.T, b Backend) {
	wantNoLink(t, "an empty store", b, alphaDM)
	local := newLink(alphaDM, sessions.HostGateway)
	remote := newLink(betaChild, "node:laptop")
	remote.UpdatedAt = baseTime + 5
	putLinks(t, b, local, remote)
	for _, want := range []sessions.Link{local, remote} {
		got, ok := readLink(t, b, want.Session)
		wantLink(t, "UpstreamLink("+want.Session.Key+")", got, ok, want)
	}
	update(t, b, func(ctx context.Context, tx writeTx) {
		got, ok, err := tx.GetUpstreamLink(ctx, local.Session)
		if err != nil {
			t.Fatalf("Tx.GetUpstreamLink: %v", err)
		}
		wantLink(t, "Tx.GetUpstreamLink", got, ok, local)
		if l, ok, err := tx.GetUpstreamLink(ctx, alphaMain); err != nil || ok {
			t.Errorf("Tx.GetUpstreamLink of a session without one = %+v, %v, %v; want none", l, ok, err)
		}
	})
}

func testPutLinkReplaces(t *testing.T, b Backend) {
	first := newLink(alphaDM, sessions.HostGateway)
	putLinks(t, b, first)
	again := sessions.Link{Session: alphaDM, CatalogID: "codex", HostID: "node:laptop", ThreadID: "t-2",
		Marker: []byte(`{"offset":42}`), CreatedAt: baseTime + 100, UpdatedAt: baseTime + 100}
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.PutUpstreamLink(ctx, again); err != nil {
			t.Fatalf("PutUpstreamLink: %v", err)
		}
		want := again
		want.CreatedAt = first.CreatedAt
		got, ok, err := tx.GetUpstreamLink(ctx, alphaDM)
		if err != nil {
			t.Fatalf("Tx.GetUpstreamLink: %v", err)
		}
		wantLink(t, "Tx.GetUpstreamLink in the replacing transaction", got, ok, want)
	})
	want := again
	want.CreatedAt = first.CreatedAt
	got, ok := readLink(t, b, alphaDM)
	wantLink(t, "a replaced link (it keeps when it was first made)", got, ok, want)
}

func testLinksKeyedByAgentAndKey(t *testing.T, b Backend) {
	alpha, beta := newLink(alphaGlobal, sessions.HostGateway), newLink(betaGlobal, sessions.HostGateway)
	beta.ThreadID = "t-beta"
	putLinks(t, b, alpha, beta)
	for _, want := range []sessions.Link{alpha, beta} {
		got, ok := readLink(t, b, want.Session)
		wantLink(t, "UpstreamLink("+want.Session.String()+")", got, ok, want)
	}
	deleted := false
	update(t, b, func(ctx context.Context, tx writeTx) {
		var err error
		if deleted, err = tx.DeleteUpstreamLink(ctx, alphaGlobal); err != nil {
			t.Fatalf("DeleteUpstreamLink: %v", err)
		}
	})
	if !deleted {
		t.Error("DeleteUpstreamLink of a link = false, want true")
	}
	wantNoLink(t, "after its deletion", b, alphaGlobal)
	got, ok := readLink(t, b, betaGlobal)
	wantLink(t, "the other agent's link of the same bare key", got, ok, beta)
	update(t, b, func(ctx context.Context, tx writeTx) {
		if again, err := tx.DeleteUpstreamLink(ctx, alphaGlobal); err != nil || again {
			t.Errorf("DeleteUpstreamLink of no link = %v, %v; want false", again, err)
		}
	})
}

func testWatchedLinks(t *testing.T, b Backend) {
	// Every session has a link of the gateway's host but betaMain's,
	// which another host follows; alphaMain has no watcher.
	for _, ref := range every {
		host := sessions.HostGateway
		if ref == betaMain {
			host = "node:laptop"
		}
		putLinks(t, b, newLink(ref, host))
		if ref != alphaMain {
			watch(t, b, "agent:gamma:main", ref)
		}
	}
	// A second watcher lists a link once.
	watch(t, b, "agent:alpha:main", alphaDM)
	want := []vigil.SessionRef{alphaDM, alphaChild, alphaGlobal, betaChild, betaGlobal}
	if got := watchedLinks(t, b, sessions.HostGateway, vigil.SessionRef{}, all); !reflect.DeepEqual(got, want) {
		t.Errorf("WatchedLinks of the gateway's host = %v, want %v", got, want)
	}
	if got := watchedLinks(t, b, "node:laptop", vigil.SessionRef{}, all); !reflect.DeepEqual(got, []vigil.SessionRef{betaMain}) {
		t.Errorf("WatchedLinks of another host = %v, want [%s]", got, betaMain)
	}
	if got := watchedLinks(t, b, "node:elsewhere", vigil.SessionRef{}, all); len(got) != 0 {
		t.Errorf("WatchedLinks of a host without links = %v, want none", got)
	}
	// Pages: after a position, up to a limit.
	if got := watchedLinks(t, b, sessions.HostGateway, vigil.SessionRef{}, 2); !reflect.DeepEqual(got, want[:2]) {
		t.Errorf("WatchedLinks, first page of 2 = %v, want %v", got, want[:2])
	}
	if got := watchedLinks(t, b, sessions.HostGateway, alphaChild, 2); !reflect.DeepEqual(got, want[2:4]) {
		t.Errorf("WatchedLinks after %s, 2 = %v, want %v", alphaChild, got, want[2:4])
	}
	if got := watchedLinks(t, b, sessions.HostGateway, betaGlobal, 2); len(got) != 0 {
		t.Errorf("WatchedLinks after the last = %v, want none", got)
	}
	// A link whose session lost its last watcher is not listed.
	update(t, b, func(ctx context.Context, tx writeTx) {
		if _, err := tx.DeleteCursor(ctx, "agent:gamma:main", alphaChild); err != nil {
			t.Fatalf("DeleteCursor: %v", err)
		}
	})
	if got := watchedLinks(t, b, sessions.HostGateway, vigil.SessionRef{}, all); !reflect.DeepEqual(got, []vigil.SessionRef{alphaDM, alphaGlobal, betaChild, betaGlobal}) {
		t.Errorf("WatchedLinks once %s has no watcher = %v", alphaChild, got)
	}
}

func testDeletingASessionDeletesItsLink(t *testing.T, b Backend) {
	putLinks(t, b, newLink(alphaDM, sessions.HostGateway), newLink(alphaChild, sessions.HostGateway))
	watch(t, b, "agent:alpha:main", alphaDM)
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.DeleteSession(ctx, alphaDM); err != nil {
			t.Fatalf("DeleteSession: %v", err)
		}
	})
	wantNoLink(t, "after the session's deletion", b, alphaDM)
	if _, ok := readLink(t, b, alphaChild); !ok {
		t.Error("another session's link went with the deletion")
	}
}

func testResettingLeavesTheLink(t *testing.T, b Backend) {
	l := newLink(alphaMain, sessions.HostGateway)
	putLinks(t, b, l)
	watch(t, b, alphaMain.Key, alphaDM)
	// A reset drops what the session watches; its row and transcript go
	// only with DeleteSessionRow, which the gateway's delete pairs with
	// DeleteSession. Neither of the first two touches the link.
	update(t, b, func(ctx context.Context, tx writeTx) {
		if _, err := tx.DeleteWatcherCursors(ctx, alphaMain.Key); err != nil {
			t.Fatalf("DeleteWatcherCursors: %v", err)
		}
	})
	got, ok := readLink(t, b, alphaMain)
	wantLink(t, "after the session's reset", got, ok, l)
}

func testLinkWritesRollBack(t *testing.T, b Backend) {
	kept := newLink(alphaDM, sessions.HostGateway)
	putLinks(t, b, kept)
	ctx := t.Context()
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	st := sessionTx(t, tx)
	moved := kept
	moved.Marker, moved.UpdatedAt = []byte(`{"offset":99}`), baseTime+9
	if err := st.PutUpstreamLink(ctx, moved); err != nil {
		t.Fatalf("PutUpstreamLink: %v", err)
	}
	if err := st.PutUpstreamLink(ctx, newLink(betaMain, sessions.HostGateway)); err != nil {
		t.Fatalf("PutUpstreamLink: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	got, ok := readLink(t, b, alphaDM)
	wantLink(t, "a link after a rolled-back move", got, ok, kept)
	wantNoLink(t, "a link put in a rolled-back transaction", b, betaMain)
}
