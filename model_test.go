package vigil_test

// A model-based test: random operations run against the real engine (on a
// fresh store, SQLite or PostgreSQL, with a manual clock) and against a
// small in-memory reference model written from the behaviour contract
// (SPEC.md sections 2-6). After every step the engine's observable state
// (cursors, queued notices, state versions, deltas) must equal the model's.
//
// Where the contract leaves a detail open, the model takes the reading
// written next to it (search for "model decision").

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"pgregory.net/rapid"
)

const (
	// modelRounds is how many rapid Repeat rounds (about 30 steps each by
	// default, see -rapid.steps) one generated sequence runs; with rapid's
	// default 100 checks that is roughly 6,000 steps in total, about 30 s
	// under -race on two cores. Raise -rapid.checks / -rapid.steps for a
	// deeper search.
	modelRounds = 2

	modelRetention  = time.Hour
	modelMaxEvents  = 4
	modelPruneBatch = 3
	modelQueueBound = 20
	modelDay        = 24 * time.Hour
)

// The sessions of the test. Watchers are agent-qualified (one of them is a
// sub-agent); every session, bare ones included, can be a target.
var (
	modelWatchers = []string{"agent:a:main", "agent:b:main", "agent:a:subagent:w3"}
	modelSessions = []vigil.SessionRef{
		{AgentID: "a", Key: "agent:a:main"},
		{AgentID: "b", Key: "agent:b:main"},
		{AgentID: "a", Key: "agent:a:subagent:w3"},
		{AgentID: "b", Key: "agent:b:task"},
		{AgentID: "a", Key: "global"},
		{AgentID: "b", Key: "global"},
	}
	modelRunIDs = []string{"r1", "r2"}
)

type modelEvent struct {
	Seq        int64
	Ref        vigil.SessionRef
	SessionID  string
	Kind       vigil.Kind
	ActorType  vigil.ActorType
	ActorID    string
	RunID      string
	OccurredAt int64
	RecordedAt int64
	Summary    string
	Payload    string
	DedupeKey  string
}

type modelPair struct {
	Watcher string
	Target  vigil.SessionRef
}

type modelCursor struct {
	L, N, M   int64
	UpdatedAt int64
}

type modelNotice struct {
	Target vigil.SessionRef
	Text   string
	// Created marks a creation notice: Target is the session it announces.
	Created bool
}

// modelCreation is a creation notice kept until a turn consumes it.
type modelCreation struct {
	notice modelNotice
	at     int64
}

// modelState is the reference model.
type modelState struct {
	seq        int64 // last global sequence handed out
	events     map[vigil.SessionRef][]modelEvent
	heads      map[vigil.SessionRef]int64
	watermarks map[vigil.SessionRef]int64
	cursors    map[modelPair]modelCursor
	queues     map[string][]modelNotice
	// announced are the sessions whose creation was ever announced, owed
	// the creation notices no turn has consumed yet, by main session.
	announced map[vigil.SessionRef]bool
	owed      map[string][]modelCreation
}

func modelNew() *modelState {
	return &modelState{
		events:     map[vigil.SessionRef][]modelEvent{},
		heads:      map[vigil.SessionRef]int64{},
		watermarks: map[vigil.SessionRef]int64{},
		cursors:    map[modelPair]modelCursor{},
		queues:     map[string][]modelNotice{},
		announced:  map[vigil.SessionRef]bool{},
		owed:       map[string][]modelCreation{},
	}
}

// owes reports whether watcher is owed the creation notice of ref.
func (s *modelState) owes(watcher string, ref vigil.SessionRef) bool {
	for _, c := range s.owed[watcher] {
		if c.notice.Target == ref {
			return true
		}
	}
	return false
}

// deliver takes the creation notice of ref off what watcher is owed.
func (s *modelState) deliver(watcher string, ref vigil.SessionRef) {
	var out []modelCreation
	for _, c := range s.owed[watcher] {
		if c.notice.Target != ref {
			out = append(out, c)
		}
	}
	s.owed[watcher] = out
}

func modelQualified(key string) bool { return strings.HasPrefix(key, "agent:") }

// modelIsSelf reports whether key (an agent-qualified watcher or parent)
// names the session ref.
func modelIsSelf(key string, ref vigil.SessionRef) bool {
	return modelQualified(key) && key == ref.Key
}

// push queues a notice: at most one entry per (watcher, target); a newer
// text for the pair replaces the older one (model decision: in place).
func (s *modelState) push(watcher string, n modelNotice) {
	q := s.queues[watcher]
	for i := range q {
		if q[i].Target == n.Target && q[i].Created == n.Created {
			q[i].Text = n.Text
			return
		}
	}
	q = append(q, n)
	if len(q) > modelQueueBound {
		q = q[len(q)-modelQueueBound:]
	}
	s.queues[watcher] = q
}

func (s *modelState) watchersOf(target vigil.SessionRef) []string {
	var ws []string
	for p := range s.cursors {
		if p.Target == target {
			ws = append(ws, p.Watcher)
		}
	}
	sort.Strings(ws)
	return ws
}

type modelRecordOutcome struct {
	skipped    bool
	appended   bool
	suppressed int        // watchers skipped because they caused the event
	event      modelEvent // zero when skipped
}

