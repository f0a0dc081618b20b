package sessionstest

// Push configs: what PutPushConfig stores, how they are listed, counted
// and deleted, and that they go with their session.

import (
	"context"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// newPushConfig is a complete config on ref by owner.
func newPushConfig(ref vigil.SessionRef, owner, id string) sessions.PushConfig {
	return sessions.PushConfig{Session: ref, Owner: owner, ID: id, ActingAs: alphaMain,
		URL: "https://hooks.example/" + id, Token: "a-secret-of-" + id, AuthScheme: "Bearer", AuthCredentials: "cred-" + id,
		Protocol: "1.0", CreatedAt: baseTime + 5}
}

func putPushConfigs(t *testing.T, b Backend, ps ...sessions.PushConfig) {
	t.Helper()
	update(t, b, func(ctx context.Context, tx writeTx) {
		for _, p := range ps {
			if err := tx.PutPushConfig(ctx, p); err != nil {
				t.Fatalf("PutPushConfig(%s on %s): %v", p.ID, p.Session, err)
			}
		}
	})
}

func pushConfigs(t *testing.T, b Backend, f sessions.PushFilter) []sessions.PushConfig {
	t.Helper()
	ps, err := b.PushConfigs(t.Context(), f)
	if err != nil {
		t.Fatalf("PushConfigs(%+v): %v", f, err)
	}
	return ps
}

func wantPushConfigs(t *testing.T, what string, got []sessions.PushConfig, want ...sessions.PushConfig) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got  %+v\n want %+v", what, got, want)
	}
}

func countPushConfigs(t *testing.T, b Backend, ref vigil.SessionRef, owner string) sessions.PushCount {
	t.Helper()
	var n sessions.PushCount
	update(t, b, func(ctx context.Context, tx writeTx) {
		var err error
		if n, err = tx.CountPushConfigs(ctx, ref, owner); err != nil {
			t.Fatalf("CountPushConfigs(%s, %s): %v", ref, owner, err)
		}
	})
	return n
}

func testPushConfigRoundTrip(t *testing.T, b Backend) {
	full := newPushConfig(alphaChild, "admin|root", "c1")
	// A person's config, without authentication: the empty fields stay empty.
	bare := sessions.PushConfig{Session: betaGlobal, Owner: "admin|ops", ID: "c2", URL: "http://127.0.0.1:9/hook",
		Token: "whsec_c2", Protocol: "0.3", CreatedAt: baseTime}
	other := newPushConfig(alphaGlobal, "admin|ops", "c3")
	putPushConfigs(t, b, bare, full, other)
	wantPushConfigs(t, "PushConfigs of every session", pushConfigs(t, b, sessions.PushFilter{}), full, other, bare)
	wantPushConfigs(t, "PushConfigs of one session", pushConfigs(t, b, sessions.PushFilter{Session: alphaChild}), full)
	wantPushConfigs(t, "PushConfigs of one owner", pushConfigs(t, b, sessions.PushFilter{Owner: "admin|ops"}), other, bare)
	wantPushConfigs(t, "PushConfigs of one owner on one session",
		pushConfigs(t, b, sessions.PushFilter{Session: betaGlobal, Owner: "admin|ops"}), bare)
	wantPushConfigs(t, "PushConfigs of a session that has none", pushConfigs(t, b, sessions.PushFilter{Session: betaGlobal,
		Owner: "admin|root"}))
}

func testPutPushConfigReplaces(t *testing.T, b Backend) {
	first := newPushConfig(alphaChild, "admin|root", "c1")
	putPushConfigs(t, b, first)
	again := first
	again.URL, again.Token, again.AuthScheme, again.AuthCredentials, again.ActingAs = "https://elsewhere.example/h", "another-secret", "", "", vigil.SessionRef{}
	// The same id of another owner, or on another session, is another config.
	otherOwner := newPushConfig(alphaChild, "admin|ops", "c1")
	otherSession := newPushConfig(alphaMain, "admin|root", "c1")
	putPushConfigs(t, b, again, otherOwner, otherSession)
	wantPushConfigs(t, "PushConfigs after replacing one", pushConfigs(t, b, sessions.PushFilter{}), otherSession, otherOwner, again)
}

