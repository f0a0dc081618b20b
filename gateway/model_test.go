package gateway_test

// A model-based test of the gateway's preconditions and of the lifecycle of
// a watched session (SPEC.md section 8): random tool calls by a person, a
// manager and a coordinator run against a gateway on a SQLite file, which
// is restarted now and then, and against a small model of the contract
// (SPEC.md sections 2-4 and 8). The model predicts each call's answer
// (applied, or refused with the conflict it carries), and after every step
// the sessions' rows, state versions, goals and transcripts, the watchers'
// cursors and their queued notices (what each one's next turn gets) must
// equal the model's.
//
// Notice texts are predicted exactly, coalesced ones and follow-ups too: a
// change notice's text depends only on its cursor's lastSeen (L), and L
// moves only when the notice is acknowledged, so the model's cursors give
// every text. Only the order of a queue is left open (one entry per
// watcher and target is the contract, and a restart queues them in the
// store's order), so queues and turns are compared as sets.
//
// The world: the manager agent:main:main spawns children (and so watches
// them); the coordinator agent:coord:main, a credential of another agent
// allowed to reach main, watches what it chooses, by sessions_send with
// watch: true or by the engine's Watch. Every target is the manager or one
// of its children; deleted children stay targets, so calls on a session
// that is gone are drawn too.

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

const (
	modelManager = "agent:main:main"
	modelCoord   = "agent:coord:main"
	modelPerson  = "ann"
	// modelLiveChildren and modelSpawns bound the children a sequence has
	// at once and in all, so the walk revisits the same few sessions.
	modelLiveChildren = 3
	modelSpawns       = 8
	// modelChecks is how many sequences a default run tries (rapid's own
	// default is 100), each of modelRounds rapid Repeat rounds (about 30
	// steps each, see -rapid.steps): about 15 s under -race on two shared
	// cores. Pass -rapid.checks for a deeper search.
	modelChecks = 25
	modelRounds = 2
)

var modelWatchers = []string{modelManager, modelCoord}

type modelPair struct{ watcher, target string }

type modelCursor struct{ L, N, M int64 }

// modelNotice is a queued notice: a change notice, or the notice that the
// target was deleted.
type modelNotice struct {
	target  string
	text    string
	deleted bool
}

func modelDeletedNotice(target string) modelNotice {
	return modelNotice{target: target, text: vigil.DeletedNoticeText(target), deleted: true}
}

type modelEvent struct {
	seq       int64
	kind      vigil.Kind
	actorType vigil.ActorType
	actorID   string
}

type modelRun struct {
	id      string
	outcome string // "" while the run is on
}

// modelState is the model: what the store holds (rows, heads, events,
// transcripts, goals, runs, cursors, tombstones) and what the gateway's
// memory holds (the queues).
type modelState struct {
	seq        int64 // the last global sequence handed out
	rows       map[string]bool
	heads      map[string]int64
	events     map[string][]modelEvent
	messages   map[string]int    // transcript length
	goals      map[string]string // objective; "" for none
	runs       map[string]*modelRun
	cursors    map[modelPair]modelCursor
	tombstones map[modelPair]bool // a deletion notice owed
	queues     map[string][]modelNotice
}

func newModelState() *modelState {
	return &modelState{
		rows: map[string]bool{}, heads: map[string]int64{}, events: map[string][]modelEvent{},
		messages: map[string]int{}, goals: map[string]string{}, runs: map[string]*modelRun{},
		cursors: map[modelPair]modelCursor{}, tombstones: map[modelPair]bool{}, queues: map[string][]modelNotice{},
	}
}

// modelMaterial are the kinds that notify watchers (SPEC 2 and 8).
func modelMaterial(k vigil.Kind) bool {
	return k == vigil.KindHumanDirectMessage || k == vigil.KindGoalChanged || k == vigil.KindSessionReset
}

func (s *modelState) watchersOf(target string) []string {
	var ws []string
	for p := range s.cursors {
		if p.target == target {
			ws = append(ws, p.watcher)
		}
	}
	sort.Strings(ws)
	return ws
}

// push queues n: one entry per (watcher, target), a newer one replacing
// the older in place (a deletion notice takes a change notice's place).
func (s *modelState) push(watcher string, n modelNotice) {
	q := s.queues[watcher]
	for i := range q {
		if q[i].target == n.target {
			q[i] = n
			return
		}
	}
	s.queues[watcher] = append(q, n)
}

func (s *modelState) dropNotice(watcher, target string) {
	q := slices.DeleteFunc(s.queues[watcher], func(n modelNotice) bool { return n.target == target })
	if len(q) == 0 {
		delete(s.queues, watcher)
	} else {
		s.queues[watcher] = q
	}
}

// queuedText is the text of watcher's queued notice about target, "" when
// none is queued.
func (s *modelState) queuedText(watcher, target string) string {
	for _, n := range s.queues[watcher] {
		if n.target == target {
			return n.text
		}
	}
	return ""
}

