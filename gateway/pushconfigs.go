package gateway

import (
	"context"
	"fmt"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// Push notification configs (A2A) are stored with the sessions, so they
// outlive a restart and go with their session when it is deleted. Each
// belongs to the credential that set it: only that credential lists or
// deletes it. The transport that serves them decides who may set one and
// where deliveries may go; the gateway keeps them, bounded.

// PushLimits bound the push configs kept: per credential on one task,
// per credential, and in all. A negative value means no limit.
type PushLimits struct {
	PerTask, PerCredential, Total int
}

// Default push config limits.
const (
	DefaultMaxPushConfigsPerTask       = 16
	DefaultMaxPushConfigsPerCredential = 256
	DefaultMaxPushConfigs              = 1024
)

// WithDefaults is l with each zero limit set to its default.
func (l PushLimits) WithDefaults() PushLimits {
	l.PerTask = orDefault(l.PerTask, DefaultMaxPushConfigsPerTask)
	l.PerCredential = orDefault(l.PerCredential, DefaultMaxPushConfigsPerCredential)
	l.Total = orDefault(l.Total, DefaultMaxPushConfigs)
	return l
}

// Bounds, in bytes, of the fields of a push config its caller chooses.
// Each is stored as given and goes with every delivery; bounded, one
// config holds under 7 KiB, so the most a gateway keeps
// (DefaultMaxPushConfigs) stays under 7 MiB.
const (
	MaxPushIDBytes  = 128  // a name among the caller's configs on a task
	MaxPushURLBytes = 2048 // the longest URL that common proxies and servers take
	// MaxPushTokenBytes fits a "whsec_" secret of a 256-byte key.
	MaxPushTokenBytes      = 512
	MaxPushAuthSchemeBytes = 64 // one word: "Bearer", "Basic"
	// MaxPushAuthCredentialsBytes fits a large JWT, and with the scheme
	// stays within the 8 KiB a receiver's header line commonly may take.
	MaxPushAuthCredentialsBytes = 4096
)

// PushFieldTooLong finds the first field of cfg its caller chose that is
// longer than its bound: its name as A2A spells it ("id", "url", "token",
// "authentication.scheme", "authentication.credentials"), and the bound.
// over is false when every field is within its bound.
func PushFieldTooLong(cfg sessions.PushConfig) (field string, limit int, over bool) {
	for _, f := range []struct {
		name  string
		value string
		limit int
	}{
		{"id", cfg.ID, MaxPushIDBytes},
		{"url", cfg.URL, MaxPushURLBytes},
		{"token", cfg.Token, MaxPushTokenBytes},
		{"authentication.scheme", cfg.AuthScheme, MaxPushAuthSchemeBytes},
		{"authentication.credentials", cfg.AuthCredentials, MaxPushAuthCredentialsBytes},
	} {
		if len(f.value) > f.limit {
			return f.name, f.limit, true
		}
	}
	return "", 0, false
}

// PushOwner names the credential of p as push configs record their owner.
func PushOwner(p Principal) string { return string(p.Role) + "|" + p.ID }

// SetPushConfig stores cfg (replacing c's config of the same id on the
// same session) as c's: its Session must exist and be one c reaches.
// A field over its bound (PushFieldTooLong) is refused with an error
// wrapping ErrInvalid that names it and the bound, and nothing is stored.
// A new config over one of l's limits is refused, over the credential's
// with an error wrapping ErrTooMany, over the gateway's with one wrapping
// ErrUnavailable; each names the limit.
func (g *Gateway) SetPushConfig(ctx context.Context, c Caller, cfg sessions.PushConfig, l PushLimits) (err error) {
	defer g.public(ctx, &err)
	if field, limit, over := PushFieldTooLong(cfg); over {
		return fmt.Errorf("%w: a push notification config's %s may be at most %d bytes", ErrInvalid, field, limit)
	}
	if err := c.reach(cfg.Session); err != nil {
		return err
	}
	cfg.Owner = PushOwner(c.Principal)
	cfg.ActingAs = vigil.SessionRef{}
	if c.Session != nil {
		cfg.ActingAs = *c.Session
	}
	// On the session's lock, which a delete takes before it deletes the
	// session's configs: a delete on another gateway of the database then
	// either comes first, and the session is not found, or deletes this
	// config too.
	return g.writeOnRow(ctx, cfg.Session, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		if _, err := mustGet(ctx, tx, cfg.Session); err != nil {
			return err
		}
		// Replacing a config adds none.
		replaced, err := tx.DeletePushConfig(ctx, cfg.Session, cfg.Owner, cfg.ID)
		if err != nil {
			return err
		}
		if replaced {
			return tx.PutPushConfig(ctx, cfg)
		}
		n, err := tx.CountPushConfigs(ctx, cfg.Session, cfg.Owner)
		if err != nil {
			return fmt.Errorf("count push configs: %w", err)
		}
		switch {
		case l.PerTask >= 0 && n.OnSession >= l.PerTask:
			return fmt.Errorf("%w: this credential already has %d push notification configs on %s, its limit; delete one",
				ErrTooMany, l.PerTask, cfg.Session.Key)
		case l.PerCredential >= 0 && n.OfOwner >= l.PerCredential:
			return fmt.Errorf("%w: this credential already has %d push notification configs, its limit; delete one",
				ErrTooMany, l.PerCredential)
		case l.Total >= 0 && n.All >= l.Total:
			return fmt.Errorf("%w: the gateway already keeps %d push notification configs, its limit; retry later",
				ErrUnavailable, l.Total)
		}
		return tx.PutPushConfig(ctx, cfg)
	})
}

