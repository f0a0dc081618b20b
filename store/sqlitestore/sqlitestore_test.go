package sqlitestore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/internal/crashcopy"
	"github.com/vigilhq/vigil/store/sqlitestore"
	"github.com/vigilhq/vigil/store/storetest"
)

// open opens a store on path and closes it when the test ends.
func open(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s, %+v): %v", path, opts, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func TestConformance(t *testing.T) {
	for name, opts := range map[string]sqlitestore.Options{
		"DefaultOptions":     {},
		"Synchronous=NORMAL": {Synchronous: "NORMAL"},
		"Shared":             {Shared: true}, // every read from the file
	} {
		t.Run(name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) vigil.Store {
				return open(t, filepath.Join(t.TempDir(), "vigil.db"), opts)
			})
		})
	}
}

// The concurrency half of the contract, on a store held alone: its
// writers wait for one another in BeginWrite. With its memory of the file
// on (the default) and off.
func TestConcurrency(t *testing.T) {
	for name, memory := range map[string]bool{"Memory": true, "NoMemory": false} {
		t.Run(name, func(t *testing.T) {
			storetest.RunConcurrency(t, storetest.Concurrency{
				Open: func(t *testing.T) func() vigil.Store {
					s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
					if !memory {
						sqlitestore.TurnOffMemory(s)
					}
					return func() vigil.Store { return s }
				},
				Waiting: func(t *testing.T, s vigil.Store) func() {
					st := s.(*sqlitestore.Store)
					before := sqlitestore.WritersWaited(st)
					return func() {
						storetest.AwaitTrue(t, "a writer to wait for the write connection", func() bool {
							return sqlitestore.WritersWaited(st) > before
						})
					}
				},
			})
		})
	}
}

func queryInt(t *testing.T, s *sqlitestore.Store, q string) int64 {
	t.Helper()
	var v int64
	if err := sqlitestore.DB(t, s).QueryRowContext(t.Context(), q).Scan(&v); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return v
}

var alphaMain = vigil.SessionRef{AgentID: "alpha", Key: "agent:alpha:main"}

func TestMigrationsAreVersionedAndReopeningKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	ctx := t.Context()
	s, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// One row per applied migration, numbered 1..SchemaVersion.
	n := queryInt(t, s, `SELECT count(*) FROM schema_migrations`)
	top := queryInt(t, s, `SELECT max(version) FROM schema_migrations`)
	if n != int64(sqlitestore.SchemaVersion) || top != int64(sqlitestore.SchemaVersion) {
		t.Errorf("schema_migrations has %d rows up to version %d, want %d up to %d", n, top, sqlitestore.SchemaVersion, sqlitestore.SchemaVersion)
	}
	seq := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "k"))
	c := vigil.Cursor{Watcher: "agent:beta:main", Target: alphaMain, LastSeen: 0, Notified: seq, Material: seq, UpdatedAt: 42}
	tx, err := s.BeginWrite(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.PutCursor(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A dropped duplicate as the last thing before closing uses up seq+1.
	if ok, err := tx.Append(ctx, storetest.GoalEvent(alphaMain, "k")); err != nil || ok {
		t.Fatalf("Append duplicate = %v, %v; want false, nil", ok, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, path, sqlitestore.Options{})
	if n := queryInt(t, s, `SELECT count(*) FROM schema_migrations`); n != int64(sqlitestore.SchemaVersion) {
		t.Errorf("after reopening, schema_migrations has %d rows, want %d (no migration re-run)", n, sqlitestore.SchemaVersion)
	}
	h, err := s.History(ctx, alphaMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 || h.Events[0].Sequence != seq || h.Head != seq {
		t.Errorf("after reopening, History = %+v, want the one event %d", h, seq)
	}
	if got, ok, err := s.Cursor(ctx, c.Watcher, c.Target); err != nil || !ok || got != c {
		t.Errorf("after reopening, Cursor = %+v, %v, %v; want %+v", got, ok, err, c)
	}
	if next := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "")); next <= seq+1 {
		t.Errorf("after reopening, the next sequence is %d; %d was used up by a dropped duplicate", next, seq+1)
	}
}

func TestNewerSchemaVersionIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	newer := sqlitestore.SchemaVersion + 1
	if _, err := sqlitestore.DB(t, s).ExecContext(t.Context(), `INSERT INTO schema_migrations (version, applied_at) VALUES (?, 0)`, newer); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err == nil {
		s.Close()
		t.Fatalf("Open of a database at schema version %d succeeded; this build knows %d", newer, sqlitestore.SchemaVersion)
	}
	msg := err.Error()
	for _, want := range []string{"newer", fmt.Sprint(newer), fmt.Sprint(sqlitestore.SchemaVersion), path} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not mention %q", msg, want)
		}
	}
}

