package gateway_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// The refusal tells the caller; the operator learns from the log which
// credential is at its limit, once until it releases what it holds, so a
// client retrying in a loop does not flood the log.
func TestACredentialRefusedAtItsOwnLimitIsLoggedOnceUntilItReleasesOne(t *testing.T) {
	var logs bytes.Buffer // Hold logs on its caller's goroutine
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
