package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// upstreamLinksSchema is the migration that keeps adopted sessions' links
// to their coding agents' transcripts (sessions.Link). A follower lists a
// host's links in key order, so they are indexed by host first.
const upstreamLinksSchema = `
CREATE TABLE upstream_links (
	agent_id    text COLLATE "C" NOT NULL,
	session_key text COLLATE "C" NOT NULL,
	catalog_id  text   NOT NULL,
	host_id     text COLLATE "C" NOT NULL,
	thread_id   text   NOT NULL,
	marker      text   NOT NULL,
	created_at  bigint NOT NULL,
	updated_at  bigint NOT NULL,
	PRIMARY KEY (agent_id, session_key)
);
CREATE INDEX upstream_links_by_host ON upstream_links (host_id, agent_id, session_key);
`

// deleteLink is how DeleteSession deletes a session's link with its log.
const deleteLink = `DELETE FROM upstream_links WHERE agent_id = $1 AND session_key = $2`

const linkColumns = `agent_id, session_key, catalog_id, host_id, thread_id, marker, created_at, updated_at`

func scanLink(r pgx.Row) (sessions.Link, bool, error) {
	var l sessions.Link
	var marker string
	err := r.Scan(&l.Session.AgentID, &l.Session.Key, &l.CatalogID, &l.HostID, &l.ThreadID, &marker, &l.CreatedAt, &l.UpdatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return sessions.Link{}, false, nil
	}
	l.Marker = []byte(marker)
	return l, err == nil, wrap(err)
}

const linkQuery = `SELECT ` + linkColumns + ` FROM upstream_links WHERE agent_id = $1 AND session_key = $2`

// UpstreamLink implements sessions.Store.
func (s *Store) UpstreamLink(ctx context.Context, ref vigil.SessionRef) (sessions.Link, bool, error) {
	return scanLink(s.pool.QueryRow(ctx, linkQuery, ref.AgentID, ref.Key))
}

// WatchedLinks implements sessions.Store.
func (s *Store) WatchedLinks(ctx context.Context, host string, after vigil.SessionRef, limit int) ([]sessions.Link, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+linkColumns+` FROM upstream_links l
		WHERE host_id = $1 AND (agent_id, session_key) > ($2, $3)
			AND EXISTS (SELECT 1 FROM cursors WHERE target_agent = l.agent_id AND target_key = l.session_key)
		ORDER BY agent_id, session_key LIMIT $4`, host, after.AgentID, after.Key, sqlLimit(limit))
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.Link
	for rows.Next() {
		l, _, err := scanLink(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, wrap(rows.Err())
}

// GetUpstreamLink implements sessions.Tx. Every writer of a link holds
// its session's lock (the gateway and vigil sim write it in writes that
// change the session, vigil.Changing), so the row read is the one the
// write commits on.
func (t *Tx) GetUpstreamLink(ctx context.Context, ref vigil.SessionRef) (sessions.Link, bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return sessions.Link{}, false, err
	}
	return scanLink(t.tx.QueryRow(ctx, linkQuery+` FOR UPDATE`, ref.AgentID, ref.Key))
}

// PutUpstreamLink implements sessions.Tx.
func (t *Tx) PutUpstreamLink(ctx context.Context, l sessions.Link) error {
	if err := storableText(l.CatalogID, l.HostID, l.ThreadID, string(l.Marker)); err != nil {
		return fmt.Errorf("upstream link of %s: %w", l.Session, err)
	}
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO upstream_links (`+linkColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (agent_id, session_key) DO UPDATE SET catalog_id = excluded.catalog_id, host_id = excluded.host_id,
		thread_id = excluded.thread_id, marker = excluded.marker, updated_at = excluded.updated_at`,
		l.Session.AgentID, l.Session.Key, l.CatalogID, l.HostID, l.ThreadID, string(l.Marker), l.CreatedAt, l.UpdatedAt)
	return wrap(err)
}

// DeleteUpstreamLink implements sessions.Tx.
func (t *Tx) DeleteUpstreamLink(ctx context.Context, ref vigil.SessionRef) (bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return false, err
	}
	tag, err := t.tx.Exec(ctx, deleteLink, ref.AgentID, ref.Key)
	return tag.RowsAffected() > 0, wrap(err)
}

// LockLinks implements sessions.Store with a session-level advisory
// lock keyed by the schema (through its notification channel, which is
// derived from it) and the host, held on a connection of its own as
// LockMaintenance holds its lock: gateways sharing a schema follow a
// host's links one at a time, and a gateway that dies lets go.
func (s *Store) LockLinks(ctx context.Context, host string) (unlock func(), ok bool, err error) {
	key := lockKey("vigil upstream links\x00"+host, s.channel)
	cfg := s.pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "vigil upstream " + s.origin
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("upstream links lock: %w", wrap(err))
	}
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, key).Scan(&ok); err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		if err != nil {
			return nil, false, fmt.Errorf("upstream links lock: %w", wrap(err))
		}
		return nil, false, nil
	}
	return func() {
		// As LockMaintenance: unlock before closing, so a try-lock right
		// after finds the lock free.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn.Exec(ctx, `SELECT pg_advisory_unlock($1)`, key)
		conn.Close(ctx)
	}, true, nil
}