// liveParent is the parent a change of target names: the manager for a
// child, while the manager's row exists (a deleted parent watches nothing).
func (s *modelState) liveParent(target string) string {
	if target != modelManager && s.rows[modelManager] {
		return modelManager
	}
	return ""
}

// record appends an event as SPEC 2 and 3 say, and reports whether it was
// appended.
func (s *modelState) record(target string, kind vigil.Kind, actorType vigil.ActorType, actorID, parent string) bool {
	watchers := s.watchersOf(target)
	if kind == vigil.KindHumanDirectMessage && parent == "" && len(watchers) == 0 {
		return false // an unwatched session stays write-free
	}
	s.seq++
	seq := s.seq
	s.events[target] = append(s.events[target], modelEvent{seq, kind, actorType, actorID})
	s.heads[target] = seq
	switch {
	case kind == vigil.KindChildSpawned:
		s.cursors[modelPair{parent, target}] = modelCursor{seq, seq, seq}
	case modelMaterial(kind):
		if parent != "" && !slices.Contains(watchers, parent) {
			watchers = append(watchers, parent) // its cursor starts at L = N = M = 0
		}
		for _, w := range watchers {
			if w == actorID {
				continue // self-suppression
			}
			p := modelPair{w, target}
			c := s.cursors[p]
			if c.N == c.L {
				c.N = seq
			}
			c.M = seq
			s.cursors[p] = c
			s.push(w, modelNotice{target: target, text: vigil.NoticeText(target, c.L)})
		}
	}
	return true
}

// drain is the watcher's turn: everything queued is delivered; a deletion
// notice consumes its tombstone (told once); a change notice acknowledges
// its cursor (L := N, N := max(M, N)) and opens one follow-up when changes
// came after the frozen N.
func (s *modelState) drain(watcher string) (events, acked, followUps []string) {
	taken := s.queues[watcher]
	delete(s.queues, watcher)
	var again []modelNotice
	for _, n := range taken {
		events = append(events, n.text)
		p := modelPair{watcher, n.target}
		if n.deleted {
			delete(s.tombstones, p)
			continue
		}
		c, ok := s.cursors[p]
		if !ok {
			// Queued before the watcher deleted the target itself: still
			// delivered (SPEC 3), acknowledging nothing.
			continue
		}
		acked = append(acked, n.target)
		oldN := c.N
		c.L, c.N = oldN, max(c.M, c.N)
		s.cursors[p] = c
		if c.M > oldN {
			f := modelNotice{target: n.target, text: vigil.NoticeText(n.target, c.L)}
			followUps = append(followUps, f.text)
			again = append(again, f)
		}
	}
	for _, f := range again {
		s.push(watcher, f)
	}
	return events, acked, followUps
}

// restart loses the queues; the sweep queues again every cursor's notice
// with changes unacknowledged (N := M) and every deletion notice owed.
func (s *modelState) restart() {
	s.queues = map[string][]modelNotice{}
	for p, c := range s.cursors {
		if c.M > c.L {
			c.N = c.M
			s.cursors[p] = c
			s.push(p.watcher, modelNotice{target: p.target, text: vigil.NoticeText(p.target, c.L)})
		}
	}
	for p := range s.tombstones {
		s.push(p.watcher, modelDeletedNotice(p.target))
	}
}

// forgetWatcher drops what a reset or deleted session watched: its
// cursors, the deletion notices it was owed and its queue.
func (s *modelState) forgetWatcher(w string) {
	for p := range s.cursors {
		if p.watcher == w {
			delete(s.cursors, p)
		}
	}
	for p := range s.tombstones {
		if p.watcher == w {
			delete(s.tombstones, p)
		}
	}
	delete(s.queues, w)
}

// remove is the gateway's delete by session by ("" for a person): every
// other watcher is owed one deletion notice, which takes the place of its
// change notice; the deleter is told nothing (what it had queued stays).
func (s *modelState) remove(target, by string) {
	var told []string
	for _, w := range s.watchersOf(target) {
		if w != by {
			told = append(told, w)
		}
	}
	delete(s.rows, target)
	delete(s.heads, target)
	delete(s.events, target)
	delete(s.messages, target)
	delete(s.goals, target)
	delete(s.runs, target)
	for p := range s.cursors {
		if p.target == target {
			delete(s.cursors, p)
		}
	}
	s.forgetWatcher(target)
	for _, w := range told {
		s.tombstones[modelPair{w, target}] = true
		s.push(w, modelDeletedNotice(target))
	}
}

