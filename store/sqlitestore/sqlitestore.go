// Package sqlitestore is vigil's embedded store: one SQLite file in WAL
// mode, written through a single connection and read through a small pool.
//
// Durability is set by Options.Synchronous. The default, FULL, syncs the
// WAL on every commit, so a record the engine acknowledged survives a crash
// or power loss. NORMAL syncs only at checkpoints: it is faster, and still
// never corrupts the database, but the last commits before a power loss
// (not a process crash) may be lost.
//
// The driver is github.com/mattn/go-sqlite3, which builds SQLite's C
// source with cgo (a C compiler is needed to build vigil). With the pure Go
// drivers every record cost more time, and they built no faster;
// recording speed is what this store is for. docs/architecture.md records
// the measurements.
package sqlitestore

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/store/internal/cursornames"
)

// Options configure a Store.
type Options struct {
	// Synchronous is SQLite's synchronous setting for the writer: "FULL"
	// (the default) or "NORMAL".
	Synchronous string
	// BusyTimeout is how long a connection waits for a lock held by
	// another process; 0 means 5 s.
	BusyTimeout time.Duration
	// ReadConns is the size of the reader pool; 0 means 4.
	ReadConns int
	// Shared lets several processes open the file at once, each with
	// Shared set; every read then goes to the file. Without it the store
	// keeps the file to itself: Open takes a lock (flock on the database
	// file, so every name of the file meets at it) that makes any other
	// store's Open of the same file fail with ErrInUse until this one
	// closes or its process dies,
	// repeated reads of a session's recent history are answered from
	// memory, cursor moves are held in memory for a while (see
	// Tx.MoveCursors), and the cursor rows of targets lately recorded on
	// are kept in memory.
	Shared bool
	// Logger receives the failures no caller is there to be told of: the
	// background checkpoints' (rate-limited); nil discards them.
	Logger *slog.Logger
}

// readCacheKiB is each reader's page cache. SQLite's default (2 MiB) holds
// a fraction of the pages a busy store's deltas touch (docs/performance.md,
// "What the stores do for speed"), and a page read from the file costs a
// system call.
const readCacheKiB = 8192

// Store is a vigil.Store on one SQLite file.
type Store struct {
	write *sql.DB // exactly one connection
	read  *sql.DB
	ckpt  *checkpointer
	lock  *fileLock
	log   *slog.Logger
	// exclusive is set when the store holds its file alone.
	exclusive bool
	// The mirrors of the file's state (memory.go), off for a shared
	// store: another process's commits would not reach them.
	recent   *recentEvents
	moves    *heldMoves
	watchers *watcherRows
	rows     *sessionRows
	last     *lastSequence
	// index paces writes of the session and transcript indexes (see
	// index.go); tail knows what the session index lacks, and mtail what
	// the transcript's lacks.
	index *indexLag
	tail  *unindexedTail
	mtail *unindexedTail
	// scanTail is set when reads must look above the index's mark: the
	// store lets the index lag. Otherwise every write brings the index up
	// to date before it commits.
	scanTail atomic.Bool
	// owesReplay is set when the file, as the store opened it, had
	// events whose cursor moves it does not say are written (a crash lost
	// them), until the engine has applied them again (Tx.MovesReplayed).
	// Meanwhile no write records moves as written past where the file
	// said they end, so that a store closed before the replay (vigil db
	// migrate, a start that failed) leaves them to the next one.
	owesReplay atomic.Bool

	// spare holds the last write transaction's buffers for the next one;
	// the write connection passes from one write to the next, and with
	// it the right to use them.
	spare txBuffers

	conns  sync.Map // *sqlite3.SQLiteConn -> *connState
	closed atomic.Bool
	// shut is set once Close no longer writes: a write transaction left
	// open past it starts no statement more.
	shut atomic.Bool
	// writeMu guards the state of the writer connection. writeEnded is
	// made when a write transaction takes the connection and closed when
	// it hands it back; writerConn is that transaction's driver
	// connection. orphaned is set when shutDown ran while a write held
	// the connection: the write's end then finalizes its statements and
	// closes it, the synced file and the lock (handBack).
	writeMu    sync.Mutex
	writeEnded chan struct{}
	writerConn any
	orphaned   bool
	// readsMu is held shared by every read on a reader connection and
	// whole by Close while it finalizes their statements: a statement
	// finalized under a running read crashed the process.
	readsMu sync.RWMutex
	// maintenance holds a token while the maintenance lock is held
	// (LockMaintenance).
	maintenance chan struct{}
}

var _ vigil.Store = (*Store)(nil)

// connector opens driver connections with a hook, so settings that the DSN
// cannot carry apply to every connection the pool ever opens.
type connector struct {
	drv *sqlite3.SQLiteDriver
	dsn string
}

func (c connector) Connect(context.Context) (driver.Conn, error) { return c.drv.Open(c.dsn) }
func (c connector) Driver() driver.Driver                        { return c.drv }

func openDB(dsn string, hook func(*sqlite3.SQLiteConn) error) *sql.DB {
	return sql.OpenDB(connector{drv: &sqlite3.SQLiteDriver{ConnectHook: hook}, dsn: dsn})
}