func testDeletePushConfig(t *testing.T, b Backend) {
	keep := newPushConfig(alphaChild, "admin|root", "keep")
	gone := newPushConfig(alphaChild, "admin|root", "gone")
	putPushConfigs(t, b, keep, gone)
	update(t, b, func(ctx context.Context, tx writeTx) {
		// Another owner's id, or another session's, deletes nothing.
		for _, miss := range []struct {
			ref   vigil.SessionRef
			owner string
		}{{alphaChild, "admin|ops"}, {alphaMain, "admin|root"}} {
			if ok, err := tx.DeletePushConfig(ctx, miss.ref, miss.owner, "gone"); err != nil || ok {
				t.Errorf("DeletePushConfig(%s, %s, gone) = %v, %v; want nothing deleted", miss.ref, miss.owner, ok, err)
			}
		}
		if ok, err := tx.DeletePushConfig(ctx, alphaChild, "admin|root", "gone"); err != nil || !ok {
			t.Errorf("DeletePushConfig of a stored config = %v, %v; want deleted", ok, err)
		}
		if ok, err := tx.DeletePushConfig(ctx, alphaChild, "admin|root", "gone"); err != nil || ok {
			t.Errorf("DeletePushConfig again = %v, %v; want nothing deleted", ok, err)
		}
	})
	wantPushConfigs(t, "PushConfigs after a delete", pushConfigs(t, b, sessions.PushFilter{}), keep)
}

func testCountPushConfigs(t *testing.T, b Backend) {
	putPushConfigs(t, b,
		newPushConfig(alphaChild, "admin|root", "a"), newPushConfig(alphaChild, "admin|root", "b"),
		newPushConfig(alphaMain, "admin|root", "a"), newPushConfig(alphaChild, "admin|ops", "a"))
	if got, want := countPushConfigs(t, b, alphaChild, "admin|root"), (sessions.PushCount{OnSession: 2, OfOwner: 3, All: 4}); got != want {
		t.Errorf("CountPushConfigs(%s, admin|root) = %+v, want %+v", alphaChild, got, want)
	}
	if got, want := countPushConfigs(t, b, betaMain, "admin|nobody"), (sessions.PushCount{All: 4}); got != want {
		t.Errorf("CountPushConfigs of an owner with none = %+v, want %+v", got, want)
	}
	// Inside a transaction the count sees its own writes.
	update(t, b, func(ctx context.Context, tx writeTx) {
		if err := tx.PutPushConfig(ctx, newPushConfig(alphaChild, "admin|root", "c")); err != nil {
			t.Fatalf("PutPushConfig: %v", err)
		}
		if _, err := tx.DeletePushConfig(ctx, alphaMain, "admin|root", "a"); err != nil {
			t.Fatalf("DeletePushConfig: %v", err)
		}
		n, err := tx.CountPushConfigs(ctx, alphaChild, "admin|root")
		if want := (sessions.PushCount{OnSession: 3, OfOwner: 3, All: 4}); err != nil || n != want {
			t.Errorf("CountPushConfigs after writes in the transaction = %+v, %v; want %+v", n, err, want)
		}
	})
}

func testDeleteSessionRowDeletesPushConfigs(t *testing.T, b Backend) {
	putSessions(t, b, newSession(alphaChild, sessions.KindSubAgent, ""), newSession(alphaMain, sessions.KindMain, ""))
	keep := newPushConfig(alphaMain, "admin|root", "keep")
	putPushConfigs(t, b, newPushConfig(alphaChild, "admin|root", "a"), newPushConfig(alphaChild, "admin|ops", "b"), keep)
	deleteSessionRow(t, b, alphaChild)
	wantPushConfigs(t, "PushConfigs after the session was deleted", pushConfigs(t, b, sessions.PushFilter{}), keep)
}

func testPushConfigsRollBack(t *testing.T, b Backend) {
	keep := newPushConfig(alphaChild, "admin|root", "keep")
	putPushConfigs(t, b, keep)
	ctx := t.Context()
	tx, err := b.BeginWrite(ctx)
	if err != nil {
		t.Fatalf("BeginWrite: %v", err)
	}
	stx := sessionTx(t, tx)
	if err := stx.PutPushConfig(ctx, newPushConfig(alphaMain, "admin|root", "new")); err != nil {
		tx.Rollback()
		t.Fatalf("PutPushConfig: %v", err)
	}
	if _, err := stx.DeletePushConfig(ctx, alphaChild, "admin|root", "keep"); err != nil {
		tx.Rollback()
		t.Fatalf("DeletePushConfig: %v", err)
	}
	tx.Rollback()
	wantPushConfigs(t, "PushConfigs after a rollback", pushConfigs(t, b, sessions.PushFilter{}), keep)
}
