package adoption

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

// OwnTexts is how many of a session's newest messages sent through vigil
// (its transcript's user messages) a turn is compared with, as in the
// reference.
const OwnTexts = 10

// ownLook is how many of a session's newest messages are read to find its
// OwnTexts newest user messages.
const ownLook = 5 * OwnTexts

// Digest is the form in which a turn's text and a session's own messages
// are compared: the hex SHA-256 of the text normalised
// (upstream.Normalize).
func Digest(text string) string {
	sum := sha256.Sum256([]byte(upstream.Normalize(text)))
	return hex.EncodeToString(sum[:])
}

// Own are a session's own recent messages as a check compares turns with
// them.
type Own struct {
	// Digests are the digests of the newest OwnTexts user messages.
	Digests []string
	// Seen is the id of the newest message read (0 when none): a user
	// message after it came too late to be compared with.
	Seen int64
}

// OwnOf reads a session's own recent messages from a store.
func OwnOf(ctx context.Context, st sessions.Store, ref vigil.SessionRef) (Own, error) {
	ms, err := st.LatestMessages(ctx, ref, math.MaxInt64, ownLook)
	if err != nil {
		return Own{}, fmt.Errorf("read the newest messages of %s: %w", ref, err)
	}
	var own Own
	for _, m := range ms {
		own.Seen = max(own.Seen, m.ID)
		if m.Role == sessions.RoleUser && len(own.Digests) < OwnTexts {
			own.Digests = append(own.Digests, Digest(m.Content))
		}
	}
	return own, nil
}

// A Report is what one check of a link found, for Apply. It carries no
// text of the transcript.
type Report struct {
	Session vigil.SessionRef
	// From is the marker the check started from, and LinkUpdatedAt the
	// link's UpdatedAt when it was read: Apply takes the report only while
	// the link still has both.
	From          upstream.Marker
	LinkUpdatedAt int64
	// Missing reports the check that declares the transcript gone (the
	// third consecutive missing one): Apply records upstream_missing and
	// deletes the link.
	Missing bool
	// To is the marker after the check.
	To upstream.Marker
	// Turns counts the person's turns the check found, echoes removed,
	// and OccurredAt is when the newest of them happened.
	Turns      int
	OccurredAt time.Time
	// SeenMessage is Own.Seen of the messages the turns were compared
	// with.
	SeenMessage int64
}

// Validate reports what makes a report impossible to apply.
func (r Report) Validate() error {
	if err := r.From.Validate(); err != nil {
		return fmt.Errorf("the marker the check started from: %w", err)
	}
	switch {
	case r.Missing && r.Turns != 0:
		return fmt.Errorf("a report of a missing transcript counts no turns")
	case r.Missing:
		return nil
	case r.Turns < 0:
		return fmt.Errorf("turns is negative (%d)", r.Turns)
	case r.Turns > 0 && r.OccurredAt.IsZero():
		return fmt.Errorf("a report of turns says when the newest happened")
	case r.SeenMessage < 0:
		return fmt.Errorf("seenMessage is negative (%d)", r.SeenMessage)
	}
	if err := r.To.Validate(); err != nil {
		return fmt.Errorf("the marker after the check: %w", err)
	}
	if r.To.Format != r.From.Format || r.To.Path != r.From.Path || !r.To.Linked.Equal(r.From.Linked) {
		return fmt.Errorf("the marker after the check is of another transcript or link than the one it started from")
	}
	switch {
	case r.To.Generation < r.From.Generation || (r.To.Generation == r.From.Generation && r.To.Offset < r.From.Offset):
		return fmt.Errorf("the marker after the check stands before the one it started from")
	case r.To.Generation != r.From.Generation && (r.To.Generation != r.From.Generation+1 || r.To.Offset != 0 || r.Turns != 0):
		// upstream.Follower.Check's restart: it classifies nothing.
		return fmt.Errorf("the marker after the check is in generation %d at byte %d with %d turns: a check that finds "+
			"the transcript truncated or replaced goes to the start of the next generation, %d, and finds no turns",
			r.To.Generation, r.To.Offset, r.Turns, r.From.Generation+1)
	}
	return nil
}

// Applied is what Apply did.
type Applied struct {
	// Recorded is the event recorded (human_direct_message or
	// upstream_missing); zero when none was.
	Recorded vigil.Recorded
	// Moved says the link's marker moved; Dropped that the link was
	// deleted.
	Moved, Dropped bool
	// Stale, when not empty, says why the report changed nothing: the
	// link moved, was adopted again or deleted since the check read it,
	// or the session got a message the turns were not compared with.
	Stale string
}

