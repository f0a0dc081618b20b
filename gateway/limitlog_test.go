package gateway_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// syncBuffer is a log destination a test reads while the gateway writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The refusal tells the caller; the operator learns from the log which
// credential is at its limit, once until it releases what it holds, so a
// client retrying in a loop does not flood the log.
func TestACredentialRefusedAtItsOwnLimitIsLoggedOnceUntilItReleasesOne(t *testing.T) {
	var logs syncBuffer
	g := gatewayWith(t, gateway.Options{Limits: gateway.Limits{StreamsPerCredential: 1},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	c := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "busy"}, "")
	told := func() int { return strings.Count(logs.String(), "refused at its own limit") }

	release, err := g.Hold(c, gateway.HoldStream)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := g.Hold(c, gateway.HoldStream); gateway.Code(err) != gateway.CodeTooMany {
			t.Fatalf("a stream over the credential's limit: %v, want too_many_requests", err)
		}
	}
	if n := told(); n != 1 || !strings.Contains(logs.String(), "id=busy") {
		t.Fatalf("%d log lines for three refusals, want one naming the credential:\n%s", n, logs.String())
	}
	release()
	again, err := g.Hold(c, gateway.HoldStream)
	if err != nil {
		t.Fatal(err)
	}
	defer again()
	if _, err := g.Hold(c, gateway.HoldStream); gateway.Code(err) != gateway.CodeTooMany {
		t.Fatalf("a stream over the credential's limit: %v, want too_many_requests", err)
	}
	if n := told(); n != 2 {
		t.Fatalf("%d log lines once the credential reached its limit again, want two:\n%s", n, logs.String())
	}
}