// watch registers a watcher seeded at the target's version; an existing
// cursor stays as it is. Watching anew supersedes a deletion notice owed
// for the key.
func (s *modelState) watch(w, target string) modelCursor {
	p := modelPair{w, target}
	if c, ok := s.cursors[p]; ok {
		return c
	}
	if s.tombstones[p] {
		delete(s.tombstones, p)
		s.dropNotice(w, target)
	}
	v := s.heads[target]
	c := modelCursor{v, v, v}
	s.cursors[p] = c
	return c
}

func (s *modelState) ensureRow(key string) {
	if !s.rows[key] {
		s.rows[key] = true
		s.messages[key] = 0
	}
}

// modelPre is a drawn precondition.
type modelPre struct {
	version *int64
	synced  bool
}

func (p modelPre) String() string {
	var parts []string
	if p.version != nil {
		parts = append(parts, fmt.Sprintf("ifStateVersion %d", *p.version))
	}
	if p.synced {
		parts = append(parts, "ifSynced")
	}
	if len(parts) == 0 {
		return "unconditionally"
	}
	return strings.Join(parts, ", ")
}

// modelAnswer is what a call is predicted to answer: code "" when it is
// applied.
type modelAnswer struct {
	code    string
	version int64  // a conflict's state version
	notice  string // an ifSynced conflict's pending notice
}

var modelApplied = modelAnswer{}

// modelActor is who calls: the person, or a session acting.
type modelActor struct {
	c       gateway.Caller
	session string // "" for the person
}

func (a modelActor) String() string {
	if a.session == "" {
		return "person " + modelPerson
	}
	return a.session
}

func (a modelActor) actor() (vigil.ActorType, string) {
	if a.session == "" {
		return vigil.ActorHuman, modelPerson
	}
	return vigil.ActorAgent, a.session
}

// badPre is a precondition refused before any write: ifSynced needs an
// acting session, the watcher.
func badPre(a modelActor, p modelPre) (modelAnswer, bool) {
	if p.synced && a.session == "" {
		return modelAnswer{code: gateway.CodeInvalid}, true
	}
	return modelApplied, false
}

// refusal is the answer of a change of target whose precondition does not
// hold. It is checked first in the write, before the target's existence:
// ifStateVersion against the target's version (0 once deleted), then
// ifSynced against the caller's cursor (M == L), which must exist.
func (s *modelState) refusal(a modelActor, target string, p modelPre) (modelAnswer, bool) {
	v := s.heads[target]
	if p.version != nil && *p.version != v {
		return modelAnswer{code: gateway.CodeConflict, version: v}, true
	}
	if p.synced {
		c, ok := s.cursors[modelPair{a.session, target}]
		if !ok {
			return modelAnswer{code: gateway.CodeInvalid}, true
		}
		if c.M != c.L {
			return modelAnswer{code: gateway.CodeConflict, version: v, notice: s.queuedText(a.session, target)}, true
		}
	}
	return modelApplied, false
}

// modelCoverage counts what the walk reached, for the log.
type modelCoverage struct {
	steps, applied, versionConflicts, syncedConflicts, invalid, notFound atomic.Int64
	skippedMessages, resets, deletes, deletionNotices, followUps         atomic.Int64
	restarts, requeued                                                   atomic.Int64
}

func (c *modelCoverage) String() string {
	return fmt.Sprintf("applied=%d versionConflicts=%d syncedConflicts=%d invalid=%d notFound=%d skippedMessages=%d "+
		"resets=%d deletes=%d deletionNoticesDelivered=%d followUps=%d restarts=%d requeued=%d",
		c.applied.Load(), c.versionConflicts.Load(), c.syncedConflicts.Load(), c.invalid.Load(), c.notFound.Load(),
		c.skippedMessages.Load(), c.resets.Load(), c.deletes.Load(), c.deletionNotices.Load(), c.followUps.Load(),
		c.restarts.Load(), c.requeued.Load())
}

// modelMachine drives the gateway and the model side by side.
type modelMachine struct {
	path    string
	ids     atomic.Int64 // the gateway's NewID, counting across restarts
	g       *gateway.Gateway
	closeGW func()

	s        *modelState
	person   modelActor
	manager  modelActor
	coord    modelActor
	children []string // every child spawned, deleted ones included
	// sessionIDs are the incarnation ids last seen; reset lists the
	// sessions the current step reset (their id must change, and no other).
	sessionIDs map[string]string
	reset      map[string]bool
	cov        *modelCoverage
}

func (m *modelMachine) newID() string { return "k" + strconv.FormatInt(m.ids.Add(1), 10) }

func (m *modelMachine) open(t *rapid.T) {
	// Creation notices are left out: they are modelled with the engine's
	// rules (the root package's model) and tested in created_test.go.
	gw, err := gatewaytest.New(ctx, gatewaytest.Options{Path: m.path,
		Gateway: gateway.Options{NewID: m.newID, NoCreationNotices: true}})
	if err != nil {
		t.Fatal(err)
	}
	m.g, m.closeGW = gw.Gateway, gw.Close
}

