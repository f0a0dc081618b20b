package adoption

import (
	"context"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// Local is a Backend on an engine and the sessions store beside it, on
// one database: the gateway's own, and vigil sim's. Each report is
// applied in a write that changes its session (vigil.Changing).
type Local struct {
	Engine *vigil.Engine
	Store  sessions.Store
	// Host is the host id whose links are followed.
	Host string
	// OwnOf, when set, gives a session's own recent messages in place of
	// its transcript's (a scenario's sessions have none).
	OwnOf func(ctx context.Context, ref vigil.SessionRef) (Own, error)
}

var _ Backend = Local{}

// Links implements Backend.
func (b Local) Links(ctx context.Context, after vigil.SessionRef, limit int) ([]sessions.Link, error) {
	return b.Store.WatchedLinks(ctx, b.Host, after, limit)
}

// Own implements Backend.
func (b Local) Own(ctx context.Context, ref vigil.SessionRef) (Own, error) {
	if b.OwnOf != nil {
		return b.OwnOf(ctx, ref)
	}
	return OwnOf(ctx, b.Store, ref)
}

// Apply implements Backend.
func (b Local) Apply(ctx context.Context, r Report) (Applied, error) {
	var out Applied
	err := update(ctx, b.Engine, r, func(ctx context.Context, txn *vigil.Txn) error {
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		out, err = Apply(ctx, txn, tx, r)
		return err
	})
	return out, err
}

// update runs the write that applies r. A report that records an event
// runs as a write that changes its session (vigil.Changing), whose lock comes
// before the link's; one that only moves the marker runs as a plain
// write: it locks nothing but the link's row, and on PostgreSQL a write
// on a session takes a sequence number ahead for the record it expects,
// which a write that records nothing would leave unused.
func update(ctx context.Context, eng *vigil.Engine, r Report, fn func(context.Context, *vigil.Txn) error) error {
	if r.Missing || r.Turns > 0 {
		return eng.Update(ctx, fn, vigil.Changing(r.Session))
	}
	return eng.Update(ctx, fn)
}
