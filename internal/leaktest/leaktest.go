// Package leaktest checks that a package's tests leave no goroutine
// running: every goroutine a test starts, directly or through the code
// under test (a store's checkpointer, a gateway's follower, a server's
// connections), must have ended by the time the package's tests are done.
package leaktest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main is a package's TestMain: it runs m's tests, then the cleanups (of
// what the package's tests share and end only once all have run, such as
// a server started for its examples), and then fails the run, naming
// their stacks, if any goroutine but the test binary's own is left.
// goleak retries for a while before it reports, so a goroutine already on
// its way out is not a leak. No goroutine is exempt: the drivers and
// libraries vigil uses start none that outlive what they were opened for,
// so a process-wide exception would only hide a leak.
func Main(m *testing.M, cleanups ...func()) {
	code := m.Run()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goroutines left running after the tests:\n%v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