func (m *modelMachine) resolve(t *rapid.T, p gateway.Principal, session string) modelActor {
	c, err := m.g.ResolveCaller(ctx, p, session)
	if err != nil {
		t.Fatalf("resolve %s: %v", session, err)
	}
	return modelActor{c: c, session: session}
}

// targets are the sessions calls are drawn on: the manager and every child
// ever spawned.
func (m *modelMachine) targets() []string { return append([]string{modelManager}, m.children...) }

// drawTarget draws a session other than except, mostly one that exists:
// a call on a deleted one has one answer (not found, or the conflict of a
// precondition, which is checked first).
func (m *modelMachine) drawTarget(t *rapid.T, except string) string {
	var all, live []string
	for _, k := range m.targets() {
		if k != except {
			all = append(all, k)
			if m.s.rows[k] || k == modelManager {
				live = append(live, k)
			}
		}
	}
	if len(all) == 0 {
		t.Skip("no session to call on yet")
	}
	if len(live) > 0 && rapid.IntRange(0, 4).Draw(t, "gone") > 0 {
		return rapid.SampledFrom(live).Draw(t, "target")
	}
	return rapid.SampledFrom(all).Draw(t, "target")
}

func (m *modelMachine) drawActor(t *rapid.T, actors ...modelActor) modelActor {
	i := rapid.IntRange(0, len(actors)-1).Draw(t, "actor")
	return actors[i]
}

// drawPre draws no ifStateVersion, the model's current version or a wrong
// one (older or newer), and (when synced is allowed) ifSynced.
func (m *modelMachine) drawPre(t *rapid.T, a modelActor, target string, synced bool) modelPre {
	var p modelPre
	v := m.s.heads[target]
	switch rapid.IntRange(0, 4).Draw(t, "ifStateVersion") {
	case 2, 3:
		p.version = &v
	case 4:
		d := rapid.Int64Range(1, 3).Draw(t, "wrongBy")
		wrong := v + d
		if v >= d && rapid.Bool().Draw(t, "older") {
			wrong = v - d
		}
		p.version = &wrong
	}
	if synced {
		// Mostly by a watcher of the target; now and then by a caller that
		// watches nothing there (a person, or a session without a cursor),
		// which is refused as invalid.
		_, watches := m.s.cursors[modelPair{a.session, target}]
		if watches {
			p.synced = rapid.Bool().Draw(t, "ifSynced")
		} else {
			p.synced = rapid.IntRange(0, 9).Draw(t, "ifSyncedUnwatched") == 0
		}
	}
	return p
}

// expect compares a call's error with the model's answer.
func (m *modelMachine) expect(t *rapid.T, what, target string, err error, want modelAnswer) {
	switch want.code {
	case "":
		if err != nil {
			t.Fatalf("%s: %v, want it applied", what, err)
		}
		m.cov.applied.Add(1)
		return
	case gateway.CodeConflict:
		var conflict *gateway.ConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, gateway.ErrConflict) || gateway.Code(err) != gateway.CodeConflict {
			t.Fatalf("%s: %v, want a conflict at state version %d", what, err, want.version)
		}
		if conflict.Target != vigil.MustRef(target) || conflict.StateVersion != want.version || conflict.Notice != want.notice {
			t.Fatalf("%s: conflict on %s at version %d with notice %q, want %s at %d with %q",
				what, conflict.Target, conflict.StateVersion, conflict.Notice, target, want.version, want.notice)
		}
		if want.notice == "" {
			m.cov.versionConflicts.Add(1)
		} else {
			m.cov.syncedConflicts.Add(1)
		}
	default:
		if gateway.Code(err) != want.code {
			t.Fatalf("%s: %v (code %s), want code %s", what, err, gateway.Code(err), want.code)
		}
		if want.code == gateway.CodeInvalid {
			m.cov.invalid.Add(1)
		} else {
			m.cov.notFound.Add(1)
		}
	}
}

// --- actions ---

func (m *modelMachine) actionSpawn(t *rapid.T) {
	live := 0
	for _, k := range m.children {
		if m.s.rows[k] {
			live++
		}
	}
	if live >= modelLiveChildren || len(m.children) >= modelSpawns {
		t.Skip("enough children")
	}
	m.cov.steps.Add(1)
	// A spawn's precondition is on its parent, the manager itself.
	p := m.drawPre(t, m.manager, modelManager, false)
	what := fmt.Sprintf("%s spawns a child %s", m.manager, p)
	t.Log(what)
	out, err := m.g.Spawn(ctx, m.manager.c, gateway.SpawnInput{Task: "draft", IfStateVersion: p.version})
	want, refused := m.s.refusal(m.manager, modelManager, p)
	m.expect(t, what, modelManager, err, want)
	if refused {
		return
	}
	child := out.ChildSessionKey
	if !strings.HasPrefix(child, "agent:main:subagent:") || slices.Contains(m.targets(), child) {
		t.Fatalf("%s: child key %q", what, child)
	}
	m.children = append(m.children, child)
	m.s.ensureRow(modelManager) // the acting main session's row, made by its first change
	m.s.ensureRow(child)
	m.s.messages[child] = 1 // the task
	m.s.runs[child] = &modelRun{id: out.RunID}
	m.s.record(child, vigil.KindCreated, vigil.ActorAgent, modelManager, "") // its creator: log only
	m.s.record(child, vigil.KindChildSpawned, vigil.ActorAgent, modelManager, modelManager)
}

