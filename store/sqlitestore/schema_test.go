package sqlitestore

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/storetest"
)

// Opening a database of an older build logs each migration it applies,
// with its version and what it does; Migrations tells, without a lock or a
// change, which ones the file has taken.
func TestEachMigrationIsLoggedAndMigrationsTellsWhichAFileHasTaken(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "vigil.db")
	openAtVersion(t, path, 6).Close()
	ms, err := Migrations(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != SchemaVersion {
		t.Fatalf("%d migrations listed, want %d", len(ms), SchemaVersion)
	}
	for _, m := range ms {
		if taken := m.AppliedAt != 0; taken != (m.Version <= 6) || m.About == "" {
			t.Errorf("at version 6: %+v", m)
		}
	}

	var log strings.Builder
	s, err := Open(ctx, path, Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for v := 7; v <= SchemaVersion; v++ {
		want := fmt.Sprintf("msg=\"sqlite: schema migration applied\" version=%d ", v)
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "version=6 ") {
		t.Errorf("a migration the file had was logged as applied:\n%s", log.String())
	}
	// Read while the store holds the file.
	if ms, err = Migrations(ctx, path); err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.AppliedAt == 0 {
			t.Errorf("after Open, migration %d is not taken", m.Version)
		}
	}
}

// Backup copies the database of a running store, while it holds the file,
// into a file that another store opens with everything committed.
func TestABackupOfARunningStoreHoldsEverythingCommitted(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ref := vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}
	for range 3 {
		storetest.AppendOne(t, s, storetest.GoalEvent(ref, ""))
	}
	copyPath := filepath.Join(dir, "backup.db")
	if err := Backup(ctx, path, copyPath); err != nil {
		t.Fatal(err)
	}
	if err := Backup(ctx, path, copyPath); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second backup over the first: %v", err)
	}
	c, err := Open(ctx, copyPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	v, err := c.Versions(ctx, []vigil.SessionRef{ref})
	if err != nil || v[ref] != 3 {
		t.Errorf("the copy's version of %s: %d, %v; want 3", ref.Key, v[ref], err)
	}
}