// record applies one record at local time now (ms).
func (s *modelState) record(ev modelEvent, parent string, now int64) modelRecordOutcome {
	target := ev.Ref
	material := ev.Kind == vigil.KindHumanDirectMessage || ev.Kind == vigil.KindGoalChanged
	watchers := s.watchersOf(target)
	// Unwatched sessions (no parent, no cursor on them) stay write-free.
	if ev.Kind == vigil.KindHumanDirectMessage && parent == "" && len(watchers) == 0 {
		return modelRecordOutcome{skipped: true}
	}
	s.seq++ // a dedupe drop still uses the number up
	ev.Seq = s.seq
	if ev.DedupeKey != "" {
		// model decision: a dedupe key is scoped to its session and matches
		// retained events (a pruned or deleted event no longer dedupes).
		for _, old := range s.events[target] {
			if old.DedupeKey == ev.DedupeKey {
				return modelRecordOutcome{event: old}
			}
		}
	}
	ev.RecordedAt = now
	s.events[target] = append(s.events[target], ev)
	s.heads[target] = ev.Seq
	parentWatches := modelQualified(parent) && !modelIsSelf(parent, target)
	suppressed := 0
	switch {
	case ev.Kind == vigil.KindChildSpawned:
		if parentWatches {
			s.cursors[modelPair{parent, target}] = modelCursor{ev.Seq, ev.Seq, ev.Seq, now}
		}
	case material:
		if parentWatches {
			found := false
			for _, w := range watchers {
				found = found || w == parent
			}
			if !found {
				watchers = append(watchers, parent)
			}
		}
		for _, w := range watchers {
			if w == ev.ActorID { // self-suppression, exact match
				suppressed++
				continue
			}
			p := modelPair{w, target}
			c := s.cursors[p] // a missing cursor starts at L = N = M = 0
			if c.N == c.L {
				c.N = ev.Seq
			}
			c.M = ev.Seq
			c.UpdatedAt = now
			s.cursors[p] = c
			s.push(w, modelNotice{Target: target, Text: vigil.NoticeText(target.Key, c.L)})
		}
	}
	return modelRecordOutcome{appended: true, event: ev, suppressed: suppressed}
}

// drain is the watcher's turn consuming its queue.
func (s *modelState) drain(watcher string, now int64) (taken []modelNotice, followUps []modelNotice) {
	queued := s.queues[watcher]
	delete(s.queues, watcher)
	for _, n := range queued {
		if n.Created {
			// Delivered when still owed: not when it expired meanwhile.
			if s.owes(watcher, n.Target) {
				s.deliver(watcher, n.Target)
				taken = append(taken, n)
			}
			continue
		}
		taken = append(taken, n)
		p := modelPair{watcher, n.Target}
		c, ok := s.cursors[p]
		if !ok {
			continue
		}
		oldN := c.N
		c.L = oldN
		if c.M > c.N {
			c.N = c.M
		}
		// model decision: an acknowledgement always counts as an update.
		c.UpdatedAt = now
		s.cursors[p] = c
		if c.M > oldN {
			f := modelNotice{Target: n.Target, Text: vigil.NoticeText(n.Target.Key, c.L)}
			followUps = append(followUps, f)
			s.push(watcher, f)
		}
	}
	return taken, followUps
}

func (s *modelState) watch(watcher string, target vigil.SessionRef, now int64) modelCursor {
	p := modelPair{watcher, target}
	if c, ok := s.cursors[p]; ok {
		return c
	}
	v := s.heads[target]
	c := modelCursor{v, v, v, now}
	s.cursors[p] = c
	return c
}

func (s *modelState) removeNotices(watcher string, target vigil.SessionRef) {
	q := s.queues[watcher]
	var out []modelNotice
	for _, n := range q {
		if n.Target != target || n.Created {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		delete(s.queues, watcher)
	} else {
		s.queues[watcher] = out
	}
}

func (s *modelState) unwatch(watcher string, target vigil.SessionRef) bool {
	p := modelPair{watcher, target}
	_, ok := s.cursors[p]
	delete(s.cursors, p)
	s.removeNotices(watcher, target)
	return ok
}

func (s *modelState) reset(ref vigil.SessionRef) {
	if !modelQualified(ref.Key) {
		return // a bare session never watches
	}
	for p := range s.cursors {
		if p.Watcher == ref.Key {
			delete(s.cursors, p)
		}
	}
	delete(s.queues, ref.Key)
	delete(s.owed, ref.Key) // its creation notices go with its queue
}

func (s *modelState) deleteSession(ref vigil.SessionRef) {
	delete(s.events, ref)
	delete(s.heads, ref)
	delete(s.watermarks, ref)
	for p := range s.cursors {
		if p.Target == ref || modelIsSelf(p.Watcher, ref) {
			delete(s.cursors, p)
		}
	}
	if modelQualified(ref.Key) {
		delete(s.queues, ref.Key) // the deleted session's own queue
		delete(s.owed, ref.Key)
	}
}

// restart drops every queue; each cursor with M > L gets N := M, counts
// as updated, and has its notice queued again.
func (s *modelState) restart(now int64) {
	s.queues = map[string][]modelNotice{}
	for w, cs := range s.owed {
		for _, c := range cs {
			s.push(w, c.notice)
		}
	}
	pairs := make([]modelPair, 0, len(s.cursors))
	for p := range s.cursors {
		pairs = append(pairs, p)
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].Watcher != pairs[j].Watcher {
			return pairs[i].Watcher < pairs[j].Watcher
		}
		return pairs[i].Target.String() < pairs[j].Target.String()
	})
	for _, p := range pairs {
		c := s.cursors[p]
		if c.M <= c.L {
			continue
		}
		c.N = c.M
		c.UpdatedAt = now // the sweep counts as an update (SPEC 3)
		s.cursors[p] = c
		s.push(p.Watcher, modelNotice{Target: p.Target, Text: vigil.NoticeText(p.Target.Key, c.L)})
	}
}