func TestSynchronousOtherThanFullOrNormalIsRefused(t *testing.T) {
	for _, v := range []string{"OFF", "EXTRA", "bogus", "0"} {
		path := filepath.Join(t.TempDir(), "vigil.db")
		s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{Synchronous: v})
		if err == nil {
			s.Close()
			t.Errorf("Open with Synchronous %q succeeded, want an error", v)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", v)) {
			t.Errorf("Open with Synchronous %q: error %q does not name the value", v, err)
		}
	}
}

func TestSynchronousDefaultsToFull(t *testing.T) {
	// PRAGMA synchronous: 1 is NORMAL, 2 is FULL.
	for _, tc := range []struct {
		opt  string
		want int64
	}{{"", 2}, {"FULL", 2}, {"NORMAL", 1}} {
		s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{Synchronous: tc.opt})
		if got := queryInt(t, s, `PRAGMA synchronous`); got != tc.want {
			t.Errorf("Synchronous %q: PRAGMA synchronous = %d, want %d", tc.opt, got, tc.want)
		}
	}
}

func TestJournalModeIsWAL(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{})
	var mode string
	if err := sqlitestore.DB(t, s).QueryRowContext(t.Context(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if !strings.EqualFold(mode, "wal") {
		t.Errorf("journal_mode = %q, want wal", mode)
	}
}

func TestANewDatabaseAndItsWALAreReadableByTheirOwnerOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s := open(t, path, sqlitestore.Options{})
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "k"))
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode&0o077 != 0 {
			t.Errorf("%s has mode %v: others may read it", filepath.Base(p), mode)
		}
	}
}

