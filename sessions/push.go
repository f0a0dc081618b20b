package sessions

import (
	"context"

	vigil "github.com/vigilhq/vigil"
)

// PushConfig is a push notification configuration an A2A client set on a
// task, which in vigil is a session: vigil POSTs the task's updates to
// URL, signed with Token, following the task as the credential that set
// it (acting as ActingAs, when it acted as a session). A backend stores it
// with the sessions and deletes it with its session (DeleteSessionRow),
// so it outlives a restart and never outlives its task.
type PushConfig struct {
	// Session is the task the config follows.
	Session vigil.SessionRef
	// Owner names the credential that set it (its role and id); only that
	// credential sees or deletes it.
	Owner string
	// ID names the config among its owner's configs on the session.
	ID string
	// ActingAs is the session the owner acted as when it set the config;
	// the zero value when it acted as a person.
	ActingAs vigil.SessionRef
	URL      string
	// Token is the secret each delivery is signed with.
	Token string
	// AuthScheme and AuthCredentials, when AuthScheme is set, go with each
	// delivery as its Authorization header.
	AuthScheme, AuthCredentials string
	// Protocol is the A2A revision the config was set through ("0.3",
	// "1.0"): each delivery is shaped as that revision says.
	Protocol  string
	CreatedAt int64 // ms since epoch
}

// PushFilter selects push configs. Empty fields match everything.
type PushFilter struct {
	Session vigil.SessionRef
	Owner   string
}

// PushCount is how many push configs are stored: on one session by one
// owner, by that owner on every session, and in all.
type PushCount struct {
	OnSession, OfOwner, All int
}

// PushStore reads the push configs a backend stores.
type PushStore interface {
	// PushConfigs lists the configs f selects, ordered by session (agent
	// id, then key), owner and id.
	PushConfigs(ctx context.Context, f PushFilter) ([]PushConfig, error)
}

// PushTx writes push configs inside a write transaction.
type PushTx interface {
	// PutPushConfig stores c, replacing the config of the same session,
	// owner and id.
	PutPushConfig(ctx context.Context, c PushConfig) error
	// DeletePushConfig deletes one config and reports whether there was
	// one.
	DeletePushConfig(ctx context.Context, session vigil.SessionRef, owner, id string) (bool, error)
	// CountPushConfigs counts the configs stored on session by owner, by
	// owner in all, and in all, as the transaction sees them.
	CountPushConfigs(ctx context.Context, session vigil.SessionRef, owner string) (PushCount, error)
}
