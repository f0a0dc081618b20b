package node

import (
	"errors"
	"testing"

	"github.com/vigilhq/vigil/store/pgstore"
)

func TestListeningFollowsTheChangeListenersConnection(t *testing.T) {
	n := &Node{shared: new(pgstore.Store)}
	if err := n.Listening(t.Context()); !errors.Is(err, ErrNotListening) {
		t.Fatalf("before the listener connects: %v, want ErrNotListening", err)
	}
	n.listening.Store(true)
	if err := n.Listening(t.Context()); err != nil {
		t.Fatalf("with the listener connected: %v", err)
	}
	n.listening.Store(false)
	if err := n.Listening(t.Context()); !errors.Is(err, ErrNotListening) {
		t.Fatalf("after the listener lost its connection: %v, want ErrNotListening", err)
	}
}

func TestANodeOnItsOwnStoreHasNothingToListenFor(t *testing.T) {
	if err := (&Node{}).Listening(t.Context()); err != nil {
		t.Fatalf("a node on its own store: %v, want nil", err)
	}
}