// prune applies retention at local time now.
func (s *modelState) prune(now int64) (byAge, byCount, expired int) {
	cutoff := now - modelRetention.Milliseconds()
	var all []modelEvent
	for _, evs := range s.events {
		all = append(all, evs...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Seq < all[j].Seq })
	drop := 0
	for drop < len(all) && all[drop].RecordedAt < cutoff {
		drop++
	}
	byAge = drop
	if rest := len(all) - drop; rest > modelMaxEvents {
		byCount = rest - modelMaxEvents
		drop += byCount
	}
	for _, ev := range all[:drop] {
		s.watermarks[ev.Ref] = max(s.watermarks[ev.Ref], ev.Seq)
	}
	if drop > 0 {
		s.events = map[vigil.SessionRef][]modelEvent{}
		for _, ev := range all[drop:] {
			s.events[ev.Ref] = append(s.events[ev.Ref], ev)
		}
	}
	for p, c := range s.cursors {
		if c.UpdatedAt < cutoff {
			delete(s.cursors, p)
			expired++
		}
	}
	return byAge, byCount, expired
}

// create applies a session's creation at local time now and returns the
// notice it queued, "" when none.
func (s *modelState) create(c vigil.Creation, now int64) (recorded modelRecordOutcome, notice string) {
	ref := c.Session
	if c.Creator != nil {
		recorded = s.record(modelEvent{Ref: ref, SessionID: c.SessionID, Kind: vigil.KindCreated, ActorType: c.Creator.Type,
			ActorID: c.Creator.ID, OccurredAt: now, Summary: "session created",
			DedupeKey: "created:" + ref.AgentID + ":" + ref.Key + ":" + c.SessionID}, "", now)
	}
	main := "agent:" + ref.AgentID + ":main"
	if c.NoNotice || ref.Key == main || s.announced[ref] {
		return recorded, ""
	}
	s.announced[ref] = true
	n := modelNotice{Target: ref, Text: vigil.CreationNoticeText(c), Created: true}
	s.owed[main] = append(s.owed[main], modelCreation{n, now})
	s.push(main, n)
	return recorded, n.Text
}

// modelCoverage counts interesting situations across all sequences, so the
// log shows that the random walk really reaches them.
type modelCoverage struct {
	steps, skipped, deduped, selfSuppressed, followUps, staleAcks atomic.Int64
	prunedByAge, prunedByCount, expiredCursors, historyGaps       atomic.Int64
	restartRequeued, truncatedPages                               atomic.Int64
	announced                                                     atomic.Int64
}

func (c *modelCoverage) String() string {
	return fmt.Sprintf("skipped=%d deduped=%d selfSuppressed=%d followUps=%d staleAcks=%d prunedByAge=%d "+
		"prunedByCount=%d expiredCursors=%d historyGaps=%d restartRequeued=%d truncatedPages=%d announced=%d",
		c.skipped.Load(), c.deduped.Load(), c.selfSuppressed.Load(), c.followUps.Load(), c.staleAcks.Load(),
		c.prunedByAge.Load(), c.prunedByCount.Load(), c.expiredCursors.Load(), c.historyGaps.Load(),
		c.restartRequeued.Load(), c.truncatedPages.Load(), c.announced.Load())
}

// modelMachine drives the engine and the model side by side.
type modelMachine struct {
	ctx      context.Context
	env      *testEnv
	s        *modelState
	prevVers map[vigil.SessionRef]int64
	deleted  map[vigil.SessionRef]bool // deleted by the current step
	replay   []vigil.Record            // earlier records with a dedupe key
	cov      *modelCoverage
}

func (m *modelMachine) now() int64 { return m.env.clk.Now().UnixMilli() }

func modelDrawSession(t *rapid.T, label string) vigil.SessionRef {
	return rapid.SampledFrom(modelSessions).Draw(t, label)
}

func modelDrawWatcher(t *rapid.T, label string) string {
	return rapid.SampledFrom(modelWatchers).Draw(t, label)
}

// modelDrawParent draws a watcher other than the session itself.
func modelDrawParent(t *rapid.T, target vigil.SessionRef) string {
	var ps []string
	for _, w := range modelWatchers {
		if !modelIsSelf(w, target) {
			ps = append(ps, w)
		}
	}
	return rapid.SampledFrom(ps).Draw(t, "parent")
}

