package a2aserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/sessions"
)

// followerKey marks the context of the handler, so a store can tell the
// reads of push deliveries and streams from those of requests.
type followerKey struct{}

// sessionReadFailing fails one read of a session made in the handler's
// context once armed, and says when it has.
type sessionReadFailing struct {
	gatewaytest.Store
	armed  atomic.Bool
	failed chan struct{}
}

func (s *sessionReadFailing) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	if ctx.Value(followerKey{}) != nil && s.armed.CompareAndSwap(true, false) {
		close(s.failed)
		return sessions.Session{}, false, fmt.Errorf("%w: the session cannot be read", vigil.ErrStoreFailed)
	}
	return s.Store.Session(ctx, ref)
}

// A read of the store that fails once while a push config's delivery
// follows its task does not end the delivery: the config is still stored
// and listed, so its receiver goes on hearing of the task, told first of
// what it may have missed.
func TestAPushDeliveryOutlivesAStoreReadThatFailsOnce(t *testing.T) {
	t.Parallel()
	store := &sessionReadFailing{failed: make(chan struct{})}
	s := startWith(t, context.WithValue(context.Background(), followerKey{}, true), gatewaytest.Options{
		Path: filepath.Join(t.TempDir(), "vigil.db"),
		Wrap: func(inner gatewaytest.Store) gatewaytest.Store {
			store.Store = inner
			return store
		}}, nil)
	ctx := guarded(t)
	const secret = "a-push-secret-of-some-length"
	hook, got := receiver(t, secret, "")
	child := a2a.TaskID(spawnWorker(ctx, t, client(s, tokMain, manager)))
	if _, err := client(s, tokAdmin, "").SetTaskPushConfig(ctx, &a2a.TaskPushConfig{TaskID: child,
		Config: a2a.PushConfig{ID: "hook-1", URL: hook.URL, Token: secret}}); err != nil {
		t.Fatal(err)
	}
	store.armed.Store(true)
	m := text("a person writes")
	m.TaskID = child
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-store.failed:
	case <-ctx.Done():
		t.Fatal("the delivery never read the session (hang guard)")
	}
	m = text("a person writes again")
	m.TaskID = child
	if _, err := client(s, tokOperator, "").SendMessage(ctx, &a2a.MessageSendParams{Message: m}); err != nil {
		t.Fatal(err)
	}
	// The first message's update was lost with the read; what comes next
	// is either the second message's or, when the task is followed again
	// after it, the gap covering both.
	select {
	case body := <-got:
		var task a2a.Task
		if err := json.Unmarshal(body, &task); err != nil {
			t.Fatalf("a push delivery is not a task: %v", err)
		}
		if task.ID != child || task.Status.Message == nil || len(task.Status.Message.Parts) != 1 {
			t.Fatalf("delivered %s", body)
		}
		p, _ := task.Status.Message.Parts[0].(a2a.TextPart)
		if !strings.Contains(p.Text, "again") && task.Metadata[a2aserver.MetaGap] != true {
			t.Fatalf("delivered %s, want the second message or a gap", body)
		}
	case <-ctx.Done():
		t.Fatal("after a read that failed once, the push config delivers nothing more (hang guard)")
	}
}
