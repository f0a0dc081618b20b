package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"slices"
	"strconv"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
)

// Role is what a credential may do.
type Role string

const (
	// RoleAdmin may act as any session or as a person, on every agent.
	RoleAdmin Role = "admin"
	// RoleOperator is a person: it writes into sessions, edits goals, reads
	// everything, and never acts as a session.
	RoleOperator Role = "operator"
	// RoleAgent acts only as sessions of its own agent, and reaches other
	// agents' sessions only through its allow-list.
	RoleAgent Role = "agent"
)

// Principal is an authenticated credential.
type Principal struct {
	Role Role
	// ID is the person's id for an operator or admin, the agent id for an
	// agent credential.
	ID string
	// Allow lists other agents an agent credential may reach.
	Allow []string
	// RecordHuman lets an agent credential attribute an event it records
	// (session_record) to a person: a runtime reporting what a person did
	// in its own channel. Without it an agent cannot pass as a person.
	RecordHuman bool
	// credential tells apart tokens whose principals are otherwise alike
	// (two tokens of one agent with other allow-lists or rights): the
	// token's place among the configured ones, 0 for none.
	credential int
}

// Credentials holds the configured tokens, kept only as SHA-256 hashes.
type Credentials struct {
	entries []credential
}

type credential struct {
	hash      [sha256.Size]byte
	principal Principal
}

// TokenConfig is one configured token.
type TokenConfig struct {
	Token string `json:"token"`
	Role  Role   `json:"role"`
	// ID names the person (operator, admin); for an agent it may be left
	// out in favour of Agent.
	ID    string   `json:"id,omitempty"`
	Agent string   `json:"agent,omitempty"`
	Allow []string `json:"allow,omitempty"`
	// RecordHuman is the agent's right to record events of a human actor
	// with session_record.
	RecordHuman bool `json:"recordHuman,omitempty"`
}

// WebhookConfig names where an agent's wakes are POSTed.
type WebhookConfig struct {
	Agent string `json:"agent"`
	URL   string `json:"url"`
	// Secret keys the HMAC-SHA256 signature of each delivery.
	Secret string `json:"secret"`
	// PreviousSecrets are secrets being retired: each delivery is signed
	// with them too, until every receiver has the new one.
	PreviousSecrets []string `json:"previousSecrets,omitempty"`
}

// Config is the gateway's configuration file: credentials and webhooks.
type Config struct {
	Tokens   []TokenConfig   `json:"tokens"`
	Webhooks []WebhookConfig `json:"webhooks,omitempty"`
}

// LoadConfig reads a credentials file, as strictly as a request: unknown
// or duplicated fields and invalid UTF-8 are refused.
func LoadConfig(path string) (Config, error) {
	var c Config
	data, err := os.ReadFile(path)
	if err != nil {
		return c, fmt.Errorf("read config: %w", err)
	}
	if err := DecodeStrict(data, &c); err != nil {
		return Config{}, fmt.Errorf("read config %s: %w", path, err)
	}
	return c, nil
}