func (m *modelMachine) actionRecord(t *rapid.T) {
	m.cov.steps.Add(1)
	if len(m.replay) > 0 && rapid.IntRange(0, 3).Draw(t, "replay") == 0 {
		// A producer repeating itself: the same record (same dedupe key)
		// again, now.
		r := rapid.SampledFrom(m.replay).Draw(t, "replayed")
		r.OccurredAt = time.Time{}
		m.recordAndCheck(t, r)
		return
	}
	target := modelDrawSession(t, "target")
	kind := rapid.SampledFrom([]vigil.Kind{
		vigil.KindHumanDirectMessage, vigil.KindHumanDirectMessage, vigil.KindHumanDirectMessage,
		vigil.KindGoalChanged, vigil.KindGoalChanged, vigil.KindGoalChanged,
		vigil.KindChildSpawned, vigil.KindRunCompleted, vigil.KindRunFailed, vigil.KindCompacted,
	}).Draw(t, "kind")
	nowT := m.env.clk.Now()
	r := vigil.Record{Session: target, Kind: kind, SessionID: rapid.SampledFrom([]string{"", "s1", "s2"}).Draw(t, "sessionId")}
	// occurredAt: zero (now), in range, in the future, or too old.
	switch rapid.IntRange(0, 3).Draw(t, "occurredAt") {
	case 1:
		r.OccurredAt = nowT.Add(-5 * time.Minute)
	case 2:
		r.OccurredAt = nowT.Add(time.Hour)
	case 3:
		r.OccurredAt = nowT.Add(-2 * modelDay)
	}
	maybeParent := func() {
		if rapid.Bool().Draw(t, "hasParent") {
			r.Parent = modelDrawParent(t, target)
		}
	}
	runID := rapid.SampledFrom(modelRunIDs).Draw(t, "runId")
	switch kind {
	case vigil.KindHumanDirectMessage:
		r.ActorType, r.Summary, r.Payload = vigil.ActorHuman, "human message via telegram", []byte(`{"channel":"telegram"}`)
		maybeParent()
	case vigil.KindGoalChanged:
		r.ActorType = rapid.SampledFrom([]vigil.ActorType{vigil.ActorHuman, vigil.ActorAgent, vigil.ActorSystem}).Draw(t, "actorType")
		// Sometimes a watcher's key, to exercise self-suppression.
		r.ActorID = rapid.SampledFrom(append([]string{"", "", "agent:c:main"}, modelWatchers...)).Draw(t, "actorId")
		r.Summary = "goal updated"
		if rapid.IntRange(0, 3).Draw(t, "goalDedupe") == 0 {
			r.DedupeKey = fmt.Sprintf("goal:%d", rapid.IntRange(1, 2).Draw(t, "goalOp"))
		}
		maybeParent()
	case vigil.KindChildSpawned:
		r.Parent = modelDrawParent(t, target)
		r.ActorType, r.ActorID, r.RunID = vigil.ActorAgent, r.Parent, runID
		r.Summary, r.DedupeKey = "child session spawned", "child-spawned:"+runID
	case vigil.KindRunCompleted:
		r.ActorType, r.RunID, r.Summary = vigil.ActorSystem, runID, "child run completed"
		r.Payload, r.DedupeKey = []byte(`{"outcome":"completed"}`), "run-terminal:"+runID
		maybeParent()
	case vigil.KindRunFailed:
		outcome := rapid.SampledFrom([]string{vigil.OutcomeError, vigil.OutcomeTimeout, vigil.OutcomeCancelled}).Draw(t, "outcome")
		r.ActorType, r.RunID, r.Summary = vigil.ActorSystem, runID, "child run "+outcome
		r.Payload, r.DedupeKey = []byte(`{"outcome":"`+outcome+`"}`), "run-terminal:"+runID
		maybeParent()
	case vigil.KindCompacted:
		op := rapid.IntRange(1, 3).Draw(t, "compactionOp")
		r.ActorType, r.Summary = vigil.ActorSystem, "session compacted"
		r.Payload, r.DedupeKey = []byte(fmt.Sprintf(`{"turns":%d}`, 10*op)), fmt.Sprintf("compacted:%d", op)
	}
	if r.DedupeKey != "" {
		m.replay = append(m.replay, r)
	}
	m.recordAndCheck(t, r)
}

// recordAndCheck records r on the engine and the model and compares the
// outcomes.
func (m *modelMachine) recordAndCheck(t *rapid.T, r vigil.Record) {
	target, kind, nowT := r.Session, r.Kind, m.env.clk.Now()

	now := nowT.UnixMilli()
	occ := now
	if !r.OccurredAt.IsZero() {
		occ = min(max(r.OccurredAt.UnixMilli(), now-modelDay.Milliseconds()), now)
	}
	want := m.s.record(modelEvent{
		Ref: target, SessionID: r.SessionID, Kind: kind, ActorType: r.ActorType, ActorID: r.ActorID,
		RunID: r.RunID, OccurredAt: occ, Summary: r.Summary, Payload: string(r.Payload), DedupeKey: r.DedupeKey,
	}, r.Parent, now)

	got, err := m.env.eng.Record(m.ctx, r)
	if err != nil {
		t.Fatalf("record %s on %s: %v", kind, target, err)
	}
	if got.Skipped != want.skipped || got.Appended != want.appended {
		t.Fatalf("record %s on %s (parent %q): skipped=%v appended=%v, model skipped=%v appended=%v",
			kind, target, r.Parent, got.Skipped, got.Appended, want.skipped, want.appended)
	}
	m.cov.selfSuppressed.Add(int64(want.suppressed))
	if !want.skipped && !want.appended {
		m.cov.deduped.Add(1)
	}
	if want.skipped {
		m.cov.skipped.Add(1)
		if got.Event.Sequence != 0 {
			t.Fatalf("skipped record returned event %d", got.Event.Sequence)
		}
		return
	}
	modelCheckEvent(t, "record result", got.Event, want.event)
}

