package sessions

import (
	"context"
	"fmt"

	vigil "github.com/vigilhq/vigil"
)

// Store is the storage the gateway needs besides the engine's. A backend
// implements it next to vigil.Store on the same database, and each write
// transaction it hands the engine holds the session writes (Tx) as its
// rows (vigil.Tx.Rows), so a session change and its event commit
// together.
type Store interface {
	PushStore
	LinkReader
	// LockLinks takes, without waiting, the lock of following host's
	// links, so that one gateway at a time follows them; ok is false when
	// another holder has it. The lock is released by unlock, or when the
	// process dies. A store that one gateway uses alone may grant it
	// always.
	LockLinks(ctx context.Context, host string) (unlock func(), ok bool, err error)
	RecordedReader
	// Session reads one session.
	Session(ctx context.Context, ref vigil.SessionRef) (Session, bool, error)
	// SessionByLabel finds an agent's session by its label.
	SessionByLabel(ctx context.Context, agentID, label string) (Session, bool, error)
	// ListSessions lists sessions ordered by agent id then key, after the
	// given position, at most limit.
	ListSessions(ctx context.Context, f ListFilter) ([]Session, error)
	// Messages reads up to limit messages of a session with id > afterID,
	// ascending.
	Messages(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]Message, error)
	// LatestMessages reads up to limit of a session's newest messages with
	// id < beforeID, newest first; math.MaxInt64 reads its newest of all.
	LatestMessages(ctx context.Context, ref vigil.SessionRef, beforeID int64, limit int) ([]Message, error)
	// Run reads one run.
	Run(ctx context.Context, runID string) (Run, bool, error)
	// OpenRuns lists every run that has not ended, the oldest first.
	OpenRuns(ctx context.Context) ([]Run, error)
}

// ListFilter selects sessions. Empty fields match everything.
type ListFilter struct {
	AgentID string
	Kind    string
	// After is the (agent id, key) to continue after, exclusive.
	After vigil.SessionRef
	Limit int
}

// TxOf is the session writes of the store transaction txn runs in: they
// commit or roll back with txn's write. It fails for a store whose
// transactions keep no sessions.
func TxOf(txn *vigil.Txn) (Tx, error) {
	tx, ok := txn.Rows().(Tx)
	if !ok {
		return nil, fmt.Errorf("the store's write transaction keeps no sessions (its rows are %T)", txn.Rows())
	}
	return tx, nil
}

// Tx holds the gateway's writes inside the engine's write transaction;
// everything else the write does goes through the engine (vigil.Txn).
type Tx interface {
	PushTx
	LinkWriter
	RecordedWriter
	// GetSession reads a session row as the transaction sees it, its own
	// writes included. The session returned is the caller's to change.
	GetSession(ctx context.Context, ref vigil.SessionRef) (Session, bool, error)
	// MessagesAfter is Store.Messages inside the transaction.
	MessagesAfter(ctx context.Context, ref vigil.SessionRef, afterID int64, limit int) ([]Message, error)
	// PutSession creates or replaces a session row. A label already used by
	// another session of the agent is an error wrapping ErrConflict. What
	// is written is s as given: a later change of s's goal by the caller
	// changes nothing stored, even when the write waits for the commit.
	PutSession(ctx context.Context, s Session) error
	// DeleteSessionRow deletes the session row, its transcript, its runs
	// and its push configs.
	DeleteSessionRow(ctx context.Context, ref vigil.SessionRef) error
	// AppendMessage appends to a transcript and returns the message's id
	// (m.ID when set, else a new one above every earlier id).
	AppendMessage(ctx context.Context, m Message) (int64, error)
	// CompactMessages deletes the session's messages with id <= upTo and,
	// when it deleted any, stores summary as a RoleSummary message with the
	// id of the newest one deleted, in their place; it returns how many it
	// deleted.
	CompactMessages(ctx context.Context, ref vigil.SessionRef, upTo int64, summary Message) (int, error)
	PutRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, runID string) (Run, bool, error)
}
