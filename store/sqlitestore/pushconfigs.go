package sqlitestore

import (
	"context"
	"strings"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// pushConfigsSchema is the migration that adds the push configs: keyed by
// their session first, so deleting a session's configs and listing a
// task's are one range; counting an owner's uses its index.
const pushConfigsSchema = `
CREATE TABLE push_configs (
	agent_id         TEXT    NOT NULL,
	session_key      TEXT    NOT NULL,
	owner            TEXT    NOT NULL,
	config_id        TEXT    NOT NULL,
	acting_agent     TEXT,
	acting_key       TEXT,
	url              TEXT    NOT NULL,
	token            TEXT    NOT NULL,
	auth_scheme      TEXT,
	auth_credentials TEXT,
	protocol         TEXT    NOT NULL,
	created_at       INTEGER NOT NULL,
	PRIMARY KEY (agent_id, session_key, owner, config_id)
) WITHOUT ROWID;
CREATE INDEX push_configs_by_owner ON push_configs (owner);
`

const deletePushConfigsOfSession = `DELETE FROM push_configs WHERE agent_id = ? AND session_key = ?`

const pushConfigColumns = `agent_id, session_key, owner, config_id, coalesce(acting_agent, ''), coalesce(acting_key, ''),
	url, token, coalesce(auth_scheme, ''), coalesce(auth_credentials, ''), protocol, created_at`

// PushConfigs implements sessions.PushStore.
func (s *Store) PushConfigs(ctx context.Context, f sessions.PushFilter) ([]sessions.PushConfig, error) {
	var where []string
	var args []any
	if f.Session != (vigil.SessionRef{}) {
		where = append(where, "agent_id = ? AND session_key = ?")
		args = append(args, f.Session.AgentID, f.Session.Key)
	}
	if f.Owner != "" {
		where = append(where, "owner = ?")
		args = append(args, f.Owner)
	}
	q := `SELECT ` + pushConfigColumns + ` FROM push_configs`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	q += " ORDER BY agent_id, session_key, owner, config_id"
	var out []sessions.PushConfig
	err := s.reading(ctx, func(c conn) error {
		return c.query(q, args, func(r rowValues) error {
			out = append(out, sessions.PushConfig{Session: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)},
				Owner: r.str(2), ID: r.str(3), ActingAs: vigil.SessionRef{AgentID: r.str(4), Key: r.str(5)},
				URL: r.str(6), Token: r.str(7), AuthScheme: r.str(8), AuthCredentials: r.str(9), Protocol: r.str(10),
				CreatedAt: r.int(11)})
			return nil
		})
	})
	return out, err
}

// PutPushConfig implements sessions.PushTx.
func (t *Tx) PutPushConfig(ctx context.Context, p sessions.PushConfig) error {
	_, err := t.c.exec(`INSERT INTO push_configs (agent_id, session_key, owner, config_id, acting_agent, acting_key,
		url, token, auth_scheme, auth_credentials, protocol, created_at)
		VALUES (?, ?, ?, ?, nullif(?, ''), nullif(?, ''), ?, ?, nullif(?, ''), nullif(?, ''), ?, ?)
		ON CONFLICT (agent_id, session_key, owner, config_id) DO UPDATE SET acting_agent = excluded.acting_agent,
		acting_key = excluded.acting_key, url = excluded.url, token = excluded.token, auth_scheme = excluded.auth_scheme,
		auth_credentials = excluded.auth_credentials, protocol = excluded.protocol, created_at = excluded.created_at`,
		p.Session.AgentID, p.Session.Key, p.Owner, p.ID, p.ActingAs.AgentID, p.ActingAs.Key, p.URL, p.Token,
		p.AuthScheme, p.AuthCredentials, p.Protocol, p.CreatedAt)
	return err
}

// DeletePushConfig implements sessions.PushTx.
func (t *Tx) DeletePushConfig(ctx context.Context, session vigil.SessionRef, owner, id string) (bool, error) {
	n, err := t.c.exec(`DELETE FROM push_configs WHERE agent_id = ? AND session_key = ? AND owner = ? AND config_id = ?`,
		session.AgentID, session.Key, owner, id)
	return n > 0, err
}

// CountPushConfigs implements sessions.PushTx.
func (t *Tx) CountPushConfigs(ctx context.Context, session vigil.SessionRef, owner string) (sessions.PushCount, error) {
	var n sessions.PushCount
	_, err := t.c.queryRow(`SELECT
		(SELECT count(*) FROM push_configs WHERE agent_id = ? AND session_key = ? AND owner = ?),
		(SELECT count(*) FROM push_configs WHERE owner = ?),
		(SELECT count(*) FROM push_configs)`, []any{session.AgentID, session.Key, owner, owner},
		func(r rowValues) error {
			n = sessions.PushCount{OnSession: int(r.int(0)), OfOwner: int(r.int(1)), All: int(r.int(2))}
			return nil
		})
	return n, err
}
