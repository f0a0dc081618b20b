package vigil_test

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// The crash test runs a child process (this test binary, re-executed with
// -test.run=^TestCrashChildProcess$) that records events from several
// goroutines on a SQLite file and prints one line per record after
// Engine.Record returned without error. The parent kills the child with
// SIGKILL at a random moment, reopens the file and checks that nothing the
// child reported as committed was lost and that the durable state the
// startup sweep rebuilds from is consistent. It repeats this on the same
// file, so recovery after recovery is tested too.

const (
	crashEnvDB    = "VIGIL_CRASH_DB"
	crashEnvRound = "VIGIL_CRASH_ROUND"
	crashEnvSeed  = "VIGIL_CRASH_SEED"

	crashRounds       = 5
	crashProducers    = 4
	crashMinKillDelay = 50 * time.Millisecond
	crashMaxKillDelay = 400 * time.Millisecond
	// crashFirstLineTimeout bounds the child's start-up (a -race binary
	// opening the store and running the sweep).
	crashFirstLineTimeout = 20 * time.Second

	crashLinePrefix = "CRASHREC"
)

// The watchers: a main session, a plain agent session, a sub-agent (never
// woken) and another agent's main session.
const (
	crashMain     = "agent:crash:main"
	crashW1       = "agent:crash:w1"
	crashW2       = "agent:crash:subagent:w2"
	crashOtherMan = "agent:crash2:main"
	// crashStranger is an agent actor that watches nothing.
	crashStranger = "agent:crash:stranger"
)

var crashWatchers = []string{crashMain, crashW1, crashW2, crashOtherMan}

// crashTarget is a watched session. A target with a parent is spawned
// (child_spawned seeds the parent's cursor) and passes the parent on every
// record; the others are watched explicitly only. Each has two watchers.
type crashTarget struct {
	ref      vigil.SessionRef
	parent   string
	watchers [2]string
}

var crashTargets = []crashTarget{
	{ref: vigil.MustRef("agent:crash:subagent:t1"), parent: crashMain, watchers: [2]string{crashMain, crashW1}},
	{ref: vigil.MustRef("agent:crash:subagent:t2"), parent: crashMain, watchers: [2]string{crashMain, crashW2}},
	{ref: vigil.MustRef("agent:crash:subagent:t3"), parent: crashW1, watchers: [2]string{crashW1, crashMain}},
	{ref: vigil.MustRef("agent:crash:subagent:t4"), parent: crashW2, watchers: [2]string{crashW2, crashW1}},
	// Two bare sessions with the same key under two agents: their cursors
	// and notices must stay apart although the notice texts may be equal.
	{ref: vigil.SessionRef{AgentID: "crash", Key: "global"}, watchers: [2]string{crashMain, crashW1}},
	{ref: vigil.SessionRef{AgentID: "crash2", Key: "global"}, watchers: [2]string{crashMain, crashOtherMan}},
}

func crashSpawnRun(tg crashTarget) string {
	return "spawn-" + strings.ReplaceAll(tg.ref.String(), ":", "-")
}

// crashReport is one committed record as the child reported it.
type crashReport struct {
	round    int
	seq      int64
	ref      vigil.SessionRef
	kind     vigil.Kind
	runID    string
	appended bool
}

func (r crashReport) String() string {
	return fmt.Sprintf("round %d: seq %d on %s (%s, run %s, appended %v)", r.round, r.seq, r.ref, r.kind, r.runID, r.appended)
}

func crashFormatReport(ev vigil.Event, appended bool) string {
	return fmt.Sprintf("%s %d %s %s %s %s %v\n", crashLinePrefix, ev.Sequence, ev.AgentID, ev.SessionKey, ev.Kind, ev.RunID, appended)
}