func (m *modelMachine) actionWatch(t *rapid.T) {
	m.cov.steps.Add(1)
	watcher := rapid.SampledFrom(append([]string{"global"}, modelWatchers...)).Draw(t, "watcher")
	target := modelDrawSession(t, "target")
	c, err := m.env.eng.Watch(m.ctx, watcher, target)
	switch {
	case !modelQualified(watcher):
		if !errors.Is(err, vigil.ErrWatcherNotQualified) {
			t.Fatalf("watch by bare %q: err %v, want ErrWatcherNotQualified", watcher, err)
		}
		return
	case modelIsSelf(watcher, target):
		if !errors.Is(err, vigil.ErrSelfWatch) {
			t.Fatalf("self-watch %q: err %v, want ErrSelfWatch", watcher, err)
		}
		return
	case err != nil:
		t.Fatalf("watch %s -> %s: %v", watcher, target, err)
	}
	want := m.s.watch(watcher, target, m.now())
	if got := (modelCursor{c.LastSeen, c.Notified, c.Material, c.UpdatedAt}); got != want {
		t.Fatalf("watch %s -> %s returned %+v, model %+v", watcher, target, got, want)
	}
}

func (m *modelMachine) actionUnwatch(t *rapid.T) {
	m.cov.steps.Add(1)
	watcher := modelDrawWatcher(t, "watcher")
	target := modelDrawSession(t, "target")
	existed, err := m.env.eng.Unwatch(m.ctx, watcher, target)
	if modelIsSelf(watcher, target) {
		if !errors.Is(err, vigil.ErrSelfWatch) {
			t.Fatalf("self-unwatch %q: err %v, want ErrSelfWatch", watcher, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("unwatch %s -> %s: %v", watcher, target, err)
	}
	if want := m.s.unwatch(watcher, target); existed != want {
		t.Fatalf("unwatch %s -> %s: existed=%v, model %v", watcher, target, existed, want)
	}
}

func (m *modelMachine) actionDrain(t *rapid.T) {
	m.cov.steps.Add(1)
	watcher := modelDrawWatcher(t, "watcher")
	d, err := m.env.eng.Drain(m.ctx, watcher)
	if err != nil {
		t.Fatalf("drain %s: %v", watcher, err)
	}
	// Only notices whose cursor still exists are acknowledged.
	var wantAck []string
	for _, n := range m.s.queues[watcher] {
		if n.Created {
			continue // a creation notice acknowledges nothing
		}
		c, ok := m.s.cursors[modelPair{watcher, n.Target}]
		if ok {
			wantAck = append(wantAck, n.Target.String())
		}
		if !ok || n.Text != vigil.NoticeText(n.Target.Key, c.L) {
			m.cov.staleAcks.Add(1)
		}
	}
	taken, followUps := m.s.drain(watcher, m.now())
	m.cov.followUps.Add(int64(len(followUps)))
	modelCheckNotices(t, "drained events of "+watcher, d.Events, taken)
	modelCheckNotices(t, "follow-ups of "+watcher, d.FollowUps, followUps)
	var ack []string
	for _, r := range d.Acknowledged {
		ack = append(ack, r.String())
	}
	sort.Strings(ack)
	sort.Strings(wantAck)
	if fmt.Sprint(ack) != fmt.Sprint(wantAck) {
		t.Fatalf("drain %s acknowledged %v, model %v", watcher, ack, wantAck)
	}
}

func (m *modelMachine) actionPeek(t *rapid.T) {
	m.cov.steps.Add(1)
	watcher := modelDrawWatcher(t, "watcher")
	// Looking acknowledges nothing: the check after the step compares every
	// queue and cursor with the model, which is unchanged.
	modelCheckNotices(t, "peek at "+watcher, m.env.eng.Pending(watcher), m.s.queues[watcher])
}

func (m *modelMachine) actionRestart(t *rapid.T) {
	m.cov.steps.Add(1)
	m.env.restart()
	m.s.restart(m.now())
	for _, q := range m.s.queues {
		m.cov.restartRequeued.Add(int64(len(q)))
	}
}

func (m *modelMachine) actionReset(t *rapid.T) {
	m.cov.steps.Add(1)
	ref := modelDrawSession(t, "session")
	if err := m.env.eng.ResetSession(m.ctx, ref); err != nil {
		t.Fatalf("reset %s: %v", ref, err)
	}
	m.s.reset(ref)
}

func (m *modelMachine) actionDelete(t *rapid.T) {
	m.cov.steps.Add(1)
	ref := modelDrawSession(t, "session")
	if err := m.env.eng.DeleteSession(m.ctx, ref); err != nil {
		t.Fatalf("delete %s: %v", ref, err)
	}
	m.s.deleteSession(ref)
	m.deleted[ref] = true
}

func (m *modelMachine) actionPrune(t *rapid.T) {
	m.cov.steps.Add(1)
	st, err := m.env.eng.Prune(m.ctx)
	if err != nil {
		t.Fatalf("prune: %v", err)
	}
	byAge, byCount, expired := m.s.prune(m.now())
	m.cov.prunedByAge.Add(int64(byAge))
	m.cov.prunedByCount.Add(int64(byCount))
	m.cov.expiredCursors.Add(int64(expired))
	if st.ByAge != byAge || st.ByCount != byCount || st.ExpiredCursors != expired {
		t.Fatalf("prune: byAge=%d byCount=%d expiredCursors=%d, model %d %d %d",
			st.ByAge, st.ByCount, st.ExpiredCursors, byAge, byCount, expired)
	}
}

// actionCreate creates a session, with or without a creator, now and then
// with its notice turned off.
func (m *modelMachine) actionCreate(t *rapid.T) {
	m.cov.steps.Add(1)
	c := vigil.Creation{Session: modelDrawSession(t, "session"), SessionID: rapid.SampledFrom([]string{"s1", "s2"}).Draw(t, "sessionId"),
		Label: rapid.SampledFrom([]string{"", "Plan", "<b>x</b>"}).Draw(t, "label"), Via: rapid.SampledFrom([]string{"", "spawn", "operator"}).Draw(t, "via"),
		NoNotice: rapid.IntRange(0, 5).Draw(t, "noNotice") == 0}
	if rapid.Bool().Draw(t, "hasCreator") {
		c.Creator = &vigil.Creator{Type: rapid.SampledFrom([]vigil.ActorType{vigil.ActorHuman, vigil.ActorAgent, vigil.ActorSystem}).Draw(t, "creatorType"),
			ID: rapid.SampledFrom(append([]string{"", "alice"}, modelWatchers...)).Draw(t, "creatorId")}
	}
	got, err := m.env.eng.RecordCreation(m.ctx, c)
	if err != nil {
		t.Fatalf("create %s: %v", c.Session, err)
	}
	want, notice := m.s.create(c, m.now())
	if got.Notice != notice {
		t.Fatalf("create %s queued %q, model %q", c.Session, got.Notice, notice)
	}
	if notice != "" {
		m.cov.announced.Add(1)
	}
	if got.Recorded.Appended != want.appended {
		t.Fatalf("create %s: appended=%v, model %v", c.Session, got.Recorded.Appended, want.appended)
	}
	if want.appended || want.event.Seq != 0 {
		modelCheckEvent(t, "created", got.Recorded.Event, want.event)
	}
}

func (m *modelMachine) actionAdvanceClock(t *rapid.T) {
	m.cov.steps.Add(1)
	var d time.Duration
	switch rapid.IntRange(0, 6).Draw(t, "jump") {
	case 0, 1:
		d = time.Duration(rapid.Int64Range(0, 120_000).Draw(t, "ms")) * time.Millisecond
	case 2:
		d = time.Duration(rapid.IntRange(5, 30).Draw(t, "min")) * time.Minute
	case 3:
		d = time.Duration(rapid.IntRange(30, 59).Draw(t, "min")) * time.Minute
	case 4, 5: // beyond the retention period
		d = modelRetention + time.Duration(rapid.IntRange(0, 120).Draw(t, "min"))*time.Minute
	case 6: // a local clock stepped back: recording times are then out of
		// sequence order, which the oldest-first pruning rule must handle
		back := time.Duration(rapid.IntRange(1, 90).Draw(t, "backMin")) * time.Minute
		m.env.clk.Set(m.env.clk.Now().Add(-back))
		return
	}
	m.env.clk.Advance(d)
}

// check compares everything observable with the model after every step.
func (m *modelMachine) check(t *rapid.T) {
	m.checkCursors(t)
	m.checkQueues(t)
	m.checkVersions(t)
	m.checkDeltas(t)
}

func (m *modelMachine) checkCursors(t *rapid.T) {
	got := map[modelPair]modelCursor{}
	for _, ref := range modelSessions {
		cs, err := m.env.eng.Cursors(m.ctx, ref)
		if err != nil {
			t.Fatalf("cursors of %s: %v", ref, err)
		}
		for _, c := range cs {
			if !(c.LastSeen <= c.Notified && c.Notified <= c.Material) {
				t.Fatalf("cursor %s -> %s breaks L <= N <= M: %d %d %d", c.Watcher, c.Target, c.LastSeen, c.Notified, c.Material)
			}
			if !modelQualified(c.Watcher) {
				t.Fatalf("cursor held by bare key %q", c.Watcher)
			}
			got[modelPair{c.Watcher, c.Target}] = modelCursor{c.LastSeen, c.Notified, c.Material, c.UpdatedAt}
		}
	}
	if fmt.Sprint(modelSortedCursors(got)) != fmt.Sprint(modelSortedCursors(m.s.cursors)) {
		t.Fatalf("cursors differ:\nengine %v\nmodel  %v", modelSortedCursors(got), modelSortedCursors(m.s.cursors))
	}
	// One point read through engine.Cursor as well.
	w := modelDrawWatcher(t, "checkWatcher")
	ref := modelDrawSession(t, "checkTarget")
	if !modelIsSelf(w, ref) {
		c, ok, err := m.env.eng.Cursor(m.ctx, w, ref)
		if err != nil {
			t.Fatalf("cursor %s -> %s: %v", w, ref, err)
		}
		want, wantOK := m.s.cursors[modelPair{w, ref}]
		if ok != wantOK || (ok && (modelCursor{c.LastSeen, c.Notified, c.Material, c.UpdatedAt}) != want) {
			t.Fatalf("cursor %s -> %s: %+v (found %v), model %+v (found %v)", w, ref, c, ok, want, wantOK)
		}
	}
}

func (m *modelMachine) checkQueues(t *rapid.T) {
	for _, ref := range modelSessions {
		if !modelQualified(ref.Key) {
			continue
		}
		q := m.env.eng.Pending(ref.Key)
		seen := map[vigil.SessionRef]bool{}
		for _, e := range q {
			if _, created := e.Created(); created {
				continue
			}
			if !e.IsNotice() {
				t.Fatalf("queue of %s holds a non-notice %q", ref.Key, e.Text)
			}
			if seen[*e.Target] {
				t.Fatalf("queue of %s holds two notices about %s: %v", ref.Key, *e.Target, modelTexts(q))
			}
			seen[*e.Target] = true
			if e.ContextKey != vigil.NoticeContextKey(e.Target.Key) {
				t.Fatalf("notice about %s has context key %q", *e.Target, e.ContextKey)
			}
		}
		modelCheckNotices(t, "queue of "+ref.Key, q, m.s.queues[ref.Key])
	}
	// Every material event not caused by the watcher stays announced until
	// acknowledged: a cursor with M > L has its notice queued, with L.
	for p, c := range m.s.cursors {
		if c.M <= c.L {
			continue
		}
		want := vigil.NoticeText(p.Target.Key, c.L)
		found := false
		for _, e := range m.env.eng.Pending(p.Watcher) {
			if e.Target != nil && *e.Target == p.Target && e.Text == want {
				found = true
			}
		}
		if !found {
			t.Fatalf("cursor %s -> %s is behind (L=%d, M=%d) but no notice %q is queued", p.Watcher, p.Target, c.L, c.M, want)
		}
	}
}

func (m *modelMachine) checkVersions(t *rapid.T) {
	vs, err := m.env.eng.Versions(m.ctx, modelSessions)
	if err != nil {
		t.Fatalf("versions: %v", err)
	}
	for _, ref := range modelSessions {
		v := vs[ref]
		if prev := m.prevVers[ref]; v < prev && !(v == 0 && m.deleted[ref]) {
			t.Fatalf("state version of %s fell from %d to %d", ref, prev, v)
		}
		if want := m.s.heads[ref]; v != want {
			t.Fatalf("state version of %s is %d, model %d", ref, v, want)
		}
	}
	m.prevVers = vs
	m.deleted = map[vigil.SessionRef]bool{}
}

func (m *modelMachine) checkDeltas(t *rapid.T) {
	// Every session, from 0, in one page.
	for _, ref := range modelSessions {
		m.checkDelta(t, ref, 0, vigil.MaxDeltaLimit)
	}
	// A random session from a random version, paged with a small limit.
	ref := modelDrawSession(t, "deltaSession")
	var since int64
	switch rapid.IntRange(0, 2).Draw(t, "sinceKind") {
	case 0:
		since = rapid.Int64Range(0, m.s.seq+1).Draw(t, "since")
	case 1:
		since = max(0, m.s.watermarks[ref]+rapid.Int64Range(-1, 1).Draw(t, "sinceNearWatermark"))
	case 2:
		since = m.s.heads[ref]
	}
	m.checkDelta(t, ref, since, rapid.IntRange(1, 4).Draw(t, "limit"))
}

// checkDelta pages through ref's changes after since and compares every
// page and the whole with the model.
func (m *modelMachine) checkDelta(t *rapid.T, ref vigil.SessionRef, since int64, limit int) {
	var want []modelEvent
	for _, ev := range m.s.events[ref] {
		if ev.Seq > since {
			want = append(want, ev)
		}
	}
	head, wm := m.s.heads[ref], m.s.watermarks[ref]
	var earliest int64
	if evs := m.s.events[ref]; len(evs) > 0 {
		earliest = evs[0].Seq
	} else if head > 0 {
		earliest = head + 1
	}
	var all []vigil.Event
	at := since
	for page := 0; ; page++ {
		if page > len(want)+1 {
			t.Fatalf("delta of %s since %d (limit %d) does not end", ref, since, limit)
		}
		d, err := m.env.eng.ChangesSince(m.ctx, ref, at, limit)
		if err != nil {
			t.Fatalf("changesSince %d on %s: %v", at, ref, err)
		}
		where := fmt.Sprintf("delta of %s since %d (limit %d)", ref, at, limit)
		if d.StateVersion != head {
			t.Fatalf("%s: stateVersion %d, model %d", where, d.StateVersion, head)
		}
		if d.HistoryGap {
			m.cov.historyGaps.Add(1)
		}
		if d.Truncated {
			m.cov.truncatedPages.Add(1)
		}
		if d.HistoryGap != (at < wm) {
			t.Fatalf("%s: historyGap %v, model pruned watermark %d", where, d.HistoryGap, wm)
		}
		if d.EarliestAvailableSequence != earliest {
			t.Fatalf("%s: earliestAvailableSequence %d, model %d", where, d.EarliestAvailableSequence, earliest)
		}
		if len(d.Events) > limit {
			t.Fatalf("%s: %d events, more than the limit", where, len(d.Events))
		}
		remaining := len(want) - len(all)
		if d.Truncated != (remaining > limit) {
			t.Fatalf("%s: truncated %v with %d events remaining in the model", where, d.Truncated, remaining)
		}
		prev := at
		for _, ev := range d.Events {
			if ev.Sequence <= prev {
				t.Fatalf("%s: sequences not ascending and after since: %v", where, modelEventSeqs(d.Events))
			}
			prev = ev.Sequence
		}
		all = append(all, d.Events...)
		if !d.Truncated {
			if d.NextChangesSince != max(head, at) {
				t.Fatalf("%s: nextChangesSince %d, want %d", where, d.NextChangesSince, max(head, at))
			}
			break
		}
		if d.NextChangesSince != d.Events[len(d.Events)-1].Sequence {
			t.Fatalf("%s: truncated, nextChangesSince %d is not the last sequence", where, d.NextChangesSince)
		}
		at = d.NextChangesSince
	}
	if len(all) != len(want) {
		t.Fatalf("delta of %s since %d: sequences %v, model %v", ref, since, modelEventSeqs(all), modelSeqs(want))
	}
	for i := range all {
		modelCheckEvent(t, fmt.Sprintf("delta of %s since %d", ref, since), all[i], want[i])
	}
}

func modelSeqs(evs []modelEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func modelEventSeqs(evs []vigil.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Sequence
	}
	return out
}

func modelTexts(evs []vigil.SystemEvent) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%v: %s", e.Target, e.Text)
	}
	return out
}

