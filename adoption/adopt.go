package adoption

import (
	"context"
	"encoding/json"
	"fmt"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

// An Adoption is a coding agent's session taken under awareness.
type Adoption struct {
	Session vigil.SessionRef
	// CatalogID names the agent's catalog (claude-cli, codex).
	CatalogID string
	// HostID names who reads the transcript (sessions.HostGateway, or
	// "node:<name>").
	HostID string
	// ThreadID is the agent's own id of the session.
	ThreadID string
	// ActorID is the person who adopted it, if known.
	ActorID string
	// Marker is where following starts (upstream.Follower.Start at the
	// transcript's end); nil adopts the session without a link.
	Marker *upstream.Marker
}

// Adopted is what Adopt did.
type Adopted struct {
	// Recorded is the `adopted` event (not appended when the session was
	// adopted before).
	Recorded vigil.Recorded
	// Link is the session's link after the adoption; nil when it has
	// none.
	Link *sessions.Link
	// Kept is true when the session already had a link to the same
	// transcript: it keeps its marker (turns typed since its last check
	// are still read) and only its updatedAt and catalog change.
	Kept bool
}

// Adopt records `adopted` and stores the session's link, inside a write
// that changes the session (Engine.Update locking vigil.Changing(session),
// so that every link write holds its session's lock). A link to another transcript (another host, thread,
// format or path) is replaced by one at a.Marker; a link to the same one
// keeps its marker. An adoption without a marker leaves any link as it
// is.
func Adopt(ctx context.Context, txn *vigil.Txn, tx sessions.Tx, a Adoption) (Adopted, error) {
	payload, err := json.Marshal(map[string]string{"catalogId": a.CatalogID, "hostId": a.HostID})
	if err != nil {
		return Adopted{}, err
	}
	// The link is read first: on PostgreSQL that read takes the session's
	// lock, and with it the number the record below uses.
	old, had, err := tx.GetUpstreamLink(ctx, a.Session)
	if err != nil {
		return Adopted{}, fmt.Errorf("read the link of %s: %w", a.Session, err)
	}
	var out Adopted
	out.Recorded, err = txn.Record(ctx, vigil.Record{Session: a.Session, Kind: vigil.KindAdopted, ActorType: vigil.ActorHuman,
		ActorID: a.ActorID, Summary: "adopted from " + a.CatalogID, Payload: payload, DedupeKey: "adopted:" + a.Session.Key})
	if err != nil {
		return Adopted{}, fmt.Errorf("record the adoption of %s: %w", a.Session, err)
	}
	if a.Marker == nil {
		if had {
			out.Link = &old
		}
		return out, nil
	}
	now := txn.Now().UnixMilli()
	l := sessions.Link{Session: a.Session, CatalogID: a.CatalogID, HostID: a.HostID, ThreadID: a.ThreadID,
		CreatedAt: now, UpdatedAt: now}
	if had && old.HostID == a.HostID && old.ThreadID == a.ThreadID {
		if m, err := upstream.ParseMarker(old.Marker); err == nil && m.Format == a.Marker.Format && m.Path == a.Marker.Path {
			l.Marker, l.CreatedAt, out.Kept = old.Marker, old.CreatedAt, true
		}
	}
	if !out.Kept {
		if l.Marker, err = json.Marshal(*a.Marker); err != nil {
			return Adopted{}, err
		}
	}
	if err := tx.PutUpstreamLink(ctx, l); err != nil {
		return Adopted{}, fmt.Errorf("store the link of %s: %w", a.Session, err)
	}
	out.Link = &l
	return out, nil
}