func crashParseReport(line string, round int) (crashReport, error) {
	f := strings.Fields(line)
	if len(f) != 7 || f[0] != crashLinePrefix {
		return crashReport{}, fmt.Errorf("malformed report %q", line)
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil || seq <= 0 {
		return crashReport{}, fmt.Errorf("report %q: bad sequence", line)
	}
	appended, err := strconv.ParseBool(f[6])
	if err != nil {
		return crashReport{}, fmt.Errorf("report %q: bad appended flag", line)
	}
	return crashReport{round: round, seq: seq, ref: vigil.SessionRef{AgentID: f[2], Key: f[3]},
		kind: vigil.Kind(f[4]), runID: f[5], appended: appended}, nil
}

// crashSplitLines is bufio.ScanLines keeping the newline, so the reader can
// tell a complete line from a final one the kill cut short.
func crashSplitLines(data []byte, atEOF bool) (int, []byte, error) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i + 1, data[:i+1], nil
	}
	if atEOF && len(data) > 0 {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// TestCrashChildProcess is the child of TestCommittedRecordsSurviveSIGKILL;
// it does nothing unless that test started it.
func TestCrashChildProcess(t *testing.T) {
	path := os.Getenv(crashEnvDB)
	if path == "" {
		t.Skip("child process of TestCommittedRecordsSurviveSIGKILL; runs only when started by it")
	}
	crashChild(path)
}

// crashChildFail reports a failure of the child on stderr and exits: the
// parent sees an exit that is not its SIGKILL and shows stderr.
func crashChildFail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "crash child: "+format+"\n", args...)
	os.Exit(3)
}

// crashReporter writes one report per Write call, unbuffered: once a line is
// written it is in the pipe and survives the kill.
type crashReporter struct {
	mu sync.Mutex
}

func (r *crashReporter) report(ev vigil.Event, appended bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := os.Stdout.WriteString(crashFormatReport(ev, appended)); err != nil {
		os.Exit(4) // the parent is gone
	}
}

func crashChild(path string) {
	ctx := context.Background()
	round, _ := strconv.Atoi(os.Getenv(crashEnvRound))
	seed, _ := strconv.ParseUint(os.Getenv(crashEnvSeed), 10, 64)
	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: "FULL"})
	if err != nil {
		crashChildFail("open store: %v", err)
	}
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1})
	if err != nil {
		crashChildFail("open engine: %v", err)
	}
	var out crashReporter

	// Setup, the same every round: spawn the children (deduplicated after
	// the first round, so the parent's cursor is seeded once) and watch
	// every target (a re-watch leaves the cursor alone). Reports come only
	// after the whole setup, so the first kill never cuts it short.
	var spawned []vigil.Recorded
	for _, tg := range crashTargets {
		if tg.parent != "" {
			run := crashSpawnRun(tg)
			res, err := eng.Record(ctx, vigil.Record{Session: tg.ref, Kind: vigil.KindChildSpawned,
				ActorType: vigil.ActorSystem, RunID: run, DedupeKey: "child-spawned:" + run, Parent: tg.parent})
			if err != nil {
				crashChildFail("spawn %s: %v", tg.ref, err)
			}
			spawned = append(spawned, res)
		}
		for _, w := range tg.watchers {
			if _, err := eng.Watch(ctx, w, tg.ref); err != nil {
				crashChildFail("watch %s by %s: %v", tg.ref, w, err)
			}
		}
	}
	for _, res := range spawned {
		out.report(res.Event, res.Appended)
	}

	stop := make(chan struct{})
	var wg sync.WaitGroup
	// The drainer: watchers' turns acknowledge notices, so cursors are
	// synced, pending, or pending with events after the frozen watermark.
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(seed, uint64(round)<<32|0xd7a1))
		for {
			for _, w := range crashWatchers {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(1+rng.IntN(8)) * time.Millisecond):
				}
				if _, err := eng.Drain(ctx, w); err != nil {
					crashChildFail("drain %s: %v", w, err)
				}
			}
		}
	})
	for g := range crashProducers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed, uint64(round)<<32|uint64(g)))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				tg := crashPickTarget(rng)
				r := crashRandomRecord(rng, tg, fmt.Sprintf("r%d-g%d-%d", round, g, i))
				res, err := eng.Record(ctx, r)
				if err != nil {
					crashChildFail("record %s on %s: %v", r.Kind, r.Session, err)
				}
				if res.Skipped {
					crashChildFail("record %s on %s skipped, but the session is watched", r.Kind, r.Session)
				}
				out.report(res.Event, res.Appended)
			}
		})
	}
	// Recording goes on until the kill. The parent holds the other end of
	// stdin open until then; should the parent die first, the end closes
	// and the child stops on its own.
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		crashChildFail("read stdin: %v", err)
	}
	close(stop)
	wg.Wait()
	eng.Close()
	st.Close()
}