// PushConfigs lists c's own push configs on session.
func (g *Gateway) PushConfigs(ctx context.Context, c Caller, session vigil.SessionRef) (_ []sessions.PushConfig, err error) {
	defer g.public(ctx, &err)
	if err := c.reach(session); err != nil {
		return nil, err
	}
	return g.store.PushConfigs(ctx, sessions.PushFilter{Session: session, Owner: PushOwner(c.Principal)})
}

// DeletePushConfig deletes c's push config id on session, and reports
// whether there was one.
func (g *Gateway) DeletePushConfig(ctx context.Context, c Caller, session vigil.SessionRef, id string) (deleted bool, err error) {
	defer g.public(ctx, &err)
	if err := c.reach(session); err != nil {
		return false, err
	}
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		var err error
		deleted, err = tx.DeletePushConfig(ctx, session, PushOwner(c.Principal), id)
		return err
	})
	return deleted, err
}

// DropPushConfig deletes the stored config cfg names (its session, owner
// and id), whoever set it: for the transport that delivers them, to drop
// those it will never deliver. It reports whether there was one.
func (g *Gateway) DropPushConfig(ctx context.Context, cfg sessions.PushConfig) (deleted bool, err error) {
	defer g.public(ctx, &err)
	err = g.write(ctx, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
		var err error
		deleted, err = tx.DeletePushConfig(ctx, cfg.Session, cfg.Owner, cfg.ID)
		return err
	})
	return deleted, err
}

// StoredPushConfigs lists the push configs f selects, whoever set them:
// for the transport that delivers them, to resume deliveries after a
// restart and to stop those whose config is gone.
func (g *Gateway) StoredPushConfigs(ctx context.Context, f sessions.PushFilter) ([]sessions.PushConfig, error) {
	return g.store.PushConfigs(ctx, f)
}

// PushPrincipal finds the configured principal whose push configs are
// owner's (PushOwner names it), so their deliveries can resume after a
// restart as that credential; false when no configured token has it any
// more. With no token configured, the local admin is the only one.
func (c *Credentials) PushPrincipal(owner string) (Principal, bool) {
	if c.Empty() {
		return LocalPrincipal, owner == PushOwner(LocalPrincipal)
	}
	for _, e := range c.entries {
		if PushOwner(e.principal) == owner {
			return e.principal, true
		}
	}
	return Principal{}, false
}