func modelCheckEvent(t *rapid.T, where string, got vigil.Event, want modelEvent) {
	g := modelEvent{
		Seq: got.Sequence, Ref: got.Session(), SessionID: got.SessionID, Kind: got.Kind, ActorType: got.ActorType,
		ActorID: got.ActorID, RunID: got.RunID, OccurredAt: got.OccurredAt, RecordedAt: got.RecordedAt,
		Summary: got.Summary, Payload: string(got.Payload), DedupeKey: got.DedupeKey,
	}
	if g != want {
		t.Fatalf("%s: event\n%+v\nmodel\n%+v", where, g, want)
	}
}

// modelCheckNotices compares queued entries with the model's as sets of
// (target, text): the contract fixes one entry per pair, not an order.
func modelCheckNotices(t *rapid.T, where string, got []vigil.SystemEvent, want []modelNotice) {
	var g, w []string
	for _, e := range got {
		if s, ok := e.Created(); ok {
			g = append(g, "created "+s.String()+" | "+e.Text)
			continue
		}
		if e.Target == nil {
			t.Fatalf("%s: non-notice entry %q", where, e.Text)
		}
		g = append(g, e.Target.String()+" | "+e.Text)
	}
	for _, n := range want {
		if n.Created {
			w = append(w, "created "+n.Target.String()+" | "+n.Text)
			continue
		}
		w = append(w, n.Target.String()+" | "+n.Text)
	}
	sort.Strings(g)
	sort.Strings(w)
	if strings.Join(g, "\n") != strings.Join(w, "\n") {
		t.Fatalf("%s:\nengine %q\nmodel  %q", where, g, w)
	}
}