// send applies the model side of a delivered message: a main session is
// made by the first message to it, a person's message is recorded (when
// the target is watched), an agent's is not, and watch registers the
// sender.
func (m *modelMachine) send(t *rapid.T, a modelActor, target string, p modelPre, watch bool) {
	what := fmt.Sprintf("%s sends to %s %s (watch %v)", a, target, p, watch)
	t.Log(what)
	zero := 0
	in := gateway.SendInput{SessionKey: target, Message: "use the new figures", TimeoutSeconds: &zero,
		IfStateVersion: p.version, IfSynced: p.synced}
	if watch {
		in.Watch = &watch
	}
	out, err := m.g.Send(ctx, a.c, in)
	want, refused := badPre(a, p)
	if !refused {
		want, refused = m.s.refusal(a, target, p)
	}
	if !refused && !m.s.rows[target] && target != modelManager {
		want, refused = modelAnswer{code: gateway.CodeNotFound}, true
	}
	m.expect(t, what, target, err, want)
	if refused {
		return
	}
	m.s.ensureRow(target)
	m.s.messages[target]++
	if a.session == "" {
		if !m.s.record(target, vigil.KindHumanDirectMessage, vigil.ActorHuman, modelPerson, m.s.liveParent(target)) {
			m.cov.skippedMessages.Add(1)
		}
	}
	if watch {
		c := m.s.watch(a.session, target)
		if out.Watched == nil || !*out.Watched {
			t.Fatalf("%s: watched %v, want true", what, out.Watched)
		}
		m.checkCursor(t, what, a.session, target, c)
	} else if out.Watched != nil {
		t.Fatalf("%s: watched %v without watch asked", what, *out.Watched)
	}
}

func (m *modelMachine) actionPersonSend(t *rapid.T) {
	m.cov.steps.Add(1)
	target := m.drawTarget(t, "")
	m.send(t, m.person, target, m.drawPre(t, m.person, target, true), false)
}

func (m *modelMachine) actionAgentSend(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.manager, m.coord)
	target := m.drawTarget(t, a.session)
	p := m.drawPre(t, a, target, true)
	m.send(t, a, target, p, rapid.Bool().Draw(t, "watch"))
}

func (m *modelMachine) actionGoal(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.person, m.manager, m.coord)
	target := m.drawTarget(t, "")
	p := m.drawPre(t, a, target, true)
	objective := rapid.SampledFrom([]string{"ship", "review", "hold"}).Draw(t, "objective")
	what := fmt.Sprintf("%s sets the goal of %s to %q %s", a, target, objective, p)
	t.Log(what)
	out, err := m.g.SetGoal(ctx, a.c, gateway.GoalInput{SessionKey: target, Action: "set", Objective: objective,
		IfStateVersion: p.version, IfSynced: p.synced})
	want, refused := badPre(a, p)
	if !refused {
		want, refused = m.s.refusal(a, target, p)
	}
	if !refused && !m.s.rows[target] {
		want, refused = modelAnswer{code: gateway.CodeNotFound}, true
	}
	m.expect(t, what, target, err, want)
	if refused {
		return
	}
	m.s.goals[target] = objective
	actorType, actorID := a.actor()
	m.s.record(target, vigil.KindGoalChanged, actorType, actorID, m.s.liveParent(target))
	if out.StateVersion != m.s.heads[target] {
		t.Fatalf("%s: answered state version %d, model %d", what, out.StateVersion, m.s.heads[target])
	}
}

func (m *modelMachine) actionReset(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.person, m.manager, m.coord)
	target := m.drawTarget(t, "")
	p := m.drawPre(t, a, target, true)
	what := fmt.Sprintf("%s resets %s %s", a, target, p)
	t.Log(what)
	_, err := m.g.Reset(ctx, a.c, gateway.SessionInput{SessionKey: target, IfStateVersion: p.version, IfSynced: p.synced})
	want, refused := badPre(a, p)
	if !refused {
		want, refused = m.s.refusal(a, target, p)
	}
	if !refused && !m.s.rows[target] {
		want, refused = modelAnswer{code: gateway.CodeNotFound}, true
	}
	m.expect(t, what, target, err, want)
	if refused {
		return
	}
	m.cov.resets.Add(1)
	m.reset[target] = true
	// The reset session drops what it watched; its watchers are told (but
	// the one who reset it), as of a material change.
	m.s.forgetWatcher(target)
	actorType, actorID := a.actor()
	m.s.record(target, vigil.KindSessionReset, actorType, actorID, m.s.liveParent(target))
}

