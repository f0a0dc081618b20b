package sessions

import (
	"context"

	vigil "github.com/vigilhq/vigil"
)

// HostGateway is the host id of a transcript the gateway itself reads:
// one on the machine it runs on.
const HostGateway = "gateway:local"

// A Link ties an adopted session to the transcript its coding agent keeps
// on disk, which a follower (package upstream) reads on a cadence for
// turns a person typed straight into the agent. A session has at most one
// link; adopting it again replaces or refreshes it, its deletion deletes
// it, a reset leaves it.
type Link struct {
	Session vigil.SessionRef
	// CatalogID names the coding agent's catalog the session was adopted
	// from (claude-cli, codex): its turns are recorded "via" it.
	CatalogID string
	// HostID names who can read the transcript: HostGateway for the
	// gateway's own machine, "node:<name>" for a follower elsewhere.
	HostID string
	// ThreadID is the coding agent's own id of the session.
	ThreadID string
	// Marker is where the follower stands in the transcript: an
	// upstream.Marker as JSON. The store keeps it as it is given.
	Marker []byte
	// CreatedAt is when the session was first linked; UpdatedAt when the
	// link was last adopted again or its marker last moved (ms since the
	// epoch).
	CreatedAt, UpdatedAt int64
}

// LinkReader reads upstream links outside a transaction; it is part of
// Store.
type LinkReader interface {
	// UpstreamLink reads a session's link.
	UpstreamLink(ctx context.Context, ref vigil.SessionRef) (Link, bool, error)
	// WatchedLinks lists the links of host whose session has a watcher
	// (some cursor targets it), ordered by agent id then key, after the
	// given position (exclusive), at most limit.
	WatchedLinks(ctx context.Context, host string, after vigil.SessionRef, limit int) ([]Link, error)
}

// LinkWriter holds upstream link writes inside the engine's write
// transaction; it is part of Tx. A link is deleted with its session's
// events (vigil.Txn.DeleteSession), so every path that deletes a session
// deletes its link.
type LinkWriter interface {
	// GetUpstreamLink is UpstreamLink inside the transaction.
	GetUpstreamLink(ctx context.Context, ref vigil.SessionRef) (Link, bool, error)
	// PutUpstreamLink creates or replaces the session's link; a replaced
	// link keeps its CreatedAt.
	PutUpstreamLink(ctx context.Context, l Link) error
	// DeleteUpstreamLink deletes the session's link and reports whether
	// there was one.
	DeleteUpstreamLink(ctx context.Context, ref vigil.SessionRef) (bool, error)
}