// crashTargetWeights skews the load, so busy targets keep their cursors
// pending while quiet ones are often synced when the kill comes.
var crashTargetWeights = []int{40, 25, 15, 10, 7, 3}

func crashPickTarget(rng *rand.Rand) crashTarget {
	n := rng.IntN(100)
	for i, w := range crashTargetWeights {
		if n < w {
			return crashTargets[i]
		}
		n -= w
	}
	return crashTargets[len(crashTargets)-1]
}

// crashRandomRecord is one producer's record on tg. Small key spaces make
// dedupe keys repeat; agent actors are sometimes a watcher of tg
// (self-suppression).
func crashRandomRecord(rng *rand.Rand, tg crashTarget, nonce string) vigil.Record {
	r := vigil.Record{Session: tg.ref, Parent: tg.parent, RunID: nonce}
	switch p := rng.IntN(100); {
	case p < 35:
		r.Kind, r.ActorType, r.ActorID = vigil.KindHumanDirectMessage, vigil.ActorHuman, "telegram:7"
		r.Summary = "human message via telegram"
	case p < 65:
		r.Kind, r.ActorType = vigil.KindGoalChanged, vigil.ActorAgent
		r.ActorID = []string{tg.watchers[0], tg.watchers[1], crashStranger}[rng.IntN(3)]
		if rng.IntN(2) == 0 {
			r.DedupeKey = fmt.Sprintf("goal-rev:%d", rng.IntN(20))
		}
	case p < 85:
		run := fmt.Sprintf("run-%d", rng.IntN(25))
		r.RunID, r.DedupeKey, r.ActorType = run, "run-terminal:"+run, vigil.ActorSystem
		if rng.IntN(2) == 0 {
			r.Kind, r.Payload = vigil.KindRunCompleted, []byte(`{"outcome":"completed"}`)
		} else {
			r.Kind, r.Payload = vigil.KindRunFailed, []byte(`{"outcome":"timeout"}`)
		}
	case p < 95:
		r.Kind, r.ActorType = vigil.KindCompacted, vigil.ActorSystem
		r.DedupeKey = fmt.Sprintf("compacted:op-%d", rng.IntN(10))
	default:
		if tg.parent == "" {
			r.Kind, r.ActorType = vigil.KindCompacted, vigil.ActorSystem
			r.DedupeKey = fmt.Sprintf("compacted:op-%d", rng.IntN(10))
			break
		}
		// A repeated spawn: always deduplicated, so it must not re-seed
		// the parent's cursor.
		run := crashSpawnRun(tg)
		r.Kind, r.ActorType, r.RunID, r.DedupeKey = vigil.KindChildSpawned, vigil.ActorSystem, run, "child-spawned:"+run
	}
	return r
}

// TestCommittedRecordsSurviveSIGKILL kills a recording child process at
// random moments and checks, after each kill, that every record it reported
// as committed is in the log, that heads, cursors and the re-queued notices
// agree with the log, and that the database file is intact.
func TestCommittedRecordsSurviveSIGKILL(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" {
		t.Skip("needs SIGKILL and child processes")
	}
	start := time.Now()
	path := filepath.Join(t.TempDir(), "crash.db")
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))

	var all []crashReport
	var maxSeq int64 // the highest sequence in the log after the previous round
	for round := 1; round <= crashRounds; round++ {
		reports, delay, partial := crashRunChild(t, path, round, seed, rng)
		appended := 0
		for _, r := range reports {
			if r.appended {
				appended++
				if r.seq <= maxSeq {
					t.Errorf("%v: sequence reused; the log already held sequences up to %d before this round", r, maxSeq)
				}
			}
		}
		all = append(all, reports...)
		maxSeq = crashVerify(t, path, all)
		t.Logf("round %d: killed %v after the first report; %d reports (%d appended), partial line dropped: %v; log head %d",
			round, delay, len(reports), appended, partial, maxSeq)
		if t.Failed() {
			t.Fatalf("round %d failed (seed %d)", round, seed)
		}
	}
	t.Logf("%d rounds in %v", crashRounds, time.Since(start).Round(time.Millisecond))
	// The child's store holds cursor moves for up to a second, and every
	// kill comes sooner: the rounds must have replayed some.
	if crashMovesReplayed == 0 {
		t.Errorf("no round replayed a lost cursor move, so the replay went untested")
	}
}