func TestADatabaseFileThatExistsKeepsItsMode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	if err := os.WriteFile(path, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o640); err != nil { // past the umask
		t.Fatal(err)
	}
	open(t, path, sqlitestore.Options{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o640 {
		t.Errorf("mode %v, want 0640 as it was", mode)
	}
}

// Two stores on one file stand for two processes: their writes are
// serialised and never share a sequence.
func TestWritersOnOneFileAreSerialised(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	stores := []*sqlitestore.Store{open(t, path, sqlitestore.Options{Shared: true}), open(t, path, sqlitestore.Options{Shared: true})}
	const perStore = 40
	var wg sync.WaitGroup
	seqs := make([][]int64, len(stores))
	errs := make([]error, len(stores))
	for i, s := range stores {
		wg.Go(func() {
			ctx := context.Background()
			for j := range perStore {
				err := func() error {
					tx, err := s.BeginWrite(ctx)
					if err != nil {
						return err
					}
					defer tx.Rollback()
					e := storetest.GoalEvent(alphaMain, fmt.Sprintf("s%d-%d", i, j))
					if _, err := tx.Append(ctx, e); err != nil {
						return err
					}
					seqs[i] = append(seqs[i], e.Sequence)
					return tx.Commit()
				}()
				if err != nil {
					errs[i] = fmt.Errorf("store %d, write %d: %w", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[int64]bool{}
	for _, ss := range seqs {
		for _, q := range ss {
			if seen[q] {
				t.Errorf("sequence %d handed out twice", q)
			}
			seen[q] = true
		}
	}
	h, err := stores[0].History(t.Context(), alphaMain, 0, 10*perStore)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != len(stores)*perStore {
		t.Errorf("History has %d events, want %d", len(h.Events), len(stores)*perStore)
	}
}

// History reads bounds and events in one compound statement; an event
// whose text holds control characters (written by hand, since recording
// refuses them) comes back exactly, in order, with the right bounds.
func TestHistoryReadsEventsWrittenByHand(t *testing.T) {
	s := open(t, filepath.Join(t.TempDir(), "vigil.db"), sqlitestore.Options{})
	first := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	odd := "a\x1fb\x1ec"
	if _, err := sqlitestore.DB(t, s).ExecContext(t.Context(), `INSERT INTO events (sequence, agent_id, session_key,
		recorded_at, body) VALUES (?, ?, ?, 1, ?)`, first+1, alphaMain.AgentID, alphaMain.Key,
		sqlitestore.HandBody(odd, `{"x":"`+odd+`"}`)); err != nil {
		t.Fatal(err)
	}
	last := storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	h, err := s.History(t.Context(), alphaMain, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 3 || h.Events[0].Sequence != first || h.Events[1].Sequence != first+1 || h.Events[2].Sequence != last {
		t.Fatalf("History = %+v, want events %d, %d, %d", h.Events, first, first+1, last)
	}
	if got := h.Events[1]; got.Summary != odd || string(got.Payload) != `{"x":"`+odd+`"}` {
		t.Errorf("event with separators read back as summary %q, payload %q", got.Summary, got.Payload)
	}
	if h.Head != last || h.EarliestRetained != first {
		t.Errorf("History bounds: head %d, earliest %d; want %d, %d", h.Head, h.EarliestRetained, last, first)
	}
	h, err = s.History(t.Context(), alphaMain, first+1, 10)
	if err != nil || len(h.Events) != 1 || h.Events[0].Sequence != last || h.Events[0].Summary != "goal updated" {
		t.Fatalf("History after %d = %+v, %v; want the one event %d", first+1, h.Events, err, last)
	}
}

func openErr(t *testing.T, path string, opts sqlitestore.Options) error {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, opts)
	if err == nil {
		s.Close()
	}
	return err
}

// A store without Shared keeps its file to itself: no other store opens
// it, shared or not, and the refusal says what to do.
func TestExclusiveStoreRefusesEveryOtherOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	open(t, path, sqlitestore.Options{})
	for _, opts := range []sqlitestore.Options{{}, {Shared: true}} {
		err := openErr(t, path, opts)
		if !errors.Is(err, sqlitestore.ErrInUse) || !strings.Contains(err.Error(), "one vigil process at a time") {
			t.Errorf("second Open(%+v) = %v, want ErrInUse saying a file serves one process", opts, err)
		}
	}
}

// Shared stores open the same file together, and keep an exclusive one
// out while any of them is open.
func TestSharedStoresOpenTogetherAndKeepAnExclusiveOneOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	open(t, path, sqlitestore.Options{Shared: true})
	open(t, path, sqlitestore.Options{Shared: true})
	if err := openErr(t, path, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrInUse) {
		t.Errorf("exclusive Open beside shared stores = %v, want ErrInUse", err)
	}
}

// Closing gives the file back: the next store opens it.
func TestClosingAnExclusiveStoreReleasesTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	open(t, path, sqlitestore.Options{})
}

// Two paths to one database, one through a symbolic link, meet at one
// lock.
func TestALinkToAnExclusiveStoresFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	open(t, path, sqlitestore.Options{})
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := openErr(t, link, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrInUse) {
		t.Errorf("Open through a link = %v, want ErrInUse", err)
	}
}

// A link that names a database not made yet leads to the same lock as
// the file it names, once the first store through it has made the file.
func TestALinkToAFileNotYetMadeMeetsTheFilesLock(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	open(t, link, sqlitestore.Options{})
	if err := openErr(t, path, sqlitestore.Options{}); !errors.Is(err, sqlitestore.ErrInUse) {
		t.Errorf("Open of the file a store made through a link = %v, want ErrInUse", err)
	}
}

// A database made through a link that names no file yet is its owner's
// alone, as one made at its own path is.
func TestADatabaseMadeThroughALinkIsReadableByItsOwnerOnly(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	link := filepath.Join(dir, "link.db")
	if err := os.Symlink(path, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	open(t, link, sqlitestore.Options{})
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode&0o077 != 0 {
		t.Errorf("the database made through a link has mode %v: others may read it", mode)
	}
}

// An open waits a moment for a holder on its way out, as a restart's new
// process meets the old one exiting. In a synctest bubble the open's
// retries wait on the bubble's clock, so once every goroutine is blocked
// the open is known to have found the lock held and to be waiting: the
// holder closes only then, and the open's patience passes on no real
// clock. The directory is made outside, as its cleanup outlives the
// bubble.
func TestAnOpenWaitsForAHolderThatIsClosing(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vigil.db")
	synctest.Test(t, func(t *testing.T) {
		first, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		opened := make(chan error, 1)
		go func() {
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
			if err == nil {
				err = s.Close()
			}
			opened <- err
		}()
		synctest.Wait()
		if err := first.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-opened; err != nil {
			t.Fatalf("the open that waited for the holder: %v", err)
		}
	})
}

// Each combination of an event's optional fields comes back as given, an
// empty dedupe key is stored as NULL (so the unique index leaves it out),
// and a dedupe key still finds the earlier event.
func TestEveryCombinationOfOptionalFieldsIsStoredAsGiven(t *testing.T) {
	ctx := t.Context()
	s := open(t, filepath.Join(t.TempDir(), "v.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	event := func(set int) vigil.Event {
		e := vigil.Event{AgentID: "a", SessionKey: "agent:a:main", Kind: vigil.KindGoalChanged,
			ActorType: vigil.ActorAgent, OccurredAt: 5, RecordedAt: 6, Summary: fmt.Sprint("combination ", set)}
		for bit, field := range []*string{&e.SessionID, &e.ActorID, &e.RunID, &e.DedupeKey} {
			if set&(1<<bit) != 0 {
				*field = fmt.Sprintf("%d-%d", bit, set)
			}
		}
		if set%3 == 0 {
			e.Payload = []byte(`{"set":true}`)
		}
		return e
	}
	var want []vigil.Event
	first := map[int]int64{} // combination -> its event's sequence
	for round := range 2 {
		tx, err := s.BeginWrite(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for set := range 16 {
			e := event(set)
			appended, err := tx.Append(ctx, &e)
			if err != nil {
				t.Fatalf("combination %d: %v", set, err)
			}
			if again := round == 1 && e.DedupeKey != ""; appended == again {
				t.Fatalf("round %d, combination %d: appended = %v", round, set, appended)
			} else if again && e.Sequence != first[set] {
				t.Fatalf("combination %d again: got event %d, want the earlier %d", set, e.Sequence, first[set])
			}
			if appended {
				want = append(want, e)
				first[set] = e.Sequence
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	page, err := s.Log(ctx, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(page.Events, want) {
		t.Fatalf("log = %+v\nwant %+v", page.Events, want)
	}
	var empty int
	if err := sqlitestore.DB(t, s).QueryRowContext(ctx, `SELECT count(*) FROM events WHERE dedupe_key = ''`).
		Scan(&empty); err != nil || empty != 0 {
		t.Fatalf("events with an empty dedupe key stored = %d (%v), want 0: empty means NULL", empty, err)
	}
}

// A SQLite file of another program, named by mistake, is refused with an
// error saying so, and is left as it was: none of vigil's tables are
// added to it.
func TestAnotherProgramsDatabaseIsRefusedAndLeftAsItWas(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.db")
	other := sqlitestore.OpenRaw(t, path)
	if _, err := other.ExecContext(t.Context(), `CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)`); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open of another program's database succeeded")
	}
	if msg := err.Error(); !strings.Contains(msg, "not a vigil database") || !strings.Contains(msg, path) {
		t.Errorf("error %q does not say %s is not a vigil database", msg, path)
	}
	var tables []string
	rows, err := other.QueryContext(t.Context(), `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if !reflect.DeepEqual(tables, []string{"notes"}) {
		t.Errorf("the file's tables after the refused open: %v, want [notes]", tables)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, before) {
		t.Errorf("the file changed under the refused open (%v)", err)
	}
}

// Restore puts a backup in the place of a database that a crash left with
// its write-ahead log beside it. The log belongs to the database it
// replaces: left there, the next open would apply its pages to the copy
// and damage it.
func TestARestoreOverADatabaseACrashLeftWithItsLogGivesTheBackup(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	s := open(t, live, sqlitestore.Options{})
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, "kept"))
	backup := filepath.Join(dir, "backup.db")
	if err := sqlitestore.Backup(t.Context(), live, backup); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	}
	crashed := filepath.Join(dir, "crashed.db")
	if err := crashcopy.Copy(live, crashed); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(crashed + "-wal"); err != nil || fi.Size() == 0 {
		t.Fatalf("the crash left no log beside the database (%v)", err)
	}

	if err := sqlitestore.Restore(t.Context(), backup, crashed); err != nil {
		t.Fatal(err)
	}
	r := open(t, crashed, sqlitestore.Options{})
	var check string
	if err := sqlitestore.DB(t, r).QueryRowContext(t.Context(), `PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
		t.Fatalf("the restored database's integrity check: %q, %v", check, err)
	}
	h, err := r.History(t.Context(), alphaMain, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 1 {
		t.Errorf("the restored database has %d events of %v, want the backup's 1", len(h.Events), alphaMain)
	}
}

// Restore refuses a database that a store holds, and leaves it as it was.
func TestARestoreOverADatabaseAStoreHoldsIsRefused(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	s := open(t, live, sqlitestore.Options{})
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	backup := filepath.Join(dir, "backup.db")
	if err := sqlitestore.Backup(t.Context(), live, backup); err != nil {
		t.Fatal(err)
	}
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	if err := sqlitestore.Restore(t.Context(), backup, live); !errors.Is(err, sqlitestore.ErrInUse) {
		t.Fatalf("Restore over a held database: %v, want ErrInUse", err)
	}
	if h, err := s.History(t.Context(), alphaMain, 0, 100); err != nil || len(h.Events) != 2 {
		t.Errorf("after the refused restore: %d events, %v; want 2", len(h.Events), err)
	}
}

// Migrations of another program's SQLite file says it is not a vigil
// database, rather than listing every migration as one to apply.
func TestMigrationsOfAnotherProgramsDatabaseSaysItIsNotVigils(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.db")
	if _, err := sqlitestore.OpenRaw(t, path).ExecContext(t.Context(), `CREATE TABLE notes (id INTEGER PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if ms, err := sqlitestore.Migrations(t.Context(), path); err == nil || !strings.Contains(err.Error(), "not a vigil database") {
		t.Errorf("Migrations of another program's file: %d listed, %v; want an error saying it is not a vigil database", len(ms), err)
	}
}

// Restore also puts a database where there was none.
func TestARestoreMakesTheDatabaseWhereThereWasNone(t *testing.T) {
	dir := t.TempDir()
	live := filepath.Join(dir, "live.db")
	s := open(t, live, sqlitestore.Options{})
	storetest.AppendOne(t, s, storetest.GoalEvent(alphaMain, ""))
	backup := filepath.Join(dir, "backup.db")
	if err := sqlitestore.Backup(t.Context(), live, backup); err != nil {
		t.Fatal(err)
	}
	fresh := filepath.Join(dir, "fresh.db")
	if err := sqlitestore.Restore(t.Context(), backup, fresh); err != nil {
		t.Fatal(err)
	}
	r := open(t, fresh, sqlitestore.Options{})
	if h, err := r.History(t.Context(), alphaMain, 0, 100); err != nil || len(h.Events) != 1 {
		t.Errorf("the restored database: %d events, %v; want the backup's 1", len(h.Events), err)
	}
}

// Reading the schema of a database in WAL mode in a folder its reader may
// not write fails, as SQLite cannot make the files it reads with, and the
// error names the folder. Root writes any folder, so the test needs
// another user.
func TestMigrationsInAReadOnlyFolderNamesTheFolder(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root may write any folder: run as another user to test a read-only one")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "vigil.db")
	open(t, path, sqlitestore.Options{}).Close()
	if err := os.Chmod(dir, 0o500); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Chmod(dir, 0o700) })
	_, err := sqlitestore.Migrations(t.Context(), path)
	if err == nil || !strings.Contains(err.Error(), "in the folder "+dir) {
		t.Errorf("Migrations in a read-only folder: %v, want an error naming the folder %s", err, dir)
	}
}
