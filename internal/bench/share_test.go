package bench

import "testing"

// With several gateways, the calls that drive hands out one after the
// other run at the same time; each gateway's must reach distinct children
// of its own share, as one gateway's do.
func TestCallsInFlightOnOneGatewayGoToDistinctChildrenOfItsShare(t *testing.T) {
	const children, gateways, inFlight = 1000, 4, 64
	for gw := range gateways {
		seen := map[int64]bool{}
		for i := range int64(inFlight) {
			child := shareIndex(i, gateways, gw) % children
			if child%gateways != int64(gw) {
				t.Fatalf("gateway %d, call %d: child %d is another gateway's", gw, i, child)
			}
			if seen[child] {
				t.Fatalf("gateway %d: child %d gets two of %d consecutive calls", gw, child, inFlight)
			}
			seen[child] = true
		}
	}
}