func modelSortedCursors(cs map[modelPair]modelCursor) []string {
	out := make([]string, 0, len(cs))
	for p, c := range cs {
		out = append(out, fmt.Sprintf("%s->%s L=%d N=%d M=%d at=%d", p.Watcher, p.Target, c.L, c.N, c.M, c.UpdatedAt))
	}
	sort.Strings(out)
	return out
}

// TestEngineMatchesReferenceModel drives random records of every kind,
// watches, unwatches, drains, peeks, restarts, resets, deletes, prunes and
// clock jumps against the engine and an independent model of the contract,
// and checks after every step that cursors, queued notices (one per pair,
// exact texts, every unacknowledged material change announced), state
// versions and paged deltas (ordered, complete within retention, exact
// historyGap) match.
//
// On PostgreSQL (under TestRulesOnPostgreSQL) it runs a fifth of the
// sequences, about 10 s under -race: there every step costs round trips to
// the server.
func TestEngineMatchesReferenceModel(t *testing.T) {
	if backendOf(t) == backendPostgres {
		modelFewerChecks(t, 5)
	}
	var cov modelCoverage
	var runs atomic.Int64
	start := time.Now()
	rapid.Check(t, func(rt *rapid.T) {
		runs.Add(1)
		// Inline upkeep: the sweep's touch of the cursors it re-notifies
		// is done when Open returns, so every check sees it.
		env := newEnv(t, vigil.Options{
			Retention:         modelRetention,
			MaxEvents:         modelMaxEvents,
			PruneBatch:        modelPruneBatch,
			QueueBound:        modelQueueBound,
			InlineMaintenance: true,
		})
		defer env.close()
		m := &modelMachine{
			ctx: context.Background(), env: env, s: modelNew(),
			prevVers: map[vigil.SessionRef]int64{}, deleted: map[vigil.SessionRef]bool{}, cov: &cov,
		}
		actions := map[string]func(*rapid.T){
			"":              m.check,
			"record1":       m.actionRecord,
			"record2":       m.actionRecord,
			"record3":       m.actionRecord,
			"record4":       m.actionRecord,
			"record5":       m.actionRecord,
			"record6":       m.actionRecord,
			"create":        m.actionCreate,
			"watch1":        m.actionWatch,
			"watch2":        m.actionWatch,
			"unwatch":       m.actionUnwatch,
			"drain1":        m.actionDrain,
			"drain2":        m.actionDrain,
			"peek":          m.actionPeek,
			"restart":       m.actionRestart,
			"reset":         m.actionReset,
			"delete":        m.actionDelete,
			"prune":         m.actionPrune,
			"advanceClock":  m.actionAdvanceClock,
			"advanceClock2": m.actionAdvanceClock,
		}
		for range modelRounds {
			rt.Repeat(actions)
		}
	})
	t.Logf("%d steps in %d sequences, %v; %v", cov.steps.Load(), runs.Load(), time.Since(start).Round(time.Millisecond), &cov)
}

// modelFewerChecks divides rapid's number of sequences (-rapid.checks) by
// div until t ends.
func modelFewerChecks(t *testing.T, div int) {
	f := flag.Lookup("rapid.checks")
	if f == nil {
		t.Fatal("rapid has no -rapid.checks flag")
	}
	old := f.Value.String()
	n, err := strconv.Atoi(old)
	if err != nil {
		t.Fatalf("-rapid.checks=%s: %v", old, err)
	}
	if err := f.Value.Set(strconv.Itoa(max(1, n/div))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Value.Set(old) })
}