func (m *modelMachine) actionDelete(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.person, m.manager, m.coord)
	target := m.drawTarget(t, "")
	p := m.drawPre(t, a, target, true)
	what := fmt.Sprintf("%s deletes %s %s", a, target, p)
	t.Log(what)
	out, err := m.g.Delete(ctx, a.c, gateway.SessionInput{SessionKey: target, IfStateVersion: p.version, IfSynced: p.synced})
	want, refused := badPre(a, p)
	if !refused {
		want, refused = m.s.refusal(a, target, p)
	}
	if !refused && !m.s.rows[target] {
		want, refused = modelAnswer{code: gateway.CodeNotFound}, true
	}
	m.expect(t, what, target, err, want)
	if refused {
		return
	}
	if !out.Deleted {
		t.Fatalf("%s: answered %+v", what, out)
	}
	m.cov.deletes.Add(1)
	m.s.remove(target, a.session)
}

func (m *modelMachine) actionRunEnd(t *rapid.T) {
	if len(m.children) == 0 {
		t.Skip("no run yet")
	}
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.person, m.manager)
	child := rapid.SampledFrom(m.children).Draw(t, "child")
	outcome := rapid.SampledFrom([]string{vigil.OutcomeCompleted, vigil.OutcomeError, vigil.OutcomeTimeout,
		vigil.OutcomeCancelled}).Draw(t, "outcome")
	p := m.drawPre(t, a, child, true)
	run := m.s.runs[child]
	runID := "run-of-a-deleted-child"
	if run != nil {
		runID = run.id
	}
	what := fmt.Sprintf("%s ends the run of %s (%s) %s", a, child, outcome, p)
	t.Log(what)
	out, err := m.g.EndRun(ctx, a.c, gateway.RunEndInput{RunID: runID, Outcome: outcome, IfStateVersion: p.version,
		IfSynced: p.synced})
	// The run is looked up first: the precondition is on the run's session.
	want, refused := badPre(a, p)
	if !refused && run == nil {
		want, refused = modelAnswer{code: gateway.CodeNotFound}, true
	}
	if !refused {
		want, refused = m.s.refusal(a, child, p)
	}
	m.expect(t, what, child, err, want)
	if refused {
		return
	}
	if run.outcome != "" {
		if out.Recorded || out.Outcome != run.outcome {
			t.Fatalf("%s: answered %+v for a run that ended %s", what, out, run.outcome)
		}
		return
	}
	run.outcome = outcome
	kind := vigil.KindRunFailed
	if outcome == vigil.OutcomeCompleted {
		kind = vigil.KindRunCompleted
	}
	m.s.record(child, kind, vigil.ActorSystem, "", "")
	if !out.Recorded || out.Outcome != outcome {
		t.Fatalf("%s: answered %+v", what, out)
	}
}

func (m *modelMachine) actionTurn(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.manager, m.coord)
	t.Logf("%s takes its turn", a)
	zero := 0
	out, err := m.g.Turn(ctx, a.c, gateway.TurnInput{SessionKey: a.session, WaitSeconds: &zero})
	if err != nil {
		t.Fatalf("turn of %s: %v", a, err)
	}
	events, acked, followUps := m.s.drain(a.session)
	for _, e := range events {
		if strings.Contains(e, "was deleted") {
			m.cov.deletionNotices.Add(1)
		}
	}
	m.cov.followUps.Add(int64(len(followUps)))
	modelSameSet(t, "the system events of "+a.session+"'s turn", out.SystemEvents, events)
	modelSameSet(t, "the targets "+a.session+"'s turn acknowledged", out.Acknowledged, acked)
	modelSameSet(t, "the follow-ups of "+a.session+"'s turn", out.FollowUps, followUps)
}

func (m *modelMachine) actionWatch(t *rapid.T) {
	m.cov.steps.Add(1)
	w := rapid.SampledFrom(modelWatchers).Draw(t, "watcher")
	target := m.drawTarget(t, w)
	what := fmt.Sprintf("%s watches %s through the engine", w, target)
	t.Log(what)
	got, err := m.g.Engine().Watch(ctx, w, vigil.MustRef(target))
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	want := m.s.watch(w, target)
	if (modelCursor{got.LastSeen, got.Notified, got.Material}) != want {
		t.Fatalf("%s: cursor %d/%d/%d, model %+v", what, got.LastSeen, got.Notified, got.Material, want)
	}
}

