package sessionstest

// Transcripts: appending messages and the ids they get, reading them back,
// and compaction.

import (
	"context"
	"fmt"
	"math"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

func testMessageRoundTrip(t *testing.T, b Backend) {
	full := sessions.Message{Session: alphaMain, Role: sessions.RoleUser, ActorType: vigil.ActorAgent, ActorID: betaMain.Key,
		Channel: "telegram", Content: "hello — ünïcödé ✓\nsecond line", CreatedAt: baseTime}
	// A reply with no optional field set: no actor id, channel or content.
	reply := sessions.Message{Session: alphaMain, Role: sessions.RoleAssistant, ActorType: vigil.ActorSystem,
		Content: "", CreatedAt: baseTime + 1}
	ms := appendMessages(t, b, full)
	reply.ReplyTo = ms[0].ID
	ms = append(ms, appendMessages(t, b, reply)...)
	wantMessages(t, "Messages", messages(t, b, alphaMain, 0, all), ms...)
	update(t, b, func(ctx context.Context, tx writeTx) {
		got, err := tx.MessagesAfter(ctx, alphaMain, 0, all)
		if err != nil {
			t.Fatalf("MessagesAfter: %v", err)
		}
		wantMessages(t, "Tx.MessagesAfter", got, ms...)
	})
}

func testMessagesPages(t *testing.T, b Backend) {
	// Five messages on alpha main, interleaved with beta main's.
	var x, y []sessions.Message
	for i := range 5 {
		ms := appendMessages(t, b, newMessage(alphaMain, 2*i), newMessage(betaMain, 2*i+1))
		x, y = append(x, ms[0]), append(y, ms[1])
	}
	pages := []struct {
		after int64
		limit int
		want  []sessions.Message
	}{
		{0, 2, x[0:2]},
		{x[1].ID, 2, x[2:4]},
		{x[3].ID, 2, x[4:5]},
		{x[4].ID, 2, nil},
		{0, all, x},
		{x[0].ID - 1, 5, x},
		{y[1].ID, 2, x[2:4]}, // an id between the session's own
		{x[4].ID + 1000, 2, nil},
	}
	for _, p := range pages {
		wantMessages(t, "Messages(alpha main)", messages(t, b, alphaMain, p.after, p.limit), p.want...)
		update(t, b, func(ctx context.Context, tx writeTx) {
			got, err := tx.MessagesAfter(ctx, alphaMain, p.after, p.limit)
			if err != nil {
				t.Fatalf("MessagesAfter: %v", err)
			}
			wantMessages(t, "Tx.MessagesAfter(alpha main)", got, p.want...)
		})
	}
	wantMessages(t, "Messages(beta main)", messages(t, b, betaMain, 0, all), y...)
}

func testNewMessageIDs(t *testing.T, b Backend) {
	var ids []int64
	check := func(what string, id int64) {
		t.Helper()
		if len(ids) > 0 && id <= ids[len(ids)-1] {
			t.Fatalf("%s: new message id %d is not above %d, given out earlier", what, id, ids[len(ids)-1])
		}
		ids = append(ids, id)
	}
	// Several sessions, several transactions.
	for _, m := range appendMessages(t, b, newMessage(alphaMain, 1), newMessage(betaGlobal, 2), newMessage(alphaMain, 3)) {
		check("in one transaction", m.ID)
	}
	check("in another transaction", appendMessages(t, b, newMessage(alphaGlobal, 4))[0].ID)
	// After the newest message's session was deleted.
	check("before a delete", appendMessages(t, b, newMessage(alphaChild, 5))[0].ID)
	deleteSessionRow(t, b, alphaChild)
	check("after deleting the newest message's session", appendMessages(t, b, newMessage(alphaChild, 6))[0].ID)
	// After compaction deleted the newest messages.
	check("before compacting", appendMessages(t, b, newMessage(betaMain, 7))[0].ID)
	update(t, b, func(ctx context.Context, tx writeTx) {
		if _, err := tx.CompactMessages(ctx, betaMain, math.MaxInt64, newMessage(betaMain, 8)); err != nil {
			t.Fatalf("CompactMessages: %v", err)
		}
	})
	check("after compacting the newest messages", appendMessages(t, b, newMessage(betaMain, 9))[0].ID)
}

func testGivenMessageID(t *testing.T, b Backend) {
	ms := appendMessages(t, b, newMessage(alphaMain, 1), newMessage(betaMain, 2), newMessage(alphaMain, 3))
	// betaMain's message goes; its id is free for alpha main to take, and
	// sits between alpha main's two in the transcript's order.
	deleteSessionRow(t, b, betaMain)
	given := newMessage(alphaMain, 4)
	given.ID = ms[1].ID
	var id int64
	update(t, b, func(ctx context.Context, tx writeTx) {
		id = appendMessage(t, ctx, tx, given)
	})
	if id != given.ID {
		t.Fatalf("AppendMessage with id %d returned id %d, want the given one", given.ID, id)
	}
	wantMessages(t, "Messages after appending with a given id", messages(t, b, alphaMain, 0, all), ms[0], given, ms[2])
}

func testNewIDAboveGiven(t *testing.T, b Backend) {
	first := appendMessages(t, b, newMessage(alphaMain, 1))[0]
	given := newMessage(betaMain, 2)
	given.ID = first.ID + 100
	update(t, b, func(ctx context.Context, tx writeTx) {
		if id := appendMessage(t, ctx, tx, given); id != given.ID {
			t.Fatalf("AppendMessage with id %d returned id %d, want the given one", given.ID, id)
		}
	})
	next := appendMessages(t, b, newMessage(alphaMain, 3))[0]
	if next.ID <= given.ID {
		t.Errorf("new message id %d is not above %d, an id given earlier", next.ID, given.ID)
	}
}

func testMessagesAfterOwnWrites(t *testing.T, b Backend) {
	committed := appendMessages(t, b, newMessage(alphaMain, 1), newMessage(alphaMain, 2))
	var mine []sessions.Message
	update(t, b, func(ctx context.Context, tx writeTx) {
		for i := range 2 {
			m := newMessage(alphaMain, 3+i)
			m.ID = appendMessage(t, ctx, tx, m)
			mine = append(mine, m)
		}
		got, err := tx.MessagesAfter(ctx, alphaMain, 0, all)
		if err != nil {
			t.Fatalf("MessagesAfter: %v", err)
		}
		wantMessages(t, "Tx.MessagesAfter after appending", got, committed[0], committed[1], mine[0], mine[1])
		got, err = tx.MessagesAfter(ctx, alphaMain, committed[1].ID, 1)
		if err != nil {
			t.Fatalf("MessagesAfter: %v", err)
		}
		wantMessages(t, "Tx.MessagesAfter after the committed ones", got, mine[0])

		// A compaction in the transaction shows at once.
		summary := sessions.Message{ActorType: vigil.ActorSystem, Content: "so far", CreatedAt: baseTime + 10}
		if _, err := tx.CompactMessages(ctx, alphaMain, mine[0].ID, summary); err != nil {
			t.Fatalf("CompactMessages: %v", err)
		}
		summary.ID, summary.Session, summary.Role = mine[0].ID, alphaMain, sessions.RoleSummary
		got, err = tx.MessagesAfter(ctx, alphaMain, 0, all)
		if err != nil {
			t.Fatalf("MessagesAfter: %v", err)
		}
		wantMessages(t, "Tx.MessagesAfter after compacting", got, summary, mine[1])
		mine = []sessions.Message{summary, mine[1]}
	})
	wantMessages(t, "Messages after the commit", messages(t, b, alphaMain, 0, all), mine...)
}

// compact runs CompactMessages in a committed transaction and returns what
// it reported.
func compact(t *testing.T, b Backend, ref vigil.SessionRef, upTo int64, summary sessions.Message) int {
	t.Helper()
	var n int
	update(t, b, func(ctx context.Context, tx writeTx) {
		var err error
		if n, err = tx.CompactMessages(ctx, ref, upTo, summary); err != nil {
			t.Fatalf("CompactMessages(%s, %d): %v", ref, upTo, err)
		}
	})
	return n
}

// summaryOf is what CompactMessages stores of summary in place of the
// messages up to and including newest.
func summaryOf(summary sessions.Message, ref vigil.SessionRef, newest int64) sessions.Message {
	summary.ID, summary.Session, summary.Role = newest, ref, sessions.RoleSummary
	return summary
}

func testCompact(t *testing.T, b Backend) {
	var x, y []sessions.Message
	for i := range 4 {
		ms := appendMessages(t, b, newMessage(alphaMain, 2*i), newMessage(betaMain, 2*i+1))
		x, y = append(x, ms[0]), append(y, ms[1])
	}
	// Up to an id of another session's, between alpha main's second and
	// third: the summary takes the second's id, not upTo. The summary's
	// own session, role and id do not matter: CompactMessages sets them.
	summary := sessions.Message{ID: 12345, Session: betaGlobal, Role: sessions.RoleUser, ActorType: vigil.ActorSystem,
		ActorID: "compactor", Channel: "api", Content: "the first two", ReplyTo: 7, CreatedAt: baseTime + 100}
	if n := compact(t, b, alphaMain, y[1].ID, summary); n != 2 {
		t.Fatalf("CompactMessages deleted %d, want 2", n)
	}
	want := summaryOf(summary, alphaMain, x[1].ID)
	wantMessages(t, "Messages after compacting", messages(t, b, alphaMain, 0, all), want, x[2], x[3])
	// Paging sees the summary where the messages were.
	wantMessages(t, "Messages after the summary's id", messages(t, b, alphaMain, want.ID, all), x[2], x[3])
	wantMessages(t, "Messages after the first deleted id", messages(t, b, alphaMain, x[0].ID, 1), want)
	// Another session's transcript is untouched.
	wantMessages(t, "Messages(beta main)", messages(t, b, betaMain, 0, all), y...)
	if ms := messages(t, b, betaGlobal, 0, all); len(ms) != 0 {
		t.Errorf("the summary went to the session it named: %s", fmtMessages(ms))
	}
}

func testCompactAgain(t *testing.T, b Backend) {
	x := appendMessages(t, b, newMessage(alphaMain, 1), newMessage(alphaMain, 2), newMessage(alphaMain, 3), newMessage(alphaMain, 4))
	first := sessions.Message{ActorType: vigil.ActorSystem, Content: "first", CreatedAt: baseTime + 10}
	if n := compact(t, b, alphaMain, x[1].ID, first); n != 2 {
		t.Fatalf("first CompactMessages deleted %d, want 2", n)
	}
	// The earlier summary counts as one of the messages replaced.
	second := sessions.Message{ActorType: vigil.ActorSystem, Content: "second", CreatedAt: baseTime + 20}
	if n := compact(t, b, alphaMain, math.MaxInt64, second); n != 3 {
		t.Fatalf("second CompactMessages deleted %d, want 3 (the first summary and two messages)", n)
	}
	wantMessages(t, "Messages after compacting twice", messages(t, b, alphaMain, 0, all), summaryOf(second, alphaMain, x[3].ID))
}

func testCompactNothing(t *testing.T, b Backend) {
	summary := sessions.Message{ActorType: vigil.ActorSystem, Content: "nothing", CreatedAt: baseTime}
	if n := compact(t, b, alphaMain, math.MaxInt64, summary); n != 0 {
		t.Fatalf("CompactMessages of an empty transcript deleted %d, want 0", n)
	}
	wantMessages(t, "Messages after compacting an empty transcript", messages(t, b, alphaMain, 0, all))
	// Up to below the session's first message (another session's id).
	ms := appendMessages(t, b, newMessage(betaMain, 1), newMessage(alphaMain, 2), newMessage(alphaMain, 3))
	if n := compact(t, b, alphaMain, ms[0].ID, summary); n != 0 {
		t.Fatalf("CompactMessages up to below every message deleted %d, want 0", n)
	}
	wantMessages(t, "Messages after compacting nothing", messages(t, b, alphaMain, 0, all), ms[1], ms[2])
	wantMessages(t, "the other session's", messages(t, b, betaMain, 0, all), ms[0])
}

func testLatestMessages(t *testing.T, b Backend) {
	var x []sessions.Message
	for i := range 4 {
		ms := appendMessages(t, b, newMessage(alphaMain, 2*i), newMessage(betaMain, 2*i+1))
		x = append(x, ms[0])
	}
	got, err := b.LatestMessages(t.Context(), alphaMain, math.MaxInt64, 3)
	if err != nil {
		t.Fatal(err)
	}
	wantMessages(t, "LatestMessages(alpha main, 3)", got, x[3], x[2], x[1])
	if got, err = b.LatestMessages(t.Context(), alphaChild, math.MaxInt64, 3); err != nil || len(got) != 0 {
		t.Fatalf("LatestMessages of a session without messages = %+v, %v", got, err)
	}
}

func testLatestMessagesPages(t *testing.T, b Backend) {
	// Five messages on alpha main, interleaved with beta main's.
	var x, y []sessions.Message
	for i := range 5 {
		ms := appendMessages(t, b, newMessage(alphaMain, 2*i), newMessage(betaMain, 2*i+1))
		x, y = append(x, ms[0]), append(y, ms[1])
	}
	pages := []struct {
		before int64
		limit  int
		want   []sessions.Message // newest first
	}{
		{math.MaxInt64, 2, []sessions.Message{x[4], x[3]}},
		{x[3].ID, 2, []sessions.Message{x[2], x[1]}},
		{x[1].ID, 2, []sessions.Message{x[0]}},
		{x[0].ID, 2, nil},
		{x[4].ID + 1, all, []sessions.Message{x[4], x[3], x[2], x[1], x[0]}},
		{y[2].ID, 2, []sessions.Message{x[2], x[1]}}, // an id between the session's own
		{1, 2, nil},
	}
	for _, p := range pages {
		got, err := b.LatestMessages(t.Context(), alphaMain, p.before, p.limit)
		if err != nil {
			t.Fatalf("LatestMessages(alpha main, before %d, %d): %v", p.before, p.limit, err)
		}
		wantMessages(t, fmt.Sprintf("LatestMessages(alpha main, before %d, %d)", p.before, p.limit), got, p.want...)
	}
}
