package a2aserver_test

// A2A's streams (message/stream, tasks/resubscribe) are open event
// streams like the HTTP API's: counted per credential and in all from
// their opening, refused naming the limit past it, and given back when
// their client leaves.

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

func TestAnA2AStreamOverTheCredentialsStreamLimitIsRefusedNamingIt(t *testing.T) {
	t.Parallel()
	s := startWith(t, context.Background(), gatewaytest.Options{Path: filepath.Join(t.TempDir(), "vigil.db"),
		Gateway: gateway.Options{Limits: gateway.Limits{StreamsPerCredential: 1}}}, nil)
	ctx := guarded(t)
	child := spawnWorker(ctx, t, client(s, tokMain, manager))
	operator := client(s, tokOperator, "")
	pull, stop := pullOf(operator.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child)}))
	defer stop()
	next(t, pull)
	refused, stopRefused := pullOf(operator.ResubscribeToTask(ctx, &a2a.TaskIDParams{ID: a2a.TaskID(child)}))
	defer stopRefused()
	if _, err, _ := refused(); err == nil || !strings.Contains(err.Error(), "already holds 1 open event streams, its limit") {
		t.Fatalf("a second stream over the credential's limit: %v, want a refusal naming the limit", err)
	}
}

func TestAnA2AStreamWhoseClientLeavesGivesItsPlaceBack(t *testing.T) {
	s := start(t)
	ctx := guarded(t)
	child := spawnWorker(ctx, t, client(s, tokMain, manager))
	m := text("a person's word")
	m.TaskID = a2a.TaskID(child)
	streaming, leave := context.WithCancel(ctx)
	pull, stop := pullOf(client(s, tokOperator, "").SendStreamingMessage(streaming, &a2a.MessageSendParams{Message: m}))
	defer stop()
	next(t, pull)
	if n := s.G.Held(gateway.HoldStream); n != 1 {
		t.Fatalf("%d streams held with a message/stream open, want 1", n)
	}
	leave()
	if err := s.G.AwaitHeld(ctx, gateway.HoldStream, 0); err != nil {
		t.Fatalf("the client left its stream, which stays held: %v", err)
	}
}
