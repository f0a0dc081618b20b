package sqlitestore

import (
	"context"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// upstreamLinksSchema is the migration that keeps adopted sessions' links
// to their coding agents' transcripts (sessions.Link). A follower lists a
// host's links in key order, so they are indexed by host first.
const upstreamLinksSchema = `
CREATE TABLE upstream_links (
	agent_id    TEXT    NOT NULL,
	session_key TEXT    NOT NULL,
	catalog_id  TEXT    NOT NULL,
	host_id     TEXT    NOT NULL,
	thread_id   TEXT    NOT NULL,
	marker      TEXT    NOT NULL,
	created_at  INTEGER NOT NULL,
	updated_at  INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key)
) WITHOUT ROWID;
CREATE INDEX upstream_links_by_host ON upstream_links (host_id, agent_id, session_key);
`

// deleteLink is how DeleteSession deletes a session's link with its log.
const deleteLink = `DELETE FROM upstream_links WHERE agent_id = ? AND session_key = ?`

const linkColumns = `agent_id, session_key, catalog_id, host_id, thread_id, marker, created_at, updated_at`

func linkAt(r rowValues) sessions.Link {
	return sessions.Link{Session: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)}, CatalogID: r.str(2),
		HostID: r.str(3), ThreadID: r.str(4), Marker: r.bytes(5), CreatedAt: r.int(6), UpdatedAt: r.int(7)}
}

func (c conn) link(ref vigil.SessionRef) (sessions.Link, bool, error) {
	var l sessions.Link
	ok, err := c.queryRow(`SELECT `+linkColumns+` FROM upstream_links WHERE agent_id = ? AND session_key = ?`,
		[]any{ref.AgentID, ref.Key}, func(r rowValues) error {
			l = linkAt(r)
			return nil
		})
	return l, ok, err
}

// LockLinks implements sessions.Store. One gateway follows the links of a
// file it holds alone; gateways sharing the file (Options.Shared) each
// follow them, as SQLite runs their writes one transaction at a time.
func (s *Store) LockLinks(ctx context.Context, host string) (unlock func(), ok bool, err error) {
	return func() {}, true, nil
}

// UpstreamLink implements sessions.Store.
func (s *Store) UpstreamLink(ctx context.Context, ref vigil.SessionRef) (sessions.Link, bool, error) {
	var l sessions.Link
	var ok bool
	err := s.reading(ctx, func(c conn) error {
		var err error
		l, ok, err = c.link(ref)
		return err
	})
	return l, ok, err
}

// WatchedLinks implements sessions.Store.
func (s *Store) WatchedLinks(ctx context.Context, host string, after vigil.SessionRef, limit int) ([]sessions.Link, error) {
	var out []sessions.Link
	err := s.reading(ctx, func(c conn) error {
		return c.query(`SELECT `+linkColumns+` FROM upstream_links l
			WHERE host_id = ? AND (agent_id, session_key) > (?, ?)
				AND EXISTS (SELECT 1 FROM cursors WHERE target_agent = l.agent_id AND target_key = l.session_key)
			ORDER BY agent_id, session_key LIMIT ?`, []any{host, after.AgentID, after.Key, limit},
			func(r rowValues) error {
				out = append(out, linkAt(r))
				return nil
			})
	})
	return out, err
}

// GetUpstreamLink implements sessions.Tx.
func (t *Tx) GetUpstreamLink(ctx context.Context, ref vigil.SessionRef) (sessions.Link, bool, error) {
	return t.c.link(ref)
}

// PutUpstreamLink implements sessions.Tx.
func (t *Tx) PutUpstreamLink(ctx context.Context, l sessions.Link) error {
	_, err := t.c.exec(`INSERT INTO upstream_links (`+linkColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET catalog_id = excluded.catalog_id, host_id = excluded.host_id,
		thread_id = excluded.thread_id, marker = excluded.marker, updated_at = excluded.updated_at`,
		l.Session.AgentID, l.Session.Key, l.CatalogID, l.HostID, l.ThreadID, string(l.Marker), l.CreatedAt, l.UpdatedAt)
	return err
}

// DeleteUpstreamLink implements sessions.Tx.
func (t *Tx) DeleteUpstreamLink(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	n, err := t.c.exec(deleteLink, ref.AgentID, ref.Key)
	return n > 0, err
}