// Open opens (creating if needed) the database at path and brings its
// schema up to date.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "FULL", "NORMAL":
	default:
		return nil, fmt.Errorf("open %s: synchronous must be FULL or NORMAL, got %q", path, opts.Synchronous)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.ReadConns <= 0 {
		opts.ReadConns = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	// A new database is the owner's alone, as its backups are; a file
	// that exists keeps the mode it has. The lock is on the file, so it
	// is made first: two processes may both try, and one makes it.
	if err := newOwnerOnlyFile(followLinks(path)); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("open %s: create the database file: %w", path, err)
	}
	lock, err := acquireLock(path, !opts.Shared)
	if err != nil {
		if errors.Is(err, ErrInUse) {
			return nil, fmt.Errorf("open %s: %w: a SQLite file serves one vigil process at a time, so stop the other one or reach it through its gateway", path, err)
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	exclusive := !opts.Shared && lock != nil
	s, err := open(ctx, path, syncMode, exclusive, opts)
	if err != nil {
		lock.release()
		return nil, err
	}
	s.lock, s.exclusive = lock, exclusive
	s.scanTail.Store(exclusive)
	s.recent = newRecentEvents(recentMaxBytes, recentPerEntry, recentMaxVersions)
	s.moves = newHeldMoves()
	s.watchers = newWatcherRows()
	s.rows = newSessionRows()
	s.last = &lastSequence{}
	s.index = newIndexLag()
	s.tail = newUnindexedTail(func(t *Tx) []tailEntry { return t.unindexed })
	s.mtail = newUnindexedTail(func(t *Tx) []tailEntry { return t.unindexedMessages })
	if !exclusive {
		s.turnOff()
	}
	// What a crash of an exclusive store left above the index's mark gets
	// its entries: a shared store's reads count on there being none.
	if err := s.writeHeld(ctx, false); err != nil {
		// Not Close: it would write what memory holds, which is nothing
		// yet.
		s.shutDown()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.readReplayOwed(ctx); err != nil {
		s.shutDown()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

func open(ctx context.Context, path, syncMode string, exclusive bool, opts Options) (*Store, error) {
	dsn := func(extra ...string) string {
		q := url.Values{}
		q.Add("_busy_timeout", fmt.Sprint(opts.BusyTimeout.Milliseconds()))
		q.Add("_journal_mode", "WAL")
		for _, p := range extra {
			k, v, _ := strings.Cut(p, "=")
			q.Add(k, v)
		}
		return "file:" + path + "?" + q.Encode()
	}
	// Before the writer, whose first connection turns the file's journal
	// to WAL, so that a file refused here is left as it was.
	if err := checkVigils(ctx, "file:"+path+"?"+url.Values{
		"_busy_timeout": {fmt.Sprint(opts.BusyTimeout.Milliseconds())}, "_query_only": {"1"}}.Encode()); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	write := openDB(dsn("_synchronous="+syncMode, "_txlock=immediate"), func(c *sqlite3.SQLiteConn) error {
		_, err := c.Exec(fmt.Sprintf(`PRAGMA wal_autocheckpoint = %d; PRAGMA journal_size_limit = %d`,
			writerAutoCheckpoint, walSizeLimit), nil)
		return err
	})
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	if err := write.PingContext(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := migrate(ctx, write, func() int64 { return time.Now().UnixMilli() }, opts.Logger); err != nil {
		write.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// A reader connection serves one read at a time, and its statements
	// watch no context, so nothing calls into it from another thread:
	// SQLite's connection mutex, taken on every call for every column of
	// every row, is left out.
	read := openDB(dsn("_query_only=1", "_mutex=no", fmt.Sprintf("_cache_size=-%d", readCacheKiB)), nil)
	read.SetMaxOpenConns(opts.ReadConns)
	read.SetMaxIdleConns(opts.ReadConns)
	// A checkpoint syncs the log and the database file as its connection's
	// synchronous setting says, so the checkpointer shares the writer's:
	// the log may be reused only once what it held is durable in the file.
	ckpt := openDB(dsn("_synchronous="+syncMode), nil)
	ckpt.SetMaxOpenConns(1)
	file, err := openSyncFile(path, exclusive)
	if err != nil {
		err = errors.Join(err, ckpt.Close(), read.Close(), write.Close())
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return &Store{write: write, read: read, ckpt: startCheckpointer(ckpt, opts.BusyTimeout, file, opts.Logger), log: opts.Logger,
		maintenance: make(chan struct{}, 1)}, nil
}

// readRetries bounds how often a cursor read starts again (readCursors).
const readRetries = 100

// closeWriteWait bounds how long Close waits for the writer connection to
// write the held cursor moves.
const closeWriteWait = 5 * time.Second

// Close writes the cursor moves held in memory and the session index, and
// closes the store. Should that write fail, the engine replays the moves
// at the next Open, which also brings the index up to date.
//
// Close waits up to closeWriteWait for a write transaction holding the
// writer connection. One still running then is left alone: a statement it
// has under way runs to its end, later ones fail, and its Commit or
// Rollback closes the connection and only then lets go of the file and
// its lock, so no other process opens the file while this one may still
// write it. Close then says a write was still running (errWriteRunning).
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	// Bounded: a write connection someone never handed back must not hold
	// Close forever.
	ctx, cancel := context.WithTimeout(context.Background(), closeWriteWait)
	defer cancel()
	var err error
	if s.exclusive {
		err = s.writeHeld(ctx, true)
	}
	s.writeMu.Lock()
	ended := s.writeEnded
	s.writeMu.Unlock()
	if ended != nil {
		select {
		case <-ended:
		case <-ctx.Done():
		}
	}
	return errors.Join(err, s.shutDown())
}

// shutDown closes the store without writing anything more. A write
// transaction still holding the writer connection keeps it, with its
// statements, the synced file and the lock, until it ends (handBack).
func (s *Store) shutDown() error {
	s.closed.Store(true)
	s.shut.Store(true)
	s.turnOff() // reads after Close fail, as the file's do
	err := s.ckpt.close()
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	running := s.writeEnded != nil
	// Finalize the kept statements first: a connection with live
	// statements cannot close. Reads still running finish first, and later
	// ones find the store shut; a running write's are its own.
	s.readsMu.Lock()
	s.conns.Range(func(k, v any) bool {
		if running && k == s.writerConn {
			return true
		}
		v.(*connState).close()
		s.conns.Delete(k)
		return true
	})
	s.readsMu.Unlock()
	// The writer pool closes its connection when the write hands it back.
	err = errors.Join(err, s.read.Close(), s.write.Close())
	if running {
		s.orphaned = true
		return errors.Join(err, errWriteRunning)
	}
	err = errors.Join(err, s.ckpt.closeFile(), s.lock.release())
	s.lock = nil
	return err
}

// takeWriter records that a write transaction holds the writer
// connection sc, unless the store is shut.
func (s *Store) takeWriter(sc *sql.Conn) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	if s.shut.Load() {
		sc.Close()
		return failed(errClosed)
	}
	sc.Raw(func(dc any) error {
		s.writerConn = dc
		return nil
	})
	s.writeEnded = make(chan struct{})
	return nil
}

// handBack returns the writer connection sc, taken by takeWriter. If the
// store was shut meanwhile, it finalizes the connection's statements and
// closes it, and then the synced file and the lock, which shutDown left:
// closing the file drops every lock this process holds on it, SQLite's
// included, and the lock kept other processes away while this write could
// still change the file.
func (s *Store) handBack(sc *sql.Conn) {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	close(s.writeEnded)
	s.writeEnded, s.writerConn = nil, nil
	if !s.orphaned {
		sc.Close()
		return
	}
	s.orphaned = false
	sc.Raw(func(dc any) error {
		if cs, ok := s.conns.LoadAndDelete(dc); ok {
			cs.(*connState).close()
		}
		return nil
	})
	err := errors.Join(sc.Close(), s.ckpt.closeFile(), s.lock.release())
	s.lock = nil
	if err != nil {
		s.log.Error("sqlitestore: releasing the file after a write left open past Close", "err", err)
	}
}

// turnOff turns every mirror off, and reports whether one holds what the
// file lacks.
func (s *Store) turnOff() bool {
	unwritten := false
	for _, m := range s.mirrors() {
		unwritten = m.turnOff() || unwritten
	}
	return unwritten
}

// eventColumns reads an event's row (eventbody.go); eventAt decodes them.
const eventColumns = `sequence, agent_id, session_key, recorded_at, dedupe_key, body`

// eventAt decodes eventColumns starting at column i.
func eventAt(r rowValues, i int) (vigil.Event, error) {
	e := vigil.Event{Sequence: r.int(i), AgentID: r.str(i + 1), SessionKey: r.str(i + 2), RecordedAt: r.int(i + 3),
		DedupeKey: r.str(i + 4)}
	if err := decodeBody(&e, ownedBlob(r, i+5)); err != nil {
		return vigil.Event{}, fmt.Errorf("event %d: %w", e.Sequence, err)
	}
	return e, nil
}

const cursorColumns = `target_agent, target_key, watcher, last_seen, notified, material, updated_at, ambient`

func cursorAt(r rowValues) vigil.Cursor {
	return vigil.Cursor{Target: vigil.SessionRef{AgentID: r.str(0), Key: r.str(1)}, Watcher: r.str(2),
		LastSeen: r.int(3), Notified: r.int(4), Material: r.int(5), UpdatedAt: r.int(6), Ambient: r.int(7) != 0}
}

const (
	byDedupeQuery = `SELECT ` + eventColumns + ` FROM events WHERE agent_id = ? AND session_key = ? AND dedupe_key = ?`
	// The index's mark counts as used: an event below it would have no
	// entry (after events at the top were deleted by hand, say).
	lastSequenceQuery = `SELECT max(coalesce((SELECT max(sequence) FROM events), 0), floor, indexed_through)
		FROM sequence_floor WHERE id = 1`
	raiseFloorQuery = `UPDATE sequence_floor SET floor = max(floor, indexed_through,
		coalesce((SELECT max(sequence) FROM events), 0), ?) WHERE id = 1`
	cursorsOnTargetQuery = `SELECT ` + cursorColumns + ` FROM cursors WHERE target_agent = ? AND target_key = ?`
	cursorQuery          = `SELECT ` + cursorColumns + ` FROM cursors WHERE target_agent = ? AND target_key = ? AND watcher = ?`
	putCursorQuery       = `INSERT INTO cursors (` + cursorColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (target_agent, target_key, watcher) DO UPDATE SET last_seen = excluded.last_seen,
		notified = excluded.notified, material = excluded.material, updated_at = excluded.updated_at,
		ambient = excluded.ambient`
	// A session's version: the larger of its newest event and its head.
	// Versions of many sessions read the index's tail once for all.
	indexedVersionOf = `coalesce((SELECT max(sequence) FROM session_index WHERE session = ` + sessionNumberOf + `), 0),
	coalesce((SELECT head FROM session_heads WHERE agent_id = +?1 AND session_key = +?2), 0)`
	versionQuery        = `SELECT max(coalesce((SELECT max(sequence) FROM ` + tailOfSession + `), 0), ` + indexedVersionOf + `)`
	indexedVersionQuery = `SELECT max(` + indexedVersionOf + `)`
	tailVersionsQuery   = `SELECT agent_id, session_key, max(sequence) FROM events WHERE sequence > ` + indexMarkQuery + `
		GROUP BY agent_id, session_key`
	// The same for the events numbered in ?1 (unindexedTail).
	tailVersionsOfListQuery = `SELECT agent_id, session_key, max(sequence) FROM events
		WHERE sequence IN (SELECT value FROM json_each(?1)) AND sequence > ` + indexMarkQuery + `
		GROUP BY agent_id, session_key`
)

// versionOfListQuery is versionQuery with the tail looked up by the
// numbers in ?3 (unindexedTail).
var versionOfListQuery = `SELECT max(coalesce((SELECT max(sequence) FROM ` + tailOfList("?3") + `), 0), ` + indexedVersionOf + `)`

type scanner interface{ Scan(...any) error }

func scanCursor(r scanner) (vigil.Cursor, error) {
	var c vigil.Cursor
	err := r.Scan(&c.Target.AgentID, &c.Target.Key, &c.Watcher, &c.LastSeen, &c.Notified, &c.Material, &c.UpdatedAt, &c.Ambient)
	return c, err
}

// collectCursors reads cursorColumns rows read through database/sql.
func collectCursors(rows *sql.Rows, err error) ([]vigil.Cursor, error) {
	if err != nil {
		return nil, failed(err)
	}
	defer rows.Close()
	var out []vigil.Cursor
	for rows.Next() {
		c, err := scanCursor(rows)
		if err != nil {
			return nil, failed(err)
		}
		out = append(out, c)
	}
	return out, failed(rows.Err())
}

// queryCursors reads cursorColumns rows, a long list holding each
// session's name once (cursornames).
func (c conn) queryCursors(q string, args ...any) ([]vigil.Cursor, error) {
	var out []vigil.Cursor
	var names cursornames.Shared
	err := c.query(q, args, func(r rowValues) error {
		cur := cursorAt(r)
		names.Share(&cur)
		out = append(out, cur)
		return nil
	})
	return out, err
}

// getCursor reads one cursorColumns row.
func (c conn) getCursor(q string, args ...any) (vigil.Cursor, bool, error) {
	var cur vigil.Cursor
	ok, err := c.queryRow(q, args, func(r rowValues) error {
		cur = cursorAt(r)
		return nil
	})
	return cur, ok, err
}

// reading runs fn on a reader connection.
func (s *Store) reading(ctx context.Context, fn func(c conn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.readsMu.RLock()
	defer s.readsMu.RUnlock()
	if s.shut.Load() {
		return failed(errClosed)
	}
	sc, err := s.read.Conn(ctx)
	if err != nil {
		return failed(err)
	}
	defer sc.Close()
	return fn(conn{s: s, sc: sc})
}

// snapshot runs fn in one read transaction, so its reads agree.
func (s *Store) snapshot(ctx context.Context, fn func(c conn) error) error {
	return s.reading(ctx, func(c conn) error {
		if _, err := c.exec(`BEGIN`); err != nil {
			return err
		}
		err := fn(c)
		if _, cerr := c.exec(`COMMIT`); cerr != nil && err == nil {
			err = cerr
		}
		if c.inTx() {
			// Never hand a connection back to the pool inside a
			// transaction: its stale snapshot would hold back checkpoints.
			c.exec(`ROLLBACK`)
		}
		return err
	})
}

// Versions implements vigil.Reader.
func (s *Store) Versions(ctx context.Context, refs []vigil.SessionRef) (map[vigil.SessionRef]int64, error) {
	out := make(map[vigil.SessionRef]int64, len(refs))
	var rest []vigil.SessionRef
	for _, r := range refs {
		if v, ok := s.recent.version(r); ok {
			out[r] = v
		} else {
			rest = append(rest, r)
		}
	}
	if refs = rest; len(refs) == 0 {
		return out, ctx.Err()
	}
	fills := make([]fillToken, len(refs))
	for i, r := range refs {
		fills[i] = s.recent.beginFill(r)
	}
	err := s.readVersions(ctx, refs, out)
	for i, r := range refs {
		if v, ok := out[r]; ok && err == nil {
			s.recent.fillVersion(fills[i], v)
		} else {
			s.recent.abandon(fills[i])
		}
	}
	return out, err
}

// readVersions reads the versions of refs from the file into out.
func (s *Store) readVersions(ctx context.Context, refs []vigil.SessionRef, out map[vigil.SessionRef]int64) error {
	if !s.scanTail.Load() {
		return s.snapshot(ctx, func(c conn) error { return readIndexedVersions(c, refs, nil, out) })
	}
	// The newest event of each session above the index's mark.
	withTail := func(q string, args ...any) func(c conn) error {
		return func(c conn) error {
			tail := map[vigil.SessionRef]int64{}
			if err := c.query(q, args, func(row rowValues) error {
				tail[vigil.SessionRef{AgentID: row.str(0), Key: row.str(1)}] = row.int(2)
				return nil
			}); err != nil {
				return err
			}
			return readIndexedVersions(c, refs, tail, out)
		}
	}
	return s.readAboveMark(s.tail, refs,
		func(list string) error { return s.snapshot(ctx, withTail(tailVersionsOfListQuery, list)) },
		func() error { return s.snapshot(ctx, withTail(tailVersionsQuery)) })
}

// readIndexedVersions reads the versions of refs from the index, raised to
// their events above the mark in tail.
func readIndexedVersions(c conn, refs []vigil.SessionRef, tail, out map[vigil.SessionRef]int64) error {
	for _, r := range refs {
		if _, err := c.queryRow(indexedVersionQuery, []any{r.AgentID, r.Key}, func(row rowValues) error {
			out[r] = max(row.int(0), tail[r])
			return nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// History implements vigil.Reader.
func (s *Store) History(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	if err := ctx.Err(); err != nil {
		return vigil.History{}, err
	}
	if h, ok := s.recent.history(ref, after, limit); ok {
		return h, nil
	}
	t := s.recent.beginFill(ref)
	h, err := s.readHistory(ctx, ref, after, limit)
	if err != nil {
		s.recent.abandon(t)
		return h, err
	}
	s.recent.fill(t, after, limit, h)
	return h, nil
}

// readHistory reads a session's history from the file.
func (s *Store) readHistory(ctx context.Context, ref vigil.SessionRef, after int64, limit int) (vigil.History, error) {
	args := []any{ref.AgentID, ref.Key, after, limit}
	if !s.scanTail.Load() {
		return s.queryHistory(ctx, ref, limit, historyIndexedQuery, args)
	}
	var h vigil.History
	err := s.readAboveMark(s.tail, []vigil.SessionRef{ref},
		func(list string) (err error) {
			h, err = s.queryHistory(ctx, ref, limit, historyOfListQuery, append(args, list))
			return err
		},
		func() (err error) {
			h, err = s.queryHistory(ctx, ref, limit, historyQuery, args)
			return err
		})
	return h, err
}

// tailAttempts bounds how often a read looks the index's tail up by number
// before it scans: each attempt that a commit overlapped starts again.
const tailAttempts = 3

// readAboveMark runs a read of refs that takes their rows above the mark
// of tail's index: byList with the numbers the store knows (tail),
// taken before the read, and again if a commit began meanwhile, up to
// tailAttempts times; byScan when memory does not know them, or commits
// kept overlapping. The last call's outcome is the read's.
func (s *Store) readAboveMark(tail *unindexedTail, refs []vigil.SessionRef, byList func(list string) error, byScan func() error) error {
	for range tailAttempts {
		list, stamp, ok := tail.listOf(refs, nil)
		if !ok {
			break
		}
		if err := byList(list); err != nil || tail.unchanged(stamp) {
			return err
		}
	}
	return byScan()
}

// queryHistory runs one of the history queries with its arguments.
func (s *Store) queryHistory(ctx context.Context, ref vigil.SessionRef, limit int, q string, args []any) (vigil.History, error) {
	var h vigil.History
	buf := historyBuffers.Get().(*[]vigil.Event)
	evs := (*buf)[:0]
	// One statement is one snapshot, so bounds and events agree without an
	// explicit read transaction (which would cost two more statements).
	err := s.reading(ctx, func(c conn) error {
		return c.query(q, args, func(r rowValues) error {
			if r.isNull(4) { // the bounds row
				h.EarliestRetained, h.Head, h.PrunedWatermark = r.int(0), max(r.int(1), r.int(2)), r.int(3)
				return nil
			}
			e := vigil.Event{Sequence: r.int(4), AgentID: ref.AgentID, SessionKey: ref.Key, RecordedAt: r.int(5),
				DedupeKey: r.str(6)}
			if err := decodeBody(&e, ownedBlob(r, 7)); err != nil {
				return fmt.Errorf("event %d: %w", e.Sequence, err)
			}
			evs = append(evs, e)
			return nil
		})
	})
	// The caller gets the events in memory of their exact size: grown by
	// appending, a delta allocated more than twice that.
	if len(evs) > 0 {
		h.Events = slices.Clone(evs)
	}
	clear(evs)
	if cap(evs) <= historyBufferMax {
		*buf = evs[:0]
		historyBuffers.Put(buf)
	}
	// SQLite emits a compound select's parts in order, but does not promise
	// it; the contract does. Sorting sorted events is one pass. Each of the
	// indexed events and the tail is limited: together they may hold more.
	slices.SortFunc(h.Events, func(a, b vigil.Event) int { return cmp.Compare(a.Sequence, b.Sequence) })
	if limit >= 0 && len(h.Events) > limit {
		h.Events = h.Events[:limit]
	}
	return h, err
}

// historyBuffers hold the events of a history read as they arrive, for
// reuse by the next; one that grew beyond historyBufferMax events is left
// to the collector.
var historyBuffers = sync.Pool{New: func() any { return new([]vigil.Event) }}

const historyBufferMax = 1024

// ownedBlob reads a BLOB column (an event's body) without copying it: the
// driver hands each row's BLOB values over in memory of their own, where a
// TEXT value would need copying into a []byte.
func ownedBlob(r rowValues, i int) []byte {
	if b, ok := r[i].([]byte); ok {
		return b
	}
	return r.bytes(i)
}

// historyQuery reads a session's bounds (one row whose sequence column is
// NULL) and its events after ?3, at most ?4 indexed ones and at most ?4
// from the unindexed tail, one row per event, in one statement. A compound
// select needs no sort of the whole result, as an outer join with ORDER BY
// did. The session's key columns are the caller's, so they are not read
// back; the dedupe key is mostly NULL, which the driver hands over without
// a copy, and the body needs no copy either (ownedBlob). Bound values are
// written +?N (see index.go).
// historyOfListQuery looks the tail up by the numbers in
// ?5 (unindexedTail) instead of scanning it, and historyIndexedQuery has no
// tail, for a store that keeps none (scanTail).
var (
	historyQuery        = historyQueryOf(tailOfSession)
	historyOfListQuery  = historyQueryOf(tailOfList("?5"))
	historyIndexedQuery = historyQueryOf("")
)

func historyQueryOf(tail string) string {
	// An entry counts with its event only: pruned events' entries stay
	// until the sweep (index.go).
	first := `(SELECT x.sequence FROM session_index x JOIN events e
			ON e.sequence = x.sequence AND e.agent_id = +?1 AND e.session_key = +?2
		WHERE x.session = ` + sessionNumberOf + ` ORDER BY x.sequence LIMIT 1)`
	last := `(SELECT max(sequence) FROM session_index WHERE session = ` + sessionNumberOf + `)`
	if tail != "" {
		first = `coalesce(` + first + `, (SELECT min(sequence) FROM ` + tail + `))`
		last = `coalesce((SELECT max(sequence) FROM ` + tail + `), ` + last + `)`
	}
	q := `SELECT ` + first + `, ` + last + `, h.head, h.pruned_watermark, NULL, NULL, NULL, NULL
		FROM (SELECT 1) LEFT JOIN session_heads h ON h.agent_id = +?1 AND h.session_key = +?2
	UNION ALL
	SELECT * FROM (SELECT NULL, NULL, NULL, NULL, e.sequence, e.recorded_at, e.dedupe_key, e.body
		FROM session_index x JOIN events e
			ON e.sequence = x.sequence AND e.agent_id = +?1 AND e.session_key = +?2
		WHERE x.session = ` + sessionNumberOf + ` AND x.sequence > +?3 ORDER BY x.sequence LIMIT +?4)`
	if tail != "" {
		q += `
	UNION ALL
	SELECT * FROM (SELECT NULL, NULL, NULL, NULL, sequence, recorded_at, dedupe_key, body
		FROM ` + tail + ` AND sequence > +?3 ORDER BY sequence LIMIT +?4)`
	}
	return q
}

// Cursor implements vigil.Reader.
func (s *Store) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	cs, err := s.readCursors(ctx, cursorQuery, target.AgentID, target.Key, watcher)
	if err != nil || len(cs) == 0 {
		return vigil.Cursor{}, false, err
	}
	return cs[0], true, nil
}

// readCursors reads cursor rows from the file with the moves held in
// memory over them. Should a commit that changes cursors overlap the two
// steps, the rows read and the moves held may be of either side of it: the
// read starts again, up to readRetries times, each once the commit has
// ended; the last keeps such commits off until it is done.
func (s *Store) readCursors(ctx context.Context, q string, args ...any) ([]vigil.Cursor, error) {
	for attempt := 0; ; attempt++ {
		var gen uint64
		last := attempt == readRetries
		if last {
			s.moves.commits.RLock()
			defer s.moves.commits.RUnlock()
		} else {
			gen = s.moves.settled()
		}
		var out []vigil.Cursor
		err := s.reading(ctx, func(c conn) error {
			var err error
			out, err = c.queryCursors(q, args...)
			return err
		})
		if err != nil {
			return out, err
		}
		testHookCursorsRead()
		for i := range out {
			if m, ok := s.moves.get(keyOf(out[i])); ok {
				out[i] = m
			}
		}
		if last || s.moves.generation() == gen {
			return out, nil
		}
	}
}

// testHookCursorsRead runs after a cursor read took its rows from the
// file, before it lays the held moves over them.
var testHookCursorsRead = func() {}

// Cursors implements vigil.Reader.
func (s *Store) Cursors(ctx context.Context, ref vigil.SessionRef) ([]vigil.Cursor, error) {
	return s.readCursors(ctx, `SELECT `+cursorColumns+` FROM cursors
			WHERE watcher = ?1 OR (target_agent = ?2 AND target_key = ?3)
			ORDER BY watcher, target_agent, target_key`, ref.Key, ref.AgentID, ref.Key)
}

// NthNewestSequence implements vigil.Reader.
func (s *Store) NthNewestSequence(ctx context.Context, n int) (int64, error) {
	if n <= 0 {
		return 0, nil
	}
	var seq int64
	err := s.reading(ctx, func(c conn) error {
		_, err := c.queryRow(`SELECT sequence FROM events ORDER BY sequence DESC LIMIT 1 OFFSET ?`, []any{n - 1},
			func(r rowValues) error {
				seq = r.int(0)
				return nil
			})
		return err
	})
	return seq, err
}

// Log implements vigil.Reader.
func (s *Store) Log(ctx context.Context, after int64, limit int) (vigil.LogPage, error) {
	var p vigil.LogPage
	err := s.snapshot(ctx, func(c conn) error {
		if _, err := c.queryRow(`SELECT pruned FROM sequence_floor WHERE id = 1`, nil, func(r rowValues) error {
			p.PrunedWatermark = r.int(0)
			return nil
		}); err != nil {
			return err
		}
		return c.query(`SELECT `+eventColumns+` FROM events WHERE sequence > ? ORDER BY sequence LIMIT +?`,
			[]any{after, limit}, func(r rowValues) error {
				e, err := eventAt(r, 0)
				p.Events = append(p.Events, e)
				return err
			})
	})
	return p, err
}

// BeginWrite implements vigil.Store: BEGIN IMMEDIATE on the writer
// connection, so a second process writing the same file waits (up to the
// busy timeout) instead of failing mid-transaction. The writer pool holds
// one connection, so writers in this process queue for it.
func (s *Store) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	t, err := s.begin(ctx)
	if err != nil {
		return nil, err // a nil *Tx would be a non-nil vigil.Tx
	}
	return t, nil
}

// begin begins a write transaction (BeginWrite).
func (s *Store) begin(ctx context.Context) (*Tx, error) {
	sc, err := s.write.Conn(ctx)
	if err != nil {
		return nil, failed(err)
	}
	if err := s.takeWriter(sc); err != nil {
		return nil, err
	}
	c := conn{s: s, sc: sc}
	s.ckpt.restart(c)
	if _, err := c.exec(`BEGIN IMMEDIATE`); err != nil {
		s.handBack(sc)
		return nil, err
	}
	t := &Tx{s: s, c: c, tx: sc, unindexed: s.spare.unindexed, unindexedMessages: s.spare.unindexedMessages,
		changes: s.spare.changes, args: s.spare.args}
	s.spare = txBuffers{}
	t.c.tx = t
	return t, nil
}

// txBuffers are a write transaction's slices that grow with every event,
// kept from one write to the next so that a busy writer's do not grow
// from nothing each time.
type txBuffers struct {
	unindexed         []tailEntry
	unindexedMessages []tailEntry
	changes           []change
	args              []any
}

// txBuffersMax is the largest slice kept: a rare large write (a prune, a
// session's deletion) does not hold its memory for good.
const txBuffersMax = 1024

// keep takes the buffers of t, which has ended, emptied, for the next
// write. Entries are cleared so they hold no event past its write, and t
// lets go of them: a call on it now must not reach the next write's.
func (b *txBuffers) keep(t *Tx) {
	*b = txBuffers{unindexed: reuse(t.unindexed), unindexedMessages: reuse(t.unindexedMessages),
		changes: reuse(t.changes), args: reuse(t.args)}
	t.unindexed, t.unindexedMessages, t.changes, t.args = nil, nil, nil, nil
}

func reuse[T any](s []T) []T {
	if cap(s) > txBuffersMax {
		return nil
	}
	clear(s)
	return s[:0]
}

// Tx is a write transaction.
type Tx struct {
	s *Store
	c conn
	// tx is the connection the transaction runs on: every statement on it
	// until Commit or Rollback belongs to the transaction.
	tx   *sql.Conn
	done bool

	seqLoaded  bool
	seq        int64
	floorDirty bool

	// appended counts the events and messages the transaction appended
	// since it last brought the indexes up to date (indexed); unindexed
	// are the events and unindexedMessages the messages, for the memory
	// of each index's tail.
	appended          int
	indexed           bool
	unindexed         []tailEntry
	unindexedMessages []tailEntry

	// changes are what the store's memory of recent history learns at
	// commit, in order.
	changes []change

	// Cursor moves held for memory at commit (see heldMoves): this
	// transaction's own, the keys whose rows it wrote itself, and whether
	// it wrote every held move to the file.
	moved        map[cursorKey]vigil.Cursor
	dropped      map[cursorKey]struct{}
	movesWritten bool
	// The targets whose cursor rows this transaction wrote, or all of
	// them: their kept rows (watcherRows) are stale from the commit on.
	touched    map[vigil.SessionRef]struct{}
	touchedAll bool
	// args and body are Append's buffers of statement arguments and of
	// the event's body, reused from one event to the next: the driver
	// copies what it binds.
	args []any
	body []byte
}

// change is one committed write the recent-history memory must follow:
// an append, a prune up to a sequence, or a session's deletion.
type change struct {
	appended bool
	event    vigil.Event // the appended one
	prunedTo int64
	deleted  *vigil.SessionRef
}

// track notes a change for the memory of recent history to follow at
// commit.
func (t *Tx) track(c change) { t.changes = append(t.changes, c) }

// Append implements vigil.Tx.
func (t *Tx) Append(ctx context.Context, e *vigil.Event) (bool, error) {
	if err := t.loadSequence(); err != nil {
		return false, err
	}
	t.seq++
	e.Sequence = t.seq
	q, args, body := appendStatement(e, t.args[:0], t.body[:0])
	t.args, t.body = args, body
	n, err := t.c.exec(q, args...)
	if err != nil {
		return false, err
	}
	if n == 1 {
		t.appended++
		t.unindexed = append(t.unindexed, tailEntry{e.Session(), e.Sequence})
		// Its payload is copied only if memory keeps it.
		t.track(change{appended: true, event: *e})
		return true, nil
	}
	t.floorDirty = true // the number is used up with no event to show for it
	var prior vigil.Event
	found, err := t.c.queryRow(byDedupeQuery, []any{e.AgentID, e.SessionKey, e.DedupeKey}, func(r rowValues) (err error) {
		prior, err = eventAt(r, 0)
		return err
	})
	if err == nil && !found {
		err = sql.ErrNoRows
	}
	if err != nil {
		return false, fmt.Errorf("read event with dedupe key %q: %w", e.DedupeKey, err)
	}
	*e = prior
	return false, nil
}

// appendQuery inserts an event without a dedupe key, which cannot
// conflict; appendDedupedQuery one with, which may. An absent dedupe key
// is NULL, so that the unique index leaves it out.
const (
	appendQuery        = `INSERT INTO events (sequence, agent_id, session_key, recorded_at, body) VALUES (?, ?, ?, ?, ?)`
	appendDedupedQuery = `INSERT INTO events (sequence, agent_id, session_key, recorded_at, body, dedupe_key)
		VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (agent_id, session_key, dedupe_key) WHERE dedupe_key IS NOT NULL DO NOTHING`
)

// appendStatement returns the insert of e and its arguments, appended to
// args, with e's body appended to body (which the statement holds until
// it has run).
func appendStatement(e *vigil.Event, args []any, body []byte) (string, []any, []byte) {
	body = appendBody(body, e)
	args = append(args, e.Sequence, e.AgentID, e.SessionKey, e.RecordedAt, body)
	if e.DedupeKey == "" {
		return appendQuery, args, body
	}
	return appendDedupedQuery, append(args, e.DedupeKey), body
}

// loadSequence makes t.seq the last sequence used up, reading it from the
// file once a transaction, unless memory knows it (lastSequence).
func (t *Tx) loadSequence() error {
	if t.seqLoaded {
		return nil
	}
	if seq, ok := t.s.last.get(); ok {
		t.seq, t.seqLoaded = max(t.seq, seq), true
		return nil
	}
	// Numbers this transaction used up without an event (a dedupe drop)
	// are in t.seq but not yet in the file's floor: keep the larger.
	if _, err := t.c.queryRow(lastSequenceQuery, nil, func(r rowValues) error {
		t.seq = max(t.seq, r.int(0))
		return nil
	}); err != nil {
		return fmt.Errorf("read sequence: %w", err)
	}
	t.seqLoaded = true
	return nil
}

// Version implements vigil.Tx.
func (t *Tx) Version(ctx context.Context, ref vigil.SessionRef) (int64, error) {
	var v int64
	q, args := versionQuery, []any{ref.AgentID, ref.Key}
	// No other write can commit meanwhile.
	if list, _, ok := t.s.tail.list(ref, t.unindexed); ok {
		q, args = versionOfListQuery, append(args, list)
	}
	_, err := t.c.queryRow(q, args, func(r rowValues) error {
		v = r.int(0)
		return nil
	})
	return v, err
}

// CursorsOnTarget implements vigil.Tx.
func (t *Tx) CursorsOnTarget(ctx context.Context, dst []vigil.Cursor, target vigil.SessionRef) ([]vigil.Cursor, error) {
	from := len(dst)
	untouched := t.rowsUntouched(target)
	kept := false
	if untouched {
		dst, kept = t.s.watchers.get(dst, target)
	}
	if !kept {
		cs, err := t.c.queryCursors(cursorsOnTargetQuery, target.AgentID, target.Key)
		if err != nil {
			return dst, err
		}
		if untouched {
			t.s.watchers.keep(target, cs)
		}
		dst = append(dst, cs...)
	}
	for i := from; i < len(dst); i++ {
		dst[i] = t.overlay(dst[i])
	}
	return dst, nil
}

// Cursor implements vigil.Tx.
func (t *Tx) Cursor(ctx context.Context, watcher string, target vigil.SessionRef) (vigil.Cursor, bool, error) {
	c, ok, err := t.c.getCursor(cursorQuery, target.AgentID, target.Key, watcher)
	if ok {
		c = t.overlay(c)
	}
	return c, ok, err
}

// PutCursor implements vigil.Tx.
func (t *Tx) PutCursor(ctx context.Context, c vigil.Cursor) error {
	if err := t.putCursor(c); err != nil {
		return err
	}
	t.rowWritten(keyOf(c))
	return nil
}

func (t *Tx) putCursor(c vigil.Cursor) error {
	t.touch(c.Target)
	ambient := 0
	if c.Ambient {
		ambient = 1
	}
	_, err := t.c.exec(putCursorQuery, c.Target.AgentID, c.Target.Key, c.Watcher,
		c.LastSeen, c.Notified, c.Material, c.UpdatedAt, ambient)
	return err
}

// DeleteCursor implements vigil.Tx.
func (t *Tx) DeleteCursor(ctx context.Context, watcher string, target vigil.SessionRef) (bool, error) {
	n, err := t.c.exec(`DELETE FROM cursors WHERE watcher = ? AND target_agent = ? AND target_key = ?`,
		watcher, target.AgentID, target.Key)
	if err == nil {
		t.rowWritten(cursorKey{target, watcher})
	}
	return n > 0, err
}

// DeleteWatcherCursors implements vigil.Tx.
func (t *Tx) DeleteWatcherCursors(ctx context.Context, watcher string) (int, error) {
	if err := t.writeMoves(); err != nil {
		return 0, err
	}
	t.touchAll()
	n, err := t.c.exec(`DELETE FROM cursors WHERE watcher = ?`, watcher)
	return int(n), err
}

// DeleteSession implements vigil.Tx.
func (t *Tx) DeleteSession(ctx context.Context, ref vigil.SessionRef) error {
	if err := t.writeMoves(); err != nil {
		return err
	}
	if err := t.raiseFloor(); err != nil {
		return err
	}
	// Then every event of the session has its entry.
	if err := t.writeIndex(); err != nil {
		return err
	}
	t.touchAll()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		// The index's entries go with the events (a trigger)...
		{`DELETE FROM events WHERE sequence IN
			(SELECT sequence FROM session_index WHERE session = ` + sessionNumberOf + `)`, []any{ref.AgentID, ref.Key}},
		// And the entries pruned events left for the sweep, and the
		// session's number, unless its messages still use it (the
		// session's row and transcript go in a write of their own,
		// Tx.DeleteSessionRow, which may come later).
		{`DELETE FROM session_index WHERE session = ` + sessionNumberOf, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM session_numbers WHERE agent_id = ?1 AND session_key = ?2
			AND NOT EXISTS (SELECT 1 FROM message_index WHERE session = ` + sessionNumberOf + `)`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM session_heads WHERE agent_id = ? AND session_key = ?`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM cursors WHERE target_agent = ? AND target_key = ?`, []any{ref.AgentID, ref.Key}},
		{`DELETE FROM cursors WHERE watcher = ?`, []any{ref.Key}},
		{deleteLink, []any{ref.AgentID, ref.Key}},
	} {
		if _, err := t.c.exec(q.sql, q.args...); err != nil {
			return err
		}
	}
	t.track(change{deleted: &ref})
	return nil
}

// PruneEvents implements vigil.Tx. Deleting a prefix of the sequence order
// lets one range delete on the primary key do the work, and one statement
// raise the watermarks of every session in the prefix: a batch is a handful
// of statements whatever its size, so the writer is back for producers
// soon.
func (t *Tx) PruneEvents(ctx context.Context, maxSequence, recordedBefore int64, limit int) (int, error) {
	var last int64
	n := 0
	stop := errors.New("stop")
	err := t.c.query(`SELECT sequence, recorded_at FROM events WHERE sequence <= ? ORDER BY sequence LIMIT ?`,
		[]any{maxSequence, limit}, func(r rowValues) error {
			if r.int(1) >= recordedBefore {
				return stop
			}
			last = r.int(0)
			n++
			return nil
		})
	if err != nil && !errors.Is(err, stop) {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	// Moves held in memory are replayed from events; these are going.
	if err := t.writeMoves(); err != nil {
		return 0, err
	}
	if err := t.raiseFloor(); err != nil {
		return 0, err
	}
	// Every event at or below last goes: the prefix read above. NOT INDEXED
	// keeps the planner on that range of the rowid, where it could
	// otherwise pick an index for its grouping order and scan all of it.
	if _, err := t.c.exec(`INSERT INTO session_heads (agent_id, session_key, head, pruned_watermark)
		SELECT agent_id, session_key, max(sequence), max(sequence) FROM events NOT INDEXED
		WHERE sequence <= ?1 GROUP BY agent_id, session_key
		ON CONFLICT (agent_id, session_key) DO UPDATE SET
		head = max(head, excluded.head), pruned_watermark = max(pruned_watermark, excluded.pruned_watermark)`, last); err != nil {
		return 0, fmt.Errorf("raise pruned watermarks: %w", err)
	}
	// Their index entries stay, for the sweep (index.go): the trigger
	// leaves them while pruning is set.
	if _, err := t.c.exec(`UPDATE sequence_floor SET pruned = max(pruned, ?), pruning = 1 WHERE id = 1`, last); err != nil {
		return 0, err
	}
	if _, err := t.c.exec(`DELETE FROM events WHERE sequence <= ?`, last); err != nil {
		return 0, err
	}
	if _, err := t.c.exec(`UPDATE sequence_floor SET pruning = 0 WHERE id = 1`); err != nil {
		return 0, err
	}
	t.track(change{prunedTo: last})
	return n, nil
}

// ExpireCursors implements vigil.Tx.
func (t *Tx) ExpireCursors(ctx context.Context, updatedBefore int64, limit int) (int, error) {
	// Held moves carry the newest update times.
	if err := t.writeMoves(); err != nil {
		return 0, err
	}
	t.touchAll()
	n, err := t.c.exec(`DELETE FROM cursors WHERE (watcher, target_agent, target_key) IN (
		SELECT watcher, target_agent, target_key FROM cursors WHERE updated_at < ? LIMIT ?)`, updatedBefore, limit)
	return int(n), err
}

// raiseFloor keeps every sequence handed out so far from being handed out
// again, before events that may hold the newest numbers are deleted.
func (t *Tx) raiseFloor() error {
	if _, err := t.c.exec(raiseFloorQuery, t.seq); err != nil {
		return fmt.Errorf("raise sequence floor: %w", err)
	}
	t.floorDirty = false
	return nil
}

// Commit implements vigil.Tx.
func (t *Tx) Commit() error {
	if t.done {
		return sql.ErrTxDone
	}
	now := time.Now()
	err := func() error {
		if t.floorDirty {
			if err := t.raiseFloor(); err != nil {
				return err
			}
		}
		for _, m := range t.s.mirrors() {
			if err := m.committing(t, now); err != nil {
				return err
			}
		}
		_, err := t.c.exec(`COMMIT`)
		return err
	}()
	// Before the connection goes back: the next write's changes must
	// reach memory after these.
	t.ending(txEnd{committed: err == nil, followed: err == nil, now: now})
	t.end()
	if err == nil {
		t.s.ckpt.committed()
	}
	return err
}

// Rollback implements vigil.Tx.
func (t *Tx) Rollback() error {
	if t.done {
		return sql.ErrTxDone
	}
	var err error
	// SQLite may have rolled back already, after an I/O error or an
	// interrupted statement, say; any statement since then wrote the file
	// at once, and what the store remembers cannot know which.
	ended := !t.c.inTx()
	if !ended {
		_, err = t.c.exec(`ROLLBACK`)
	}
	t.ending(txEnd{followed: !ended, now: time.Now()})
	t.end()
	return err
}

// end hands the connection back, never inside a transaction.
func (t *Tx) end() {
	if t.c.inTx() {
		t.c.exec(`ROLLBACK`)
	}
	t.done = true
	t.s.spare.keep(t)
	t.s.handBack(t.tx)
	if t.moved != nil { // memory has what it needed of it
		t.s.moves.giveBack(t.moved)
		t.moved = nil
	}
}
