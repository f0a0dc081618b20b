package pgstore_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/store/pgstore"
)

// Migrations tells which migrations a schema has taken, changing nothing;
// Open logs each one it applies, with its version and what it does.
func TestEachMigrationIsLoggedAndMigrationsTellsWhichASchemaHasTaken(t *testing.T) {
	ctx := context.Background()
	schema := freshSchema(t)
	ms, err := pgstore.Migrations(ctx, testURL(), schema)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != pgstore.SchemaVersion {
		t.Fatalf("%d migrations listed, want %d", len(ms), pgstore.SchemaVersion)
	}
	for _, m := range ms {
		if m.AppliedAt != 0 || m.About == "" {
			t.Errorf("on an empty schema: %+v", m)
		}
	}
	var log strings.Builder
	s, err := pgstore.Open(ctx, testURL(), pgstore.Options{Schema: schema, Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for v := 1; v <= pgstore.SchemaVersion; v++ {
		if want := fmt.Sprintf("msg=\"postgres: schema migration applied\" version=%d ", v); !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	if ms, err = pgstore.Migrations(ctx, testURL(), schema); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.AppliedAt == 0 {
			t.Errorf("after Open, migration %d is not taken", m.Version)
		}
	}
}