// crashRunChild starts the child on path, kills it 50-400 ms after its first
// report and returns the complete reports, the delay used and whether a
// partial final line was dropped.
func crashRunChild(t *testing.T, path string, round int, seed uint64, rng *rand.Rand) ([]crashReport, time.Duration, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChildProcess$", "-test.count=1", "-test.timeout=2m")
	cmd.Env = append(os.Environ(),
		crashEnvDB+"="+path, crashEnvRound+"="+strconv.Itoa(round), crashEnvSeed+"="+strconv.FormatUint(seed, 10))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// The child records while its stdin is open; Wait closes it, after
	// the kill.
	if _, err := cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}

	type token struct {
		text     string
		complete bool
	}
	tokens := make(chan token, 1024)
	var scanErr error
	go func() {
		defer close(tokens)
		sc := bufio.NewScanner(stdout)
		sc.Split(crashSplitLines)
		for sc.Scan() {
			text := sc.Text()
			line, complete := strings.CutSuffix(text, "\n")
			tokens <- token{line, complete}
		}
		scanErr = sc.Err()
	}()

	var reports []crashReport
	var other []string
	partial := false
	take := func(tk token) {
		switch {
		case !tk.complete:
			partial = true // cut short by the kill: not a report
		case strings.HasPrefix(tk.text, crashLinePrefix+" "):
			r, err := crashParseReport(tk.text, round)
			if err != nil {
				t.Error(err)
				return
			}
			reports = append(reports, r)
		default:
			other = append(other, tk.text)
		}
	}
	childGone := func(why string) {
		cmd.Process.Kill()
		for tk := range tokens {
			take(tk)
		}
		err := cmd.Wait()
		t.Fatalf("round %d: %s (wait: %v)\nstdout (non-report lines): %s\nstderr:\n%s",
			round, why, err, strings.Join(other, "\n"), stderr.String())
	}

	// Wait for the first report.
	timeout := time.NewTimer(crashFirstLineTimeout)
	defer timeout.Stop()
	for len(reports) == 0 {
		select {
		case tk, ok := <-tokens:
			if !ok {
				childGone("child exited before its first report")
			}
			take(tk)
		case <-timeout.C:
			childGone(fmt.Sprintf("no report from the child within %v", crashFirstLineTimeout))
		}
	}

	// Let it run a random while, then kill it.
	delay := crashMinKillDelay + time.Duration(rng.Int64N(int64(crashMaxKillDelay-crashMinKillDelay)+1))
	kill := time.NewTimer(delay)
	defer kill.Stop()
	exited := false
wait:
	for {
		select {
		case tk, ok := <-tokens:
			if !ok {
				exited = true
				break wait
			}
			take(tk)
		case <-kill.C:
			break wait
		}
	}
	if exited {
		childGone("child closed its stdout before the kill")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("kill child: %v", err)
	}
	// Everything the child wrote before it died is still in the pipe.
	for tk := range tokens {
		take(tk)
	}
	err = cmd.Wait()
	if scanErr != nil {
		t.Fatalf("read child's stdout: %v", scanErr)
	}
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("round %d: child did not die of our SIGKILL (wait: %v)\nstderr:\n%s", round, err, stderr.String())
	}
	// The child writes nothing to stderr unless something broke (a failed
	// record, or a data race the race detector reported before the kill).
	if stderr.Len() > 0 {
		t.Errorf("round %d: child wrote to stderr:\n%s", round, stderr.String())
	}
	if len(other) > 0 {
		t.Logf("round %d: child printed non-report lines: %q", round, other)
	}
	return reports, delay, partial
}

