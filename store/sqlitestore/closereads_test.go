package sqlitestore_test

import (
	"path/filepath"
	"sync"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Close while reads run lets them finish or fail, never crash: the
// statements it finalizes are no longer in use.
func TestCloseWhileReadsRunLetsThemEnd(t *testing.T) {
	ref := vigil.MustRef("agent:main:subagent:a")
	for round := range 20 {
		s, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
		if err != nil {
			t.Fatal(err)
		}
		var started, done sync.WaitGroup
		for range 8 {
			started.Add(1)
			done.Go(func() {
				started.Done()
				for i := 0; ; i++ {
					var err error
					if i%2 == 0 {
						_, err = s.History(t.Context(), ref, 0, 10)
					} else {
						_, err = s.Versions(t.Context(), []vigil.SessionRef{ref})
					}
					if err != nil {
						return // closed: the reads end
					}
				}
			})
		}
		started.Wait()
		if err := s.Close(); err != nil {
			t.Fatalf("round %d: Close: %v", round, err)
		}
		done.Wait()
	}
}
