package sessions

import (
	"context"

	vigil "github.com/vigilhq/vigil"
)

// Recorded is a session the gateway does not host but knows through what
// was recorded of it (session_record, an adoption): a runtime keeps its
// transcript and store, and tells vigil what happens in it. It is listed,
// graphed and acted as like a hosted session. A session hosted since keeps
// its row here until it is deleted; the hosted row is the one shown.
type Recorded struct {
	Ref vigil.SessionRef
	// Kind is main, subagent or other, from the key, as a hosted
	// session's is.
	Kind string
	// Runtime names what keeps the session, as its recorder last named it
	// (session_record's hostedBy, an adoption's catalog id); "" when none
	// was named.
	Runtime string
	// CreatedAt is when something was first recorded of it, UpdatedAt when
	// last (ms since the epoch).
	CreatedAt, UpdatedAt int64
}

// RecordedReader reads recorded sessions outside a transaction; it is part
// of Store.
type RecordedReader interface {
	// RecordedSession reads one recorded session.
	RecordedSession(ctx context.Context, ref vigil.SessionRef) (Recorded, bool, error)
	// ListRecorded lists recorded sessions as ListSessions lists hosted
	// ones: filtered by agent and kind, ordered by agent id then key,
	// after the given position, at most limit.
	ListRecorded(ctx context.Context, f ListFilter) ([]Recorded, error)
}

// RecordedWriter holds recorded session writes inside the engine's write
// transaction; it is part of Tx.
type RecordedWriter interface {
	// GetRecorded is RecordedSession inside the transaction.
	GetRecorded(ctx context.Context, ref vigil.SessionRef) (Recorded, bool, error)
	// PutRecorded notes that r was recorded: it creates r's row, or moves
	// an existing row's UpdatedAt to r's and, when r names a Runtime,
	// sets it. An existing row keeps its Kind and CreatedAt.
	PutRecorded(ctx context.Context, r Recorded) error
	// DeleteRecorded deletes the session's row and reports whether there
	// was one.
	DeleteRecorded(ctx context.Context, ref vigil.SessionRef) (bool, error)
}