// crashVerify reopens the database the child was killed on, checks it
// against every report so far and returns the highest sequence in the log.
// crashMovesReplayed counts, over the rounds, the cursor moves the kills
// lost and the sweeps replayed.
var crashMovesReplayed int64

func crashVerify(t *testing.T, path string, reports []crashReport) int64 {
	t.Helper()
	ctx := context.Background()

	// The file as the kill left it, before anything reopens it.
	perSession := crashCheckFile(t, path)

	st, err := sqlitestore.Open(ctx, path, sqlitestore.Options{Synchronous: "FULL"})
	if err != nil {
		t.Fatalf("reopen store: %v", err)
	}
	defer st.Close()
	// The cursors as the kill left them, before the sweep.
	type cursorID struct {
		watcher string
		target  vigil.SessionRef
	}
	preSweep := map[cursorID]vigil.Cursor{}
	var synced, frozen, beyond int
	for _, tg := range crashTargets {
		cs, err := st.Cursors(ctx, tg.ref)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			preSweep[cursorID{c.Watcher, c.Target}] = c
			L, N, M := c.LastSeen, c.Notified, c.Material
			switch {
			case !(L <= N && N <= M):
				t.Errorf("cursor of %s on %s breaks L <= N <= M before the sweep: L=%d N=%d M=%d", c.Watcher, c.Target, L, N, M)
			case N == L && M != L:
				t.Errorf("cursor of %s on %s is synced with material events beyond L (a lost notice): L=%d N=%d M=%d",
					c.Watcher, c.Target, L, N, M)
			case N == L:
				synced++
			case N == M:
				frozen++
			default:
				beyond++
			}
		}
	}
	t.Logf("cursors before the sweep: %d synced, %d pending at N=M, %d pending with events after N", synced, frozen, beyond)
	var wakeMu sync.Mutex
	woken := map[string]int{}
	eng, err := vigil.Open(ctx, st, vigil.Options{PruneInterval: -1, OnWake: func(w string) {
		wakeMu.Lock()
		woken[w]++
		wakeMu.Unlock()
	}})
	if err != nil {
		t.Fatalf("reopen engine (sweep): %v", err)
	}
	defer eng.Close()

	// The whole log, per target, through changesSince paging.
	bySeq := map[int64]vigil.Event{}
	logOf := map[vigil.SessionRef][]vigil.Event{}
	var maxSeq int64
	for _, tg := range crashTargets {
		evs, head := crashReadLog(t, eng, tg.ref)
		logOf[tg.ref] = evs
		if got, want := len(evs), perSession[tg.ref]; got != want {
			t.Errorf("%s: changesSince paging returned %d events, the events table holds %d", tg.ref, got, want)
		}
		var newest int64
		for _, ev := range evs {
			bySeq[ev.Sequence] = ev
			newest = ev.Sequence
		}
		v, err := eng.Version(ctx, tg.ref)
		if err != nil {
			t.Fatal(err)
		}
		if v != newest || head != newest {
			t.Errorf("%s: state version %d (delta says %d), but its newest event in the log is %d", tg.ref, v, head, newest)
		}
		maxSeq = max(maxSeq, newest)
	}
	for ref, n := range perSession {
		if _, ok := logOf[ref]; !ok {
			t.Errorf("the events table holds %d events of %s, which nobody recorded", n, ref)
		}
	}

	// Every committed record is there, as reported. A sequence reported
	// twice must name the same event (a dedupe returns the first one).
	seen := map[int64]crashReport{}
	missing := 0
	for _, r := range reports {
		if prev, ok := seen[r.seq]; ok && (prev.ref != r.ref || prev.kind != r.kind || prev.runID != r.runID) {
			t.Errorf("sequence %d reported for two different events: %v and %v", r.seq, prev, r)
		}
		seen[r.seq] = r
		ev, ok := bySeq[r.seq]
		switch {
		case !ok:
			missing++
			if missing <= 10 {
				t.Errorf("committed record lost: %v is not in the log", r)
			}
		case ev.Session() != r.ref || ev.Kind != r.kind || ev.RunID != r.runID:
			t.Errorf("committed record %v: the log holds %s %s (run %s) at that sequence instead",
				r, ev.Session(), ev.Kind, ev.RunID)
		}
	}
	if missing > 10 {
		t.Errorf("... %d committed records lost in all", missing)
	}

	// Cursors: the invariant, the sweep's N := M, and agreement with the
	// log (each cursor's watermarks are material sequences it was not
	// the actor of, or its seed; M is the newest of them).
	type slot struct {
		target vigil.SessionRef
		text   string
	}
	wantPending := map[string][]slot{}
	for _, tg := range crashTargets {
		cs, err := eng.Cursors(ctx, tg.ref)
		if err != nil {
			t.Fatal(err)
		}
		var watchers []string
		for _, c := range cs {
			if c.Target != tg.ref {
				t.Errorf("Cursors(%s) returned a cursor of %s on %s", tg.ref, c.Watcher, c.Target)
				continue
			}
			watchers = append(watchers, c.Watcher)
			crashCheckCursor(t, c, crashSeed(t, tg, logOf[tg.ref]), logOf[tg.ref])
			if pre, ok := preSweep[cursorID{c.Watcher, c.Target}]; !ok {
				t.Errorf("cursor of %s on %s appeared with the sweep", c.Watcher, c.Target)
			} else if want := crashSwept(crashReplayed(pre, logOf[tg.ref])); c.LastSeen != want.LastSeen || c.Notified != want.Notified || c.Material != want.Material {
				t.Errorf("sweep turned cursor of %s on %s from L=%d N=%d M=%d into L=%d N=%d M=%d, want N=%d",
					c.Watcher, c.Target, pre.LastSeen, pre.Notified, pre.Material, c.LastSeen, c.Notified, c.Material, want.Notified)
			}
			if c.Material > c.LastSeen {
				wantPending[c.Watcher] = append(wantPending[c.Watcher], slot{c.Target, vigil.NoticeText(c.Target.Key, c.LastSeen)})
			}
		}
		slices.Sort(watchers)
		want := []string{tg.watchers[0], tg.watchers[1]}
		slices.Sort(want)
		if !slices.Equal(watchers, want) {
			t.Errorf("%s is watched by %q, want %q", tg.ref, watchers, want)
		}
	}
	for _, w := range crashWatchers {
		cs, err := eng.Cursors(ctx, vigil.MustRef(w))
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cs {
			if c.Watcher != w {
				continue
			}
			if !slices.ContainsFunc(crashTargets, func(tg crashTarget) bool {
				return tg.ref == c.Target && slices.Contains(tg.watchers[:], w)
			}) {
				t.Errorf("stray cursor of %s on %s", w, c.Target)
			}
		}
	}

	// The sweep queued exactly one notice per pending cursor, and nothing
	// else; a second sweep changes nothing.
	pendingCursors := 0
	for _, w := range crashWatchers {
		pendingCursors += len(wantPending[w])
	}
	t.Logf("reopened: %d events in the log, %d of %d cursors pending, %d cursor moves the kill lost replayed",
		len(bySeq), pendingCursors, 2*len(crashTargets), eng.Stats().MovesReplayed)
	crashMovesReplayed += eng.Stats().MovesReplayed
	for _, w := range crashWatchers {
		var got []slot
		for _, ev := range eng.Pending(w) {
			if !ev.IsNotice() {
				t.Errorf("%s: unexpected queued system event %+v", w, ev)
				continue
			}
			if ev.ContextKey != vigil.NoticeContextKey(ev.Target.Key) {
				t.Errorf("%s: notice about %s has context key %q", w, ev.Target, ev.ContextKey)
			}
			got = append(got, slot{*ev.Target, ev.Text})
		}
		crashCompareSlots(t, w, got, wantPending[w], func(s slot) string { return s.target.String() + "|" + s.text })
	}
	before := map[string][]vigil.SystemEvent{}
	for _, w := range crashWatchers {
		before[w] = eng.Pending(w)
	}
	if n, err := eng.Sweep(ctx); err != nil || n != pendingCursors {
		t.Errorf("second sweep: %d notices, %v; want %d", n, err, pendingCursors)
	}
	for _, w := range crashWatchers {
		if after := eng.Pending(w); len(after) != len(before[w]) {
			t.Errorf("%s: a second sweep changed the queue from %d to %d entries", w, len(before[w]), len(after))
		}
	}

	// Wakes: every watcher with a re-queued notice that is not a sub-agent
	// is woken; sub-agents and watchers with nothing pending are not. Close
	// waits for every wake callback, so the tally is final after it.
	eng.Close()
	wakeMu.Lock()
	var missingWakes []string
	for _, w := range crashWatchers {
		if len(wantPending[w]) > 0 && !sessionkey.IsSubAgent(w) && woken[w] == 0 {
			missingWakes = append(missingWakes, w)
		}
	}
	wakeMu.Unlock()
	if len(missingWakes) > 0 {
		t.Errorf("watchers with re-queued notices never woken: %q", missingWakes)
	}
	wakeMu.Lock()
	for w := range woken {
		if sessionkey.IsSubAgent(w) || len(wantPending[w]) == 0 {
			t.Errorf("%s woken, but it is a sub-agent or has no pending notice", w)
		}
	}
	wakeMu.Unlock()
	return maxSeq
}

