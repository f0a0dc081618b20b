package gateway_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// A write whose commit may or may not have been made is not reported as
// one that changed nothing: the caller is told its outcome is unknown,
// and to look at the session before repeating it.
func TestAWriteOfUnknownOutcomeIsNotReportedAsChangingNothing(t *testing.T) {
	gw := gatewaytest.Open(t, gatewaytest.Options{})
	err := gw.Gateway.Public(fmt.Errorf("commit: %w", errors.Join(vigil.ErrOutcomeUnknown, vigil.ErrStoreFailed)))
	msg := err.Error()
	if gateway.Code(err) != gateway.CodeUnavailable || strings.Contains(msg, "nothing was changed") ||
		!strings.Contains(msg, "unknown") || !strings.Contains(msg, "changesSince") {
		t.Errorf("a write of unknown outcome is answered %s: %q; want unavailable, saying its outcome is unknown and how to check",
			gateway.Code(err), msg)
	}
}
