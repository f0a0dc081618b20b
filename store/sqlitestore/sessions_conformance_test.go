package sqlitestore_test

import (
	"path/filepath"
	"testing"

	"github.com/vigilhq/vigil/sessions/sessionstest"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

func TestSessionsConformance(t *testing.T) {
	for name, opts := range map[string]sqlitestore.Options{
		"DefaultOptions": {},
		"Shared":         {Shared: true}, // every read from the file
	} {
		t.Run(name, func(t *testing.T) {
			sessionstest.Run(t, func(t *testing.T) sessionstest.Backend {
				return open(t, filepath.Join(t.TempDir(), "vigil.db"), opts)
			})
		})
	}
}
