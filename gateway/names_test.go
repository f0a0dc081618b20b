package gateway_test

// A name a caller looks something up by (a run id, a label) is held to
// the rule of the names stored, so one that no stored thing could have is
// refused as the caller's mistake, alike on every store, rather than
// looked up: PostgreSQL's text holds no NUL, so the lookup failed there
// as the store's fault.

import (
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
)

// onEveryStore runs test on a gateway on SQLite and on one on PostgreSQL
// (skipped when no server is reachable).
func onEveryStore(t *testing.T, test func(t *testing.T, g *gateway.Gateway)) {
	t.Run("sqlite", func(t *testing.T) {
		g, _ := newGateway(t)
		test(t, g)
	})
	t.Run("postgres", func(t *testing.T) {
		test(t, gatewaytest.Open(t, gatewaytest.Options{Schema: pgtest.FreshSchema(t)}).Gateway)
	})
}

func TestARunIDNoRunCouldHaveIsRefusedNamingRunID(t *testing.T) {
	onEveryStore(t, func(t *testing.T, g *gateway.Gateway) {
		for _, id := range []string{"run-a\x00b", "run-a\nb", "run-" + strings.Repeat("r", 600)} {
			_, err := g.EndRun(ctx, caller(t, g, person, ""), gateway.RunEndInput{RunID: id, Outcome: "completed"})
			if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "runId") {
				t.Errorf("run_end of run %.20q: %v (%s), want it refused as invalid, naming runId", id, err, gateway.Code(err))
			}
		}
	})
}

func TestALabelNoSessionCouldHaveIsRefusedNamingLabel(t *testing.T) {
	onEveryStore(t, func(t *testing.T, g *gateway.Gateway) {
		zero := 0
		for _, label := range []string{"a\x00b", "a\nb", strings.Repeat("l", gateway.MaxLabelBytes+1)} {
			_, err := g.Send(ctx, caller(t, g, person, ""), gateway.SendInput{Label: label, AgentID: "main",
				Message: "hello", TimeoutSeconds: &zero})
			if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(err.Error(), "label") {
				t.Errorf("sessions_send to label %.20q: %v (%s), want it refused as invalid, naming label", label, err, gateway.Code(err))
			}
		}
	})
}