// Apply applies a check's report inside a write, which holds the
// session's lock first when the report records an event (Local.Apply
// shows how): the link must still be as the check read it. Turns
// are recorded as one human_direct_message and the marker moves past
// them; a declared missing transcript is recorded as upstream_missing and
// the link deleted. A turn nobody watches any more is not recorded, and
// the marker then stays, so the turn is reported once the session is
// watched again (the reference's rule: an unwatched session's marker does
// not move).
func Apply(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, r Report) (Applied, error) {
	if err := r.Validate(); err != nil {
		return Applied{}, fmt.Errorf("%w: %w", vigil.ErrBadRequest, err)
	}
	l, ok, err := tx.GetUpstreamLink(ctx, r.Session)
	if err != nil {
		return Applied{}, fmt.Errorf("read the link of %s: %w", r.Session, err)
	}
	if !ok {
		return Applied{Stale: "the session has no link any more"}, nil
	}
	stored, err := upstream.ParseMarker(l.Marker)
	if err != nil {
		return Applied{}, fmt.Errorf("the stored link of %s: %w", r.Session, err)
	}
	if l.UpdatedAt != r.LinkUpdatedAt || !SameMarker(stored, r.From) {
		return Applied{Stale: "the link changed since the check read it"}, nil
	}
	if r.Missing {
		payload, _ := json.Marshal(map[string]string{"channel": l.CatalogID})
		rec, err := txn.Record(ctx, vigil.Record{Session: r.Session, Kind: vigil.KindUpstreamMissing, ActorType: vigil.ActorSystem,
			Summary: "upstream missing via " + l.CatalogID, Payload: payload,
			DedupeKey: "upstream-missing:" + r.Session.Key + ":" + stored.Source() + ":" + strconv.FormatInt(l.UpdatedAt, 10)})
		if err != nil {
			return Applied{}, fmt.Errorf("record that the transcript of %s is missing: %w", r.Session, err)
		}
		if rec.Appended {
			if err := touchRecorded(ctx, txn, tx, r.Session); err != nil {
				return Applied{}, err
			}
		}
		if _, err := tx.DeleteUpstreamLink(ctx, r.Session); err != nil {
			return Applied{}, fmt.Errorf("delete the link of %s: %w", r.Session, err)
		}
		return Applied{Recorded: rec, Dropped: true}, nil
	}
	var out Applied
	if r.Turns > 0 {
		later, err := tx.MessagesAfter(ctx, r.Session, r.SeenMessage, ownLook)
		if err != nil {
			return Applied{}, fmt.Errorf("read the messages of %s: %w", r.Session, err)
		}
		for _, m := range later {
			if m.Role == sessions.RoleUser {
				return Applied{Stale: "a message was sent to the session while it was checked"}, nil
			}
		}
		rec := vigil.Record{Session: r.Session, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
			Summary: "human message via " + l.CatalogID, OccurredAt: r.OccurredAt,
			DedupeKey: "upstream:" + r.Session.Key + ":" + upstream.Result{Marker: r.To}.DedupeID()}
		if r.Turns > 1 {
			rec.Payload, _ = json.Marshal(map[string]int{"turns": r.Turns})
		}
		if out.Recorded, err = txn.Record(ctx, rec); err != nil {
			return Applied{}, fmt.Errorf("record the turns typed into %s: %w", r.Session, err)
		}
		if out.Recorded.Skipped {
			return Applied{Stale: "nobody watches the session any more"}, nil
		}
		if out.Recorded.Appended {
			if err := touchRecorded(ctx, txn, tx, r.Session); err != nil {
				return Applied{}, err
			}
		}
	}
	if SameMarker(stored, r.To) {
		return out, nil
	}
	if l.Marker, err = json.Marshal(r.To); err != nil {
		return Applied{}, err
	}
	l.UpdatedAt = txn.Now().UnixMilli()
	if err := tx.PutUpstreamLink(ctx, l); err != nil {
		return Applied{}, fmt.Errorf("move the marker of %s: %w", r.Session, err)
	}
	out.Moved = true
	return out, nil
}

// touchRecorded moves the last-recorded time of ref, when the gateway
// keeps it as a recorded session, to the write's time: a check that
// recorded in it is news of it, as a session_record is. A session the
// gateway hosts has no such row and is given none.
func touchRecorded(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, ref vigil.SessionRef) error {
	rs, ok, err := tx.GetRecorded(ctx, ref)
	if err != nil {
		return fmt.Errorf("read the recorded session %s: %w", ref, err)
	}
	if !ok {
		return nil
	}
	rs.UpdatedAt = txn.Now().UnixMilli()
	if err := tx.PutRecorded(ctx, rs); err != nil {
		return fmt.Errorf("move the last-recorded time of %s: %w", ref, err)
	}
	return nil
}

// SameMarker reports whether two markers stand at the same place of the
// same link.
func SameMarker(a, b upstream.Marker) bool {
	return a.Format == b.Format && a.Path == b.Path && a.Offset == b.Offset && a.Head == b.Head && a.Tail == b.Tail &&
		a.Linked.Equal(b.Linked) && a.Generation == b.Generation
}