// actionStatus reads a session, from nothing, from 0 or from a watcher's
// notice (its cursor's L); the check after it shows the read changed
// nothing.
func (m *modelMachine) actionStatus(t *rapid.T) {
	m.cov.steps.Add(1)
	a := m.drawActor(t, m.person, m.manager, m.coord)
	target := m.drawTarget(t, "")
	in := gateway.StatusInput{SessionKey: target}
	switch rapid.IntRange(0, 2).Draw(t, "changesSince") {
	case 1:
		v := int64(0)
		in.ChangesSince = &v
	case 2:
		w := rapid.SampledFrom(modelWatchers).Draw(t, "noticeOf")
		v := m.s.heads[target]
		if c, ok := m.s.cursors[modelPair{w, target}]; ok {
			v = c.L
		}
		in.ChangesSince = &v
	}
	what := fmt.Sprintf("%s reads the status of %s", a, target)
	if in.ChangesSince != nil {
		what += fmt.Sprintf(" changesSince %d", *in.ChangesSince)
	}
	t.Log(what)
	out, err := m.g.Status(ctx, a.c, in)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	statusJSON(t, out)
	if out.Exists != m.s.rows[target] || out.StateVersion != m.s.heads[target] {
		t.Fatalf("%s: exists %v at version %d, model %v at %d", what, out.Exists, out.StateVersion, m.s.rows[target], m.s.heads[target])
	}
	if in.ChangesSince == nil {
		return
	}
	var got, want []string
	for _, e := range out.StateChanges.Events {
		got = append(got, fmt.Sprintf("%d %s by %s %s", e.Sequence, e.Kind, e.ActorType, e.ActorID))
	}
	for _, e := range m.s.events[target] {
		if e.seq > *in.ChangesSince {
			want = append(want, fmt.Sprintf("%d %s by %s %s", e.seq, e.kind, e.actorType, e.actorID))
		}
	}
	if !slices.Equal(got, want) || out.StateChanges.Truncated || out.StateChanges.HistoryGap {
		t.Fatalf("%s: changes %q (truncated %v, gap %v), model %q", what, got, out.StateChanges.Truncated,
			out.StateChanges.HistoryGap, want)
	}
}

func (m *modelMachine) actionRestart(t *rapid.T) {
	m.cov.steps.Add(1)
	t.Log("the gateway restarts")
	m.closeGW()
	m.open(t)
	m.s.restart()
	m.cov.restarts.Add(1)
	for _, q := range m.s.queues {
		m.cov.requeued.Add(int64(len(q)))
	}
}

// --- checks after every step ---

func (m *modelMachine) check(t *rapid.T) {
	for _, key := range m.targets() {
		m.checkSession(t, key)
	}
	for _, w := range modelWatchers {
		m.checkQueue(t, w)
		for _, target := range m.targets() {
			if target == w {
				continue
			}
			c, ok, err := m.g.Engine().Cursor(ctx, w, vigil.MustRef(target))
			if err != nil {
				t.Fatalf("cursor %s -> %s: %v", w, target, err)
			}
			want, wantOK := m.s.cursors[modelPair{w, target}]
			if ok != wantOK || (ok && (modelCursor{c.LastSeen, c.Notified, c.Material}) != want) {
				t.Fatalf("cursor %s -> %s: %d/%d/%d (found %v), model %+v (found %v)",
					w, target, c.LastSeen, c.Notified, c.Material, ok, want, wantOK)
			}
		}
	}
	m.reset = map[string]bool{}
}

func (m *modelMachine) checkCursor(t *rapid.T, what, w, target string, want modelCursor) {
	c, ok, err := m.g.Engine().Cursor(ctx, w, vigil.MustRef(target))
	if err != nil || !ok || (modelCursor{c.LastSeen, c.Notified, c.Material}) != want {
		t.Fatalf("%s: cursor %d/%d/%d (found %v, %v), model %+v", what, c.LastSeen, c.Notified, c.Material, ok, err, want)
	}
}

// checkSession compares what a person sees of a session with the model:
// whether it exists, its state version, goal and transcript length, and
// that its incarnation id changed exactly when it was reset.
func (m *modelMachine) checkSession(t *rapid.T, key string) {
	st, err := m.g.Status(ctx, m.person.c, gateway.StatusInput{SessionKey: key})
	if err != nil {
		t.Fatalf("status of %s: %v", key, err)
	}
	if st.Exists != m.s.rows[key] || st.StateVersion != m.s.heads[key] {
		t.Fatalf("%s: exists %v at state version %d, model %v at %d", key, st.Exists, st.StateVersion, m.s.rows[key], m.s.heads[key])
	}
	if !st.Exists {
		delete(m.sessionIDs, key)
		return
	}
	goal := ""
	if st.Goal != nil {
		goal = st.Goal.Objective
	}
	if goal != m.s.goals[key] {
		t.Fatalf("%s: goal %q, model %q", key, goal, m.s.goals[key])
	}
	if old, ok := m.sessionIDs[key]; ok && (old != st.SessionID) != m.reset[key] {
		t.Fatalf("%s: incarnation id %q, was %q (reset in this step: %v)", key, st.SessionID, old, m.reset[key])
	}
	m.sessionIDs[key] = st.SessionID
	limit := gateway.MaxPageLimit
	h, err := m.g.History(ctx, m.person.c, gateway.HistoryInput{SessionKey: key, Limit: &limit})
	if err != nil {
		t.Fatalf("history of %s: %v", key, err)
	}
	if len(h.Messages) != m.s.messages[key] || h.Truncated {
		t.Fatalf("%s: %d messages (truncated %v), model %d", key, len(h.Messages), h.Truncated, m.s.messages[key])
	}
}