// NewCredentials checks every token entry. An admin token from the
// environment (adminToken) is added when not empty.
func NewCredentials(c Config, adminToken string) (*Credentials, error) {
	if adminToken != "" {
		c.Tokens = append(c.Tokens, TokenConfig{Token: adminToken, Role: RoleAdmin, ID: "admin"})
	}
	creds := &Credentials{}
	seen := map[[sha256.Size]byte]bool{}
	for i, t := range c.Tokens {
		if len(t.Token) < 16 {
			return nil, fmt.Errorf("token %d (%s %s): tokens must be at least 16 characters", i+1, t.Role, t.ID+t.Agent)
		}
		p := Principal{Role: t.Role, ID: t.ID, credential: i + 1}
		switch t.Role {
		case RoleAdmin, RoleOperator:
			if p.ID == "" {
				return nil, fmt.Errorf("token %d: an %s token needs an id (the person it stands for)", i+1, t.Role)
			}
			if t.RecordHuman {
				return nil, fmt.Errorf("token %d: recordHuman is a right of agent tokens; an %s token is a person already", i+1, t.Role)
			}
		case RoleAgent:
			id := t.Agent
			if id == "" {
				id = t.ID
			}
			agent, err := sessionkey.ParseAgentID(id)
			if err != nil {
				return nil, fmt.Errorf("token %d: %w", i+1, err)
			}
			p.ID = agent
			p.RecordHuman = t.RecordHuman
			for _, a := range t.Allow {
				allowed, err := sessionkey.ParseAgentID(a)
				if err != nil {
					return nil, fmt.Errorf("token %d: allow: %w", i+1, err)
				}
				p.Allow = append(p.Allow, allowed)
			}
		default:
			return nil, fmt.Errorf("token %d: unknown role %q (want admin, operator or agent)", i+1, t.Role)
		}
		h := sha256.Sum256([]byte(t.Token))
		if seen[h] {
			return nil, fmt.Errorf("token %d: the same token is configured twice", i+1)
		}
		seen[h] = true
		creds.entries = append(creds.entries, credential{hash: h, principal: p})
	}
	return creds, nil
}

// Empty reports whether no token is configured.
func (c *Credentials) Empty() bool { return c == nil || len(c.entries) == 0 }

// Authenticate finds the principal of token. It compares against every
// configured hash in constant time, so timing reveals nothing about which
// token (if any) was close.
func (c *Credentials) Authenticate(token string) (Principal, bool) {
	h := sha256.Sum256([]byte(token))
	var found Principal
	ok := 0
	for _, e := range c.entries {
		if subtle.ConstantTimeCompare(h[:], e.hash[:]) == 1 {
			found, ok = e.principal, 1
		}
	}
	return found, ok == 1
}

// LocalPrincipal is who every request is when no token is configured (the
// gateway then listens on loopback only).
var LocalPrincipal = Principal{Role: RoleAdmin, ID: "local"}

// Caller is who a request comes from: a principal and, optionally, the
// session it acts as.
type Caller struct {
	Principal Principal
	// Session is the acting session; nil for a person acting as themself.
	Session *vigil.SessionRef
}

// Identity names the token and the acting session c stands for: two
// callers have the same Identity only when they use the same token, acting
// as the same session. What is bound to the caller that opened it (an MCP
// session, an MCP task) compares it, so another token of the same agent,
// which may reach less, cannot ride on it.
func (c Caller) Identity() string {
	id := strconv.Itoa(c.Principal.credential) + "|" + string(c.Principal.Role) + "|" + c.Principal.ID + "|"
	if c.Session != nil {
		id += c.Session.Key
	}
	return id
}

// canReach reports whether the principal may read or change sessions of
// the agent.
func (p Principal) canReach(agentID string) bool {
	switch p.Role {
	case RoleAdmin, RoleOperator:
		return true
	case RoleAgent:
		return agentID == p.ID || slices.Contains(p.Allow, agentID)
	}
	return false
}

// CanReach reports whether the caller may read or change sessions of the
// agent.
func (c Caller) CanReach(agentID string) bool { return c.Principal.canReach(agentID) }

// Reach checks the caller may read or change ref, naming why not.
func (c Caller) Reach(ref vigil.SessionRef) error { return c.reach(ref) }

// SeesQueueOf reports whether the caller may be shown what is queued for
// ref as it is queued (a session stream's notices): a person, an admin, or
// a credential of ref's own agent, which may act as ref and read its queue
// in its turn. Another agent's credential may not, allow-listed or not: a
// session's queue stays its own, and its notices name sessions that
// credential may not reach.
func (c Caller) SeesQueueOf(ref vigil.SessionRef) bool {
	return c.Principal.Role != RoleAgent || c.Principal.ID == ref.AgentID
}

// actor is the actor the caller's changes are recorded as: the acting
// session's key for an agent, the person's id otherwise. It never comes
// from a request body.
func (c Caller) actor() (vigil.ActorType, string) {
	if c.Session != nil {
		return vigil.ActorAgent, c.Session.Key
	}
	return vigil.ActorHuman, c.Principal.ID
}