// crashCheckFile runs the integrity check on the file as the kill left it
// (SQLite replays the WAL on open) and returns how many events each session
// holds in the events table.
func crashCheckFile(t *testing.T, path string) map[vigil.SessionRef]int {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`PRAGMA integrity_check`)
	if err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	var problems []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		problems = append(problems, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		t.Fatal(err)
	}
	if len(problems) != 1 || problems[0] != "ok" {
		t.Errorf("integrity_check: %q", problems)
	}
	var dupes int
	if err := db.QueryRow(`SELECT count(*) FROM (SELECT 1 FROM events WHERE dedupe_key IS NOT NULL
		GROUP BY agent_id, session_key, dedupe_key HAVING count(*) > 1)`).Scan(&dupes); err != nil {
		t.Fatal(err)
	}
	if dupes > 0 {
		t.Errorf("%d dedupe keys stored more than once on one session", dupes)
	}
	out := map[vigil.SessionRef]int{}
	rows, err = db.Query(`SELECT agent_id, session_key, count(*) FROM events GROUP BY agent_id, session_key`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var ref vigil.SessionRef
		var n int
		if err := rows.Scan(&ref.AgentID, &ref.Key, &n); err != nil {
			t.Fatal(err)
		}
		out[ref] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// crashReadLog pages through ref's whole log with changesSince and returns
// the events and the state version the last page reported.
func crashReadLog(t *testing.T, eng *vigil.Engine, ref vigil.SessionRef) ([]vigil.Event, int64) {
	t.Helper()
	ctx := context.Background()
	var evs []vigil.Event
	var since int64
	for pages := 0; ; pages++ {
		if pages > 10_000 {
			t.Fatalf("%s: changesSince paging does not end", ref)
		}
		d, err := eng.ChangesSince(ctx, ref, since, 200)
		if err != nil {
			t.Fatal(err)
		}
		if d.HistoryGap {
			t.Errorf("%s: history gap after %d, but nothing was pruned", ref, since)
		}
		for _, ev := range d.Events {
			if ev.Session() != ref {
				t.Errorf("changesSince on %s returned an event of %s", ref, ev.Session())
			}
			if ev.Sequence <= since || (len(evs) > 0 && ev.Sequence <= evs[len(evs)-1].Sequence) {
				t.Errorf("%s: events out of order at sequence %d (after %d)", ref, ev.Sequence, since)
			}
			evs = append(evs, ev)
		}
		if !d.Truncated {
			if len(evs) > 0 && d.EarliestAvailableSequence != evs[0].Sequence {
				t.Errorf("%s: earliest available sequence %d, first event %d", ref, d.EarliestAvailableSequence, evs[0].Sequence)
			}
			return evs, d.StateVersion
		}
		since = d.NextChangesSince
	}
}

// crashSeed is where tg's cursors were seeded: at the child_spawned
// sequence for a spawned target (the parent's cursor by the spawn, the other
// watcher by Watch, which saw only that event), else at 0 (watched before
// anything was recorded).
func crashSeed(t *testing.T, tg crashTarget, evs []vigil.Event) int64 {
	t.Helper()
	if tg.parent == "" {
		return 0
	}
	var spawns []int64
	for _, ev := range evs {
		if ev.Kind == vigil.KindChildSpawned {
			spawns = append(spawns, ev.Sequence)
		}
	}
	if len(spawns) != 1 {
		t.Errorf("%s: %d child_spawned events, want exactly 1 (its dedupe key repeats): %v", tg.ref, len(spawns), spawns)
		return -1
	}
	if evs[0].Kind != vigil.KindChildSpawned {
		t.Errorf("%s: first event is %s, want child_spawned", tg.ref, evs[0].Kind)
	}
	return spawns[0]
}

// crashReplayed is c after the material events the file's cursor had not
// caught up with, in a store that holds cursor moves in memory (the kill
// lost them; the sweep replays them): each one the watcher did not cause
// freezes N if c was synced, and moves M.
func crashReplayed(c vigil.Cursor, evs []vigil.Event) vigil.Cursor {
	for _, ev := range evs {
		if ev.Kind.Material() && ev.ActorID != c.Watcher && ev.Sequence > c.Material {
			if c.Notified == c.LastSeen {
				c.Notified = ev.Sequence
			}
			c.Material = ev.Sequence
		}
	}
	return c
}

// crashSwept is c after the startup sweep: N := M when M > L.
func crashSwept(c vigil.Cursor) vigil.Cursor {
	if c.Material > c.LastSeen {
		c.Notified = c.Material
	}
	return c
}

// crashCheckCursor checks one cursor after the sweep against the log.
func crashCheckCursor(t *testing.T, c vigil.Cursor, seed int64, evs []vigil.Event) {
	t.Helper()
	if seed < 0 {
		return
	}
	L, N, M := c.LastSeen, c.Notified, c.Material
	if !(L <= N && N <= M) {
		t.Errorf("cursor of %s on %s breaks L <= N <= M: L=%d N=%d M=%d", c.Watcher, c.Target, L, N, M)
		return
	}
	if M > L && N != M {
		t.Errorf("cursor of %s on %s pending after the sweep without N = M: L=%d N=%d M=%d", c.Watcher, c.Target, L, N, M)
	}
	if M == L && N != L {
		t.Errorf("cursor of %s on %s: L=%d N=%d M=%d", c.Watcher, c.Target, L, N, M)
	}
	if c.UpdatedAt <= 0 {
		t.Errorf("cursor of %s on %s: updatedAt %d", c.Watcher, c.Target, c.UpdatedAt)
	}
	// The sequences this cursor may stand at: its seed and every material
	// event on the target that the watcher did not cause.
	valid := map[int64]bool{seed: true}
	wantM := seed
	for _, ev := range evs {
		if ev.Kind.Material() && ev.ActorID != c.Watcher {
			valid[ev.Sequence] = true
			wantM = max(wantM, ev.Sequence)
		}
	}
	if M != wantM {
		t.Errorf("cursor of %s on %s: M=%d, but the newest material event it watches is %d (seed %d)",
			c.Watcher, c.Target, M, wantM, seed)
	}
	if !valid[L] || !valid[N] {
		t.Errorf("cursor of %s on %s: L=%d N=%d, not the seed %d or a material sequence it watches",
			c.Watcher, c.Target, L, N, seed)
	}
}

// crashCompareSlots compares two multisets by key.
func crashCompareSlots[T any](t *testing.T, watcher string, got, want []T, key func(T) string) {
	t.Helper()
	count := map[string]int{}
	for _, s := range got {
		count[key(s)]++
	}
	for _, s := range want {
		count[key(s)]--
	}
	for k, n := range count {
		switch {
		case n > 0:
			t.Errorf("%s: %d unexpected queued notice(s) %q", watcher, n, k)
		case n < 0:
			t.Errorf("%s: notice %q not re-queued by the sweep", watcher, k)
		}
	}
}