// checkQueue compares the watcher's queued notices (what its next turn
// gets) with the model's, as a set of (target, text).
func (m *modelMachine) checkQueue(t *rapid.T, w string) {
	p, err := m.g.Pending(ctx, m.person.c, gateway.PendingInput{SessionKey: w})
	if err != nil {
		t.Fatalf("pending of %s: %v", w, err)
	}
	var got, want []string
	for _, e := range p.Events {
		got = append(got, e.Target+" | "+e.Text)
	}
	for _, n := range m.s.queues[w] {
		want = append(want, n.target+" | "+n.text)
	}
	modelSameSet(t, "the queue of "+w, got, want)
}

func modelSameSet(t *rapid.T, what string, got, want []string) {
	g, w := slices.Clone(got), slices.Clone(want)
	sort.Strings(g)
	sort.Strings(w)
	if !slices.Equal(g, w) {
		t.Fatalf("%s:\ngateway %q\nmodel   %q", what, g, w)
	}
}

// TestTheGatewayMatchesAModelOfPreconditionsAndLifecycle drives random
// changes (with and without ifStateVersion, current or stale, and
// ifSynced), goal edits, resets, deletes by a person and by a watcher,
// run ends, watches, turns, status reads and restarts through the
// gateway, and checks each answer (applied, or a conflict with the state
// version and notice it carries) and, after every step, the sessions'
// versions and contents and every watcher's cursors and queued notices
// against a model of the contract.
func TestTheGatewayMatchesAModelOfPreconditionsAndLifecycle(t *testing.T) {
	modelDefaultChecks(t, modelChecks)
	dir := t.TempDir()
	var cov modelCoverage
	var runs atomic.Int64
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		n := runs.Add(1)
		sub := filepath.Join(dir, strconv.FormatInt(n, 10))
		if err := os.Mkdir(sub, 0o755); err != nil {
			rt.Fatal(err)
		}
		defer os.RemoveAll(sub)
		m := &modelMachine{path: filepath.Join(sub, "v.db"), s: newModelState(),
			sessionIDs: map[string]string{}, reset: map[string]bool{}, cov: &cov}
		m.open(rt)
		defer func() { m.closeGW() }()
		m.person = m.resolve(rt, gateway.Principal{Role: gateway.RoleOperator, ID: modelPerson}, "")
		m.manager = m.resolve(rt, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, modelManager)
		m.coord = m.resolve(rt, gateway.Principal{Role: gateway.RoleAgent, ID: "coord", Allow: []string{"main"}}, modelCoord)
		actions := map[string]func(*rapid.T){
			"":            m.check,
			"spawn1":      m.actionSpawn,
			"spawn2":      m.actionSpawn,
			"personSend1": m.actionPersonSend,
			"personSend2": m.actionPersonSend,
			"agentSend1":  m.actionAgentSend,
			"agentSend2":  m.actionAgentSend,
			"goal1":       m.actionGoal,
			"goal2":       m.actionGoal,
			"reset1":      m.actionReset,
			"reset2":      m.actionReset,
			"delete":      m.actionDelete,
			"runEnd":      m.actionRunEnd,
			"turn1":       m.actionTurn,
			"turn2":       m.actionTurn,
			"turn3":       m.actionTurn,
			"watch":       m.actionWatch,
			"status":      m.actionStatus,
			"restart":     m.actionRestart,
		}
		for range modelRounds {
			rt.Repeat(actions)
		}
	})
	t.Logf("%d steps in %d sequences, %v; %v", cov.steps.Load(), runs.Load(), time.Since(start).Round(time.Millisecond), &cov)
}

// modelDefaultChecks sets rapid's number of sequences (-rapid.checks) to n
// until t ends, unless it was given (on the command line, or as
// RAPID_CHECKS).
func modelDefaultChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid has no -rapid.checks flag")
	}
	given := os.Getenv("RAPID_CHECKS") != ""
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "rapid.checks" })
	if given {
		return
	}
	old := f.Value.String()
	if err := f.Value.Set(strconv.Itoa(n)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}
