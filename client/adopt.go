package client

import "context"

// AdoptInput is session_adopt's input: a coding agent's own session,
// adopted by its transcript. The gateway reads a transcript of its own
// host under the directories it is given (vigil serve --upstream-root);
// for another host's, HostID names it ("node:<name>") and Marker is where
// that host's follower starts.
type AdoptInput struct {
	Format     string         `json:"format"`             // claude-cli (Claude Code) or codex (Codex)
	Path       string         `json:"path,omitempty"`     // the transcript file
	ThreadID   string         `json:"threadId,omitempty"` // the agent's own session id; finds the transcript without Path
	SessionKey string         `json:"sessionKey,omitempty"`
	AgentID    string         `json:"agentId,omitempty"`
	HostID     string         `json:"hostId,omitempty"`
	Marker     map[string]any `json:"marker,omitempty"`
	// Watcher watches the adopted session from then on.
	Watcher string `json:"watcher,omitempty"`
}

// LinkView is an adopted session's link to its transcript. Marker is
// where following stands, as package upstream encodes an upstream.Marker.
type LinkView struct {
	SessionKey   string         `json:"sessionKey"`
	AgentID      string         `json:"agentId"`
	CatalogID    string         `json:"catalogId"`
	HostID       string         `json:"hostId"`
	ThreadID     string         `json:"threadId"`
	UpstreamKind string         `json:"upstreamKind"`
	Path         string         `json:"path"`
	Marker       map[string]any `json:"marker"`
	UpdatedAt    int64          `json:"updatedAt"`
	// OwnDigests are the SHA-256 digests (hex) of the session's newest
	// messages sent through vigil, normalised; a turn with one of these
	// texts is the agent echoing it. SeenMessage is the newest message
	// they were read up to.
	OwnDigests  []string `json:"ownDigests,omitempty"`
	SeenMessage int64    `json:"seenMessage,omitempty"`
}

// AdoptOutput is what an adoption did: Recorded is false when the
// session was adopted before (its link was refreshed).
type AdoptOutput struct {
	SessionKey   string   `json:"sessionKey"`
	Recorded     bool     `json:"recorded"`
	StateVersion int64    `json:"stateVersion"`
	Link         LinkView `json:"link"`
	Watched      bool     `json:"watched,omitempty"`
}

// UpstreamLinksInput is session_upstream_links's input: the links a
// follower of one host checks.
type UpstreamLinksInput struct {
	HostID string `json:"hostId"`
	Cursor string `json:"cursor,omitempty"`
	Limit  *int   `json:"limit,omitempty"` // links per page, 1-200 (default 50)
}

// UpstreamLinksOutput is a page of links.
type UpstreamLinksOutput struct {
	Links      []LinkView `json:"links"`
	NextCursor string     `json:"nextCursor,omitempty"`
}

// UpstreamCheck is RecordInput's Upstream: a check of an adopted
// session's transcript by its follower, which the gateway applies with
// the marker's move (vigil follow-upstream sends them).
type UpstreamCheck struct {
	From          map[string]any `json:"from"`
	LinkUpdatedAt int64          `json:"linkUpdatedAt"`
	To            map[string]any `json:"to,omitempty"`
	Turns         int            `json:"turns,omitempty"`
	SeenMessage   int64          `json:"seenMessage,omitempty"`
}

// Adopt is session_adopt.
func (c *Client) Adopt(ctx context.Context, in AdoptInput) (*AdoptOutput, error) {
	return call[AdoptOutput](ctx, c, "session_adopt", in)
}

// UpstreamLinks is session_upstream_links.
func (c *Client) UpstreamLinks(ctx context.Context, in UpstreamLinksInput) (*UpstreamLinksOutput, error) {
	return call[UpstreamLinksOutput](ctx, c, "session_upstream_links", in)
}
