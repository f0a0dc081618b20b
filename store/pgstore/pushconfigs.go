package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// pushConfigsSchema is the migration that adds the push configs: keyed by
// their session first, so deleting a session's configs and listing a
// task's are one range; counting an owner's uses its index.
const pushConfigsSchema = `
CREATE TABLE push_configs (
	agent_id         text COLLATE "C" NOT NULL,
	session_key      text COLLATE "C" NOT NULL,
	owner            text COLLATE "C" NOT NULL,
	config_id        text COLLATE "C" NOT NULL,
	acting_agent     text,
	acting_key       text,
	url              text   NOT NULL,
	token            text   NOT NULL,
	auth_scheme      text,
	auth_credentials text,
	protocol         text   NOT NULL,
	created_at       bigint NOT NULL,
	PRIMARY KEY (agent_id, session_key, owner, config_id)
);
CREATE INDEX push_configs_by_owner ON push_configs (owner);
`

const deletePushConfigsOfSession = `DELETE FROM push_configs WHERE agent_id = $1 AND session_key = $2`

const pushConfigColumns = `agent_id, session_key, owner, config_id, coalesce(acting_agent, ''), coalesce(acting_key, ''),
	url, token, coalesce(auth_scheme, ''), coalesce(auth_credentials, ''), protocol, created_at`

// PushConfigs implements sessions.PushStore.
func (s *Store) PushConfigs(ctx context.Context, f sessions.PushFilter) ([]sessions.PushConfig, error) {
	var where []string
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	if f.Session != (vigil.SessionRef{}) {
		where = append(where, "agent_id = "+arg(f.Session.AgentID)+" AND session_key = "+arg(f.Session.Key))
	}
	if f.Owner != "" {
		where = append(where, "owner = "+arg(f.Owner))
	}
	q := `SELECT ` + pushConfigColumns + ` FROM push_configs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.pool.Query(ctx, q+" ORDER BY agent_id, session_key, owner, config_id", args...)
	if err != nil {
		return nil, wrap(err)
	}
	defer rows.Close()
	var out []sessions.PushConfig
	for rows.Next() {
		var p sessions.PushConfig
		if err := rows.Scan(&p.Session.AgentID, &p.Session.Key, &p.Owner, &p.ID, &p.ActingAs.AgentID, &p.ActingAs.Key,
			&p.URL, &p.Token, &p.AuthScheme, &p.AuthCredentials, &p.Protocol, &p.CreatedAt); err != nil {
			return nil, wrap(err)
		}
		out = append(out, p)
	}
	return out, wrap(rows.Err())
}

// PutPushConfig implements sessions.PushTx.
func (t *Tx) PutPushConfig(ctx context.Context, p sessions.PushConfig) error {
	if err := storableText(p.Owner, p.ID, p.URL, p.Token, p.AuthScheme, p.AuthCredentials, p.Protocol); err != nil {
		return fmt.Errorf("push config %s on %s: %w", p.ID, p.Session.Key, err)
	}
	if err := t.flushLocks(ctx); err != nil {
		return err
	}
	_, err := t.tx.Exec(ctx, `INSERT INTO push_configs (agent_id, session_key, owner, config_id, acting_agent, acting_key,
		url, token, auth_scheme, auth_credentials, protocol, created_at)
		VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), $7, $8, nullif($9, ''), nullif($10, ''), $11, $12)
		ON CONFLICT (agent_id, session_key, owner, config_id) DO UPDATE SET acting_agent = excluded.acting_agent,
		acting_key = excluded.acting_key, url = excluded.url, token = excluded.token, auth_scheme = excluded.auth_scheme,
		auth_credentials = excluded.auth_credentials, protocol = excluded.protocol, created_at = excluded.created_at`,
		p.Session.AgentID, p.Session.Key, p.Owner, p.ID, p.ActingAs.AgentID, p.ActingAs.Key, p.URL, p.Token,
		p.AuthScheme, p.AuthCredentials, p.Protocol, p.CreatedAt)
	return wrap(err)
}

// DeletePushConfig implements sessions.PushTx.
func (t *Tx) DeletePushConfig(ctx context.Context, session vigil.SessionRef, owner, id string) (bool, error) {
	if err := t.flushLocks(ctx); err != nil {
		return false, err
	}
	tag, err := t.tx.Exec(ctx, `DELETE FROM push_configs WHERE agent_id = $1 AND session_key = $2 AND owner = $3 AND config_id = $4`,
		session.AgentID, session.Key, owner, id)
	if err != nil {
		return false, wrap(err)
	}
	return tag.RowsAffected() > 0, nil
}

// CountPushConfigs implements sessions.PushTx.
//
// The gateway adds a config only when the counts are under its limits.
// Under READ COMMITTED two writers (two gateways on one schema) would
// each count without the other's uncommitted config and both add one
// past a limit, so the count first takes a lock that every counting
// transaction holds until it ends: the second count then waits, and sees
// the first one's config. A transaction that holds session locks waits
// for it at most outOfOrderWait, then fails retryable: the holder may be
// waiting for one of those sessions.
func (t *Tx) CountPushConfigs(ctx context.Context, session vigil.SessionRef, owner string) (sessions.PushCount, error) {
	if err := t.flushLocks(ctx); err != nil {
		return sessions.PushCount{}, err
	}
	bounded := len(t.locked) > 0 || len(t.pending) > 0
	b := &pgx.Batch{}
	if bounded {
		b.Queue(`SET LOCAL lock_timeout = '` + outOfOrderWait + `'`)
	}
	b.Queue(`SELECT pg_advisory_xact_lock($1)`, lockKey("vigil push configs", t.s.channel))
	if bounded {
		b.Queue(`SET LOCAL lock_timeout TO DEFAULT`)
	}
	b.Queue(`SELECT
		(SELECT count(*) FROM push_configs WHERE agent_id = $1 AND session_key = $2 AND owner = $3),
		(SELECT count(*) FROM push_configs WHERE owner = $3),
		(SELECT count(*) FROM push_configs)`, session.AgentID, session.Key, owner)
	br := t.tx.SendBatch(ctx, b)
	defer br.Close()
	for range len(b.QueuedQueries) - 1 {
		if _, err := br.Exec(); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == lockNotAvailable {
				err = &conflictError{err}
			}
			return sessions.PushCount{}, wrap(fmt.Errorf("lock the push configs to count them: %w", err))
		}
	}
	var n sessions.PushCount
	if err := br.QueryRow().Scan(&n.OnSession, &n.OfOwner, &n.All); err != nil {
		return sessions.PushCount{}, wrap(err)
	}
	return n, wrap(br.Close())
}
