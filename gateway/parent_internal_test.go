package gateway

import (
	"context"
	"errors"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// unreadable is a transaction whose reads of session rows fail.
type unreadable struct {
	sessions.Tx
	err error
}

func (u unreadable) GetSession(context.Context, vigil.SessionRef) (sessions.Session, bool, error) {
	return sessions.Session{}, false, u.err
}

// A record on a spawned session whose parent's row cannot be read fails,
// rather than going on as if the session had no parent to notify.
func TestAParentRowThatCannotBeReadFailsTheWrite(t *testing.T) {
	failure := errors.New("the store is gone")
	child := sessions.Session{Ref: vigil.MustRef("agent:a:subagent:c"), SpawnedBy: "agent:a:main"}
	parent, err := liveParent(t.Context(), unreadable{err: failure}, child)
	if !errors.Is(err, failure) || parent != "" {
		t.Errorf("liveParent with the parent's row unreadable: %q, %v; want no parent and the read's error", parent, err)
	}
}

// A parent whose row is gone is no parent: the record goes on without one.
func TestAParentWhoseRowIsGoneIsNoParent(t *testing.T) {
	child := sessions.Session{Ref: vigil.MustRef("agent:a:subagent:c"), SpawnedBy: "agent:a:main"}
	parent, err := liveParent(t.Context(), unreadable{}, child)
	if err != nil || parent != "" {
		t.Errorf("liveParent with the parent's row gone: %q, %v; want no parent and no error", parent, err)
	}
}
