package pgstore_test

import (
	"testing"

	"github.com/vigilhq/vigil/sessions/sessionstest"
)

// Without a server openFresh skips each behaviour (fails it under CI=true),
// through pgtest.
func TestSessionsConformance(t *testing.T) {
	sessionstest.Run(t, func(t *testing.T) sessionstest.Backend { return openFresh(t) })
}
