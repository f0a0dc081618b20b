package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

func TestAPanicInAnOperationIsAnInternalErrorLoggedWithItsStackUnderItsRequestID(t *testing.T) {
	var logs bytes.Buffer
	g := gatewaytest.Open(t, gatewaytest.Options{
		Gateway:      gateway.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))},
		WrapSessions: gatewaytest.PanicReading("agent:main:boom"),
	}).Gateway
	_, err := g.Status(context.Background(), gateway.Caller{Principal: gateway.LocalPrincipal},
		gateway.StatusInput{SessionKey: "agent:main:boom"})
	var f *gateway.Failure
	if !errors.As(err, &f) || gateway.Code(err) != gateway.CodeInternal {
		t.Fatalf("status = %v, want an internal error", err)
	}
	if strings.Contains(err.Error(), "a bug in reading") {
		t.Errorf("the caller is told the panic's details: %v", err)
	}
	if !strings.Contains(logs.String(), f.RequestID) || !strings.Contains(logs.String(), "a bug in reading agent:main:boom") ||
		!strings.Contains(logs.String(), "goroutine") {
		t.Errorf("the log holds %q, want the panic and its stack under %s", logs.String(), f.RequestID)
	}
	if _, err := g.Status(context.Background(), gateway.Caller{Principal: gateway.LocalPrincipal},
		gateway.StatusInput{SessionKey: "agent:main:main"}); err != nil {
		t.Fatalf("the next status: %v", err)
	}
}

// A turn whose look at the store panics lets go of what it listened with
// and where it parked: the panic ends it as an internal error, and the
// hub no longer counts it among the session's listeners.
func TestATurnThatPanicsStopsListeningForItsSession(t *testing.T) {
	g := gatewaytest.Open(t, gatewaytest.Options{
		Gateway:      gateway.Options{Logger: slog.New(slog.DiscardHandler)},
		WrapSessions: gatewaytest.PanicReading("agent:boom:main"),
	}).Gateway
	wait := 30
	_, err := g.Turn(context.Background(), gateway.Caller{Principal: gateway.LocalPrincipal},
		gateway.TurnInput{SessionKey: "agent:boom:main", WaitSeconds: &wait})
	if gateway.Code(err) != gateway.CodeInternal {
		t.Fatalf("turn = %v, want an internal error", err)
	}
	if g.Hub().Listened("agent:boom:main") {
		t.Error("the hub still has a listener of the turn that panicked")
	}
	if n := g.Held(gateway.HoldWait); n != 0 {
		t.Errorf("%d waits held after the turn that panicked, want 0", n)
	}
}
