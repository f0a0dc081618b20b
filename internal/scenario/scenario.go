// Package scenario replays scenario files (lists of operations on sessions)
// against a fresh engine and prints one JSON line per operation. It backs
// `vigil sim` and the scenario tests.
//
// Files are read by the strict rules of JSON v2 (see strict); output lines
// are written with encoding/json, whose rules the engine's types are
// tagged for.
package scenario

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/store/sqlitestore"
)

// Start is the virtual clock's reading when a scenario begins.
var Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// File is a scenario file: a JSON array of ops, or an object with a
// "description" and an "ops" array.
type File struct {
	Description string           `json:"description"`
	Ops         []jsontext.Value `json:"ops"`
}

// strict are the decoding rules for everything read from a scenario file:
// invalid UTF-8 and duplicate member names are refused (the JSON v2
// defaults), names match their fields exactly (no case folding), and a
// member no field names is refused.
var strict = json.JoinOptions(
	jsontext.AllowInvalidUTF8(false),
	jsontext.AllowDuplicateNames(false),
	json.MatchCaseInsensitiveNames(false),
	json.RejectUnknownMembers(true),
)

// Parse decodes a scenario file, naming what is wrong with it. Every op
// must be a JSON object; its fields are decoded when it runs (Step).
func Parse(data []byte) (File, error) {
	var f File
	var err error
	switch kind := jsontext.Value(bytes.TrimLeft(data, " \t\r\n")).Kind(); kind {
	case '[':
		err = json.Unmarshal(data, &f.Ops, strict)
	case '{':
		err = json.Unmarshal(data, &f, strict)
		if err == nil && f.Ops == nil {
			return File{}, errors.New(`scenario has no "ops" list`)
		}
	default:
		return File{}, errors.New(`scenario is neither a JSON array of ops nor an object with an "ops" list`)
	}
	if err != nil {
		return File{}, fmt.Errorf("scenario is not a valid scenario file: %s", describe(err, fieldsOf(File{})))
	}
	if f.Ops == nil {
		f.Ops = []jsontext.Value{}
	}
	for i, raw := range f.Ops {
		if raw.Kind() != '{' {
			return File{}, fmt.Errorf("scenario op %d is %s, not a JSON object", i, raw)
		}
	}
	return f, nil
}

// decodeStrict decodes one JSON object into v by the strict rules, with
// an error that names the field at fault.
func decodeStrict(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v, strict); err != nil {
		return errors.New(describe(err, fieldsOf(v)))
	}
	return nil
}

// describe words a decoding error by the field it concerns: an unknown
// name, with the field it differs from only in case if there is one, or
// the field whose value is at fault.
func describe(err error, fields []string) string {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		name := se.JSONPointer.LastToken()
		if errors.Is(se.Err, json.ErrUnknownName) {
			for _, f := range fields {
				if strings.EqualFold(f, name) {
					return fmt.Sprintf("unknown field %q (names are case-sensitive: the field is %q)", name, f)
				}
			}
			return fmt.Sprintf("unknown field %q", name)
		}
		got := kindName(se.JSONKind)
		if len(se.JSONValue) > 0 {
			got = string(se.JSONValue)
		}
		return fmt.Sprintf("field %q: got %s, want %s", string(se.JSONPointer), got, typeName(se.GoType))
	}
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) && syn.JSONPointer != "" {
		return fmt.Sprintf("field %q: %v", string(syn.JSONPointer), syn.Err)
	}
	return strings.TrimPrefix(strings.TrimPrefix(err.Error(), "json: "), "jsontext: ")
}

// kindName names a kind of JSON value.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	}
	return "a value"
}

// typeName names the JSON a field of type t takes.
func typeName(t reflect.Type) string {
	if t == nil {
		return "another value"
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeName(t.Elem())
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.String {
			return "an array of strings"
		}
		return "an array"
	case reflect.Struct:
		return "an object"
	}
	return "another value"
}

// fieldsOf lists the JSON names of the fields of *v or v, a struct.
func fieldsOf(v any) []string {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		return nil
	}
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	return out
}

// op is the union of every operation's fields. A field with a default is
// a pointer: the default takes the place of a missing field only, and an
// empty string given is used as it is, as the reference uses it.
type op struct {
	Op           string         `json:"op"`
	Note         string         `json:"note"`
	Parent       string         `json:"parent"`
	Child        string         `json:"child"`
	RunID        *string        `json:"runId"`
	Session      string         `json:"session"`
	ActorID      string         `json:"actorId"`
	ActorType    string         `json:"actorType"`
	Channel      *string        `json:"channel"`
	From         string         `json:"from"`
	Summary      *string        `json:"summary"`
	Outcome      string         `json:"outcome"`
	Requester    string         `json:"requester"`
	OperationID  *string        `json:"operationId"`
	Watcher      string         `json:"watcher"`
	Target       string         `json:"target"`
	ChangesSince jsontext.Value `json:"changesSince"`
	Limit        jsontext.Value `json:"limit"`
	Sessions     []string       `json:"sessions"`
	Ms           jsontext.Value `json:"ms"`
	Count        *int           `json:"count"`
	Do           jsontext.Value `json:"do"`
	// create's fields.
	Creator        *creator `json:"creator"`
	Source         string   `json:"source"`
	Label          *string  `json:"label"`
	SessionID      *string  `json:"sessionId"`
	Incognito      bool     `json:"incognito"`
	Visibility     string   `json:"visibility"`
	NotifyOnCreate *bool    `json:"notifyOnCreate"`
	// adopt's and the upstream ops' fields (adopt.go).
	ThreadID  *string        `json:"threadId"`
	CatalogID *string        `json:"catalogId"`
	HostID    *string        `json:"hostId"`
	Link      *bool          `json:"link"`
	Ticks     jsontext.Value `json:"ticks"`
	Remove    *bool          `json:"remove"`
	Text      *string        `json:"text"`
	Echo      bool           `json:"echo"`
}

// creator is create's creator.
type creator struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Label  string `json:"label"`
	Source string `json:"source"`
}

// Options configure a Runner.
type Options struct {
	// OpenStore opens the store the scenario runs on. The Runner calls it
	// once at the start and again after every restart op, having closed
	// the previous store, so it must open the same data each time, and
	// that data must start empty. Nil means a SQLite file in a temporary
	// directory that Close removes.
	OpenStore func(ctx context.Context) (vigil.Store, error)
}

// Runner replays operations. Each Runner has its own scratch store.
type Runner struct {
	dir       string // the scratch directory of the default SQLite store
	openStore func(ctx context.Context) (vigil.Store, error)
	clk       *clock.Manual
	store     vigil.Store
	engine    *vigil.Engine
	nextID    int
	// sessions maps every session an op has named to its parent ("" for
	// none); it is the scenario's own session table.
	sessions map[string]string
	order    []string
	// entries are what the reference's session entries hold of a
	// creation (entry), for the sessions that have one: the ops that
	// write a session's entry in the reference make one here (touch).
	// deleted are the sessions deleted and not written again since.
	entries map[string]*entry
	deleted map[string]bool
	// up is what the adopted sessions' upstream transcripts need
	// (adopt.go).
	up upstreamState
}

// entry is a session's entry as far as create reads it. Who created the
// session and how are kept from the write that made the entry: a later
// create (of a session another op, or an earlier create, already wrote)
// changes its label, incarnation id, visibility and incognito, not its
// creation, as the reference's session store keeps them.
type entry struct {
	sessionID  string
	via        string
	creator    *vigil.Creator
	label      string
	incognito  bool
	visibility string
}

// touch writes key's entry, as an op that finds or makes a session's
// entry does: made when missing, the session no longer deleted.
func (r *Runner) touch(key string) *entry {
	delete(r.deleted, key)
	e := r.entries[key]
	if e == nil {
		e = &entry{sessionID: "sid:" + key}
		r.entries[key] = e
	}
	return e
}

// touchLive is touch for an op that reads the session's entry: a deleted
// session's entry is not read, so not written either.
func (r *Runner) touchLive(key string) {
	if !r.deleted[key] {
		r.touch(key)
	}
}

// NewRunner opens a fresh scratch store in a temporary directory.
func NewRunner(ctx context.Context) (*Runner, error) {
	return NewRunnerWith(ctx, Options{})
}

// NewRunnerWith opens a Runner on the store opts.OpenStore opens.
func NewRunnerWith(ctx context.Context, opts Options) (*Runner, error) {
	r := &Runner{openStore: opts.OpenStore, clk: clock.NewManual(Start), sessions: map[string]string{},
		entries: map[string]*entry{}, deleted: map[string]bool{}}
	if r.openStore == nil {
		dir, err := os.MkdirTemp("", "vigil-sim-")
		if err != nil {
			return nil, fmt.Errorf("scratch store: %w", err)
		}
		r.dir = dir
		r.openStore = func(ctx context.Context) (vigil.Store, error) {
			return sqlitestore.Open(ctx, filepath.Join(dir, "sim.db"), sqlitestore.Options{Synchronous: "NORMAL"})
		}
	}
	if err := r.open(ctx, true); err != nil {
		if r.dir != "" {
			os.RemoveAll(r.dir)
		}
		return nil, err
	}
	return r, nil
}

// open opens the store and an engine on it. Upkeep is inline, so each
// automatic prune runs at one exact point of the scenario: after the
// record (appended or dropped as a duplicate) that comes more than an hour
// after the last one, and in the startup sweep of a restart. The first
// open is of a new, empty store: it does not count as a prune, so the
// scenario's first record prunes, as a process does that never swept.
func (r *Runner) open(ctx context.Context, first bool) error {
	st, err := r.openStore(ctx)
	if err != nil {
		return err
	}
	eng, err := vigil.Open(ctx, st, vigil.Options{Clock: r.clk, InlineMaintenance: true, NoStartupPrune: first})
	if err != nil {
		st.Close()
		return err
	}
	r.store, r.engine = st, eng
	r.up.follow = nil // a new process: the missing counts start again
	return nil
}

func (r *Runner) shut() error {
	r.engine.Close()
	return r.store.Close()
}

// Close closes the engine and the store, and removes the default scratch
// store.
func (r *Runner) Close() error {
	err := r.shut()
	if r.dir != "" {
		err = errors.Join(err, os.RemoveAll(r.dir))
	}
	if r.up.dir != "" {
		err = errors.Join(err, os.RemoveAll(r.up.dir))
	}
	return err
}

// Run replays a scenario file on a scratch SQLite store and writes one JSON
// line per op to w.
func Run(ctx context.Context, data []byte, w io.Writer) error {
	return RunWith(ctx, data, w, Options{})
}

// RunWith is Run on the store opts.OpenStore opens.
func RunWith(ctx context.Context, data []byte, w io.Writer, opts Options) error {
	f, err := Parse(data)
	if err != nil {
		return err
	}
	r, err := NewRunnerWith(ctx, opts)
	if err != nil {
		return err
	}
	defer r.Close()
	enc := stdjson.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, raw := range f.Ops {
		if err := enc.Encode(r.Step(ctx, i, raw)); err != nil {
			return err
		}
	}
	return nil
}

// Step runs one op and returns its output line. An op whose fields do not
// decode by the strict rules runs not at all, and its line says why.
func (r *Runner) Step(ctx context.Context, i int, raw jsontext.Value) Object {
	var o op
	out := Object{}.Set("i", i)
	if err := decodeStrict(raw, &o); err != nil {
		return out.Set("op", o.Op).Set("error", fmt.Sprintf("op %d: %v", i, err))
	}
	out = out.Set("op", o.Op)
	if o.Note != "" {
		out = out.Set("note", o.Note)
	}
	res, err := r.do(ctx, o)
	if err != nil {
		return out.Set("error", err.Error())
	}
	return append(out, res...)
}

func (r *Runner) do(ctx context.Context, o op) (Object, error) {
	switch o.Op {
	case "spawn":
		return r.spawn(ctx, o)
	case "human_message":
		return r.humanMessage(ctx, o)
	case "agent_message":
		return r.agentMessage(ctx, o)
	case "goal":
		return r.goal(ctx, o)
	case "run_end":
		return r.runEnd(ctx, o)
	case "compacted":
		return r.compacted(ctx, o)
	case "watch":
		return r.watch(ctx, o)
	case "drain":
		return r.drain(ctx, o)
	case "peek":
		return r.peek(o)
	case "cursor":
		return r.cursor(ctx, o)
	case "status":
		return r.status(ctx, o)
	case "versions":
		return r.versions(ctx, o)
	case "restart":
		return r.restart(ctx)
	case "reset":
		return r.reset(ctx, o)
	case "delete":
		return r.delete(ctx, o)
	case "advance_time":
		return r.advanceTime(o)
	case "prune":
		if _, err := r.engine.Prune(ctx); err != nil {
			return nil, err
		}
		return Object{}, nil
	case "repeat":
		return r.repeat(ctx, o)
	case "create":
		return r.create(ctx, o)
	case "adopt":
		return r.adopt(ctx, o)
	case "upstream_missing":
		return r.upstreamMissing(ctx, o)
	case "upstream_tick":
		return r.upstreamTicks(ctx, o, 1)
	case "upstream_human":
		return r.upstreamHuman(ctx, o)
	case "":
		return nil, errors.New(`op has no "op" field`)
	}
	return nil, fmt.Errorf("unknown op %q", o.Op)
}

// ensure makes key a known session and returns its ref.
func (r *Runner) ensure(field, key string) (vigil.SessionRef, error) {
	if key == "" {
		return vigil.SessionRef{}, fmt.Errorf("%s is required", field)
	}
	ref, err := vigil.Ref("", key)
	if err != nil {
		return vigil.SessionRef{}, fmt.Errorf("%s: %w", field, err)
	}
	if _, ok := r.sessions[ref.Key]; !ok {
		r.sessions[ref.Key] = ""
		r.order = append(r.order, ref.Key)
	}
	return ref, nil
}

// id is the id given, "" included, or the next of the scenario's counter.
func (r *Runner) id(prefix string, given *string) string {
	if given != nil {
		return *given
	}
	r.nextID++
	return fmt.Sprintf("%s-%d", prefix, r.nextID)
}

func (r *Runner) recorded(ctx context.Context, ref vigil.SessionRef, res vigil.Recorded) (Object, error) {
	v, err := r.engine.Version(ctx, ref)
	if err != nil {
		return nil, err
	}
	return Object{}.Set("recorded", res.Appended).Set("stateVersion", v), nil
}

func (r *Runner) spawn(ctx context.Context, o op) (Object, error) {
	parent, err := r.ensure("parent", o.Parent)
	if err != nil {
		return nil, err
	}
	child, err := r.ensure("child", o.Child)
	if err != nil {
		return nil, err
	}
	r.touch(parent.Key)
	r.touch(child.Key)
	r.sessions[child.Key] = parent.Key
	runID := r.id("run", o.RunID)
	res, err := r.engine.Record(ctx, vigil.Record{
		Session: child, Kind: vigil.KindChildSpawned, ActorType: vigil.ActorAgent, ActorID: parent.Key,
		RunID: runID, DedupeKey: "child-spawned:" + runID, Parent: parent.Key,
	})
	if err != nil {
		return nil, err
	}
	out, err := r.recorded(ctx, child, res)
	if err != nil {
		return nil, err
	}
	c, err := r.cursorOut(ctx, parent.Key, child)
	if err != nil {
		return nil, err
	}
	return out.Set("runId", runID).Set("parentCursor", c), nil
}

func (r *Runner) humanMessage(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	r.touchLive(ref.Key)
	// As the reference's producer: a channel given is trimmed, and an
	// empty one is "unknown"; a missing one is the scenarios' "test".
	channel := "test"
	if o.Channel != nil {
		if channel = strings.TrimSpace(*o.Channel); channel == "" {
			channel = "unknown"
		}
	}
	payload, _ := stdjson.Marshal(map[string]string{"channel": channel})
	var runID string // none unless given: a person's message starts no run
	if o.RunID != nil {
		runID = *o.RunID
	}
	res, err := r.engine.Record(ctx, vigil.Record{
		Session: ref, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman, ActorID: o.ActorID,
		RunID: runID, Summary: "human message via " + channel, Payload: payload, Parent: r.sessions[ref.Key],
	})
	if err != nil {
		return nil, err
	}
	return r.recorded(ctx, ref, res)
}

func (r *Runner) agentMessage(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	from, err := r.ensure("from", o.From)
	if err != nil {
		return nil, err
	}
	r.touchLive(ref.Key)
	r.touch(from.Key)
	// A message from another session is an agent actor and never records
	// human_direct_message.
	out, err := r.recorded(ctx, ref, vigil.Recorded{})
	if err != nil {
		return nil, err
	}
	return out.Set("classifiedActor", Object{}.Set("actorType", vigil.ActorAgent).Set("actorId", from.Key)), nil
}

func (r *Runner) goal(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	r.touchLive(ref.Key)
	if a, err := sessionkey.Parse(o.ActorID); err == nil && a.Qualified() {
		r.touch(a.String())
	}
	summary := "goal created"
	if o.Summary != nil {
		summary = *o.Summary
	}
	res, err := r.engine.Record(ctx, vigil.Record{
		Session: ref, Kind: vigil.KindGoalChanged, ActorType: vigil.ActorType(o.ActorType), ActorID: o.ActorID,
		Summary: summary, Parent: r.sessions[ref.Key],
	})
	if err != nil {
		return nil, err
	}
	return r.recorded(ctx, ref, res)
}

var runSummaries = map[string]string{
	vigil.OutcomeCompleted: "child run completed",
	vigil.OutcomeError:     "child run failed",
	vigil.OutcomeTimeout:   "child run timed out",
	vigil.OutcomeCancelled: "child run cancelled",
}

func (r *Runner) runEnd(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	r.touchLive(ref.Key)
	summary, ok := runSummaries[o.Outcome]
	if !ok {
		return nil, fmt.Errorf("unknown outcome %q (want completed, error, timeout or cancelled)", o.Outcome)
	}
	if o.Requester != "" {
		if _, err := r.ensure("requester", o.Requester); err != nil {
			return nil, err
		}
	}
	runID := r.id("run", o.RunID)
	rec := vigil.Record{
		Session: ref, Kind: vigil.KindRunCompleted, ActorType: vigil.ActorSystem, RunID: runID,
		Summary: summary, DedupeKey: "run-terminal:" + runID,
	}
	if o.Outcome != vigil.OutcomeCompleted {
		rec.Kind = vigil.KindRunFailed
		rec.Payload, _ = stdjson.Marshal(map[string]string{"outcome": o.Outcome})
	}
	res, err := r.engine.Record(ctx, rec)
	if err != nil {
		return nil, err
	}
	return r.recorded(ctx, ref, res)
}

func (r *Runner) compacted(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	r.touchLive(ref.Key)
	opID := r.id("op", o.OperationID)
	res, err := r.engine.Record(ctx, vigil.Record{
		Session: ref, Kind: vigil.KindCompacted, ActorType: vigil.ActorSystem,
		Summary: "session compacted", DedupeKey: "compacted:" + opID,
	})
	if err != nil {
		return nil, err
	}
	return r.recorded(ctx, ref, res)
}

// create creates a session with the op's attribution: `created` when it
// has a creator, and the creation notice for its agent's main session.
func (r *Runner) create(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	var creator *vigil.Creator
	if cr := o.Creator; cr != nil {
		if cr.Type == "" {
			return nil, errors.New("creator.type is required (human, agent or system)")
		}
		creator = &vigil.Creator{Type: vigil.ActorType(cr.Type), ID: cr.ID, Label: cr.Label, Source: cr.Source}
	}
	if o.Parent != "" {
		parent, err := r.ensure("parent", o.Parent)
		if err != nil {
			return nil, err
		}
		r.touch(parent.Key)
		r.sessions[ref.Key] = parent.Key
	}
	e, existed := r.entries[ref.Key]
	e = r.touch(ref.Key)
	if !existed {
		e.via, e.creator = o.Source, creator
	}
	if o.Label != nil {
		e.label = *o.Label
	}
	e.incognito = e.incognito || o.Incognito
	if o.Visibility != "" {
		e.visibility = o.Visibility
	}
	if o.SessionID != nil && *o.SessionID != "" {
		if existed && *o.SessionID != e.sessionID {
			// A new incarnation is no draft: the reference's session store
			// keeps the entry's creation, label and incognito across a new
			// session id, but not its visibility, even one named in the
			// same write.
			e.visibility = ""
		}
		e.sessionID = *o.SessionID
	}
	c := vigil.Creation{Session: ref, SessionID: e.sessionID, Via: e.via, Creator: e.creator, Label: e.label,
		Incognito: e.incognito, Draft: e.visibility == "draft", NoNotice: o.NotifyOnCreate != nil && !*o.NotifyOnCreate}
	res, err := r.engine.RecordCreation(ctx, c)
	if err != nil {
		return nil, err
	}
	out, err := r.recorded(ctx, ref, res.Recorded)
	if err != nil {
		return nil, err
	}
	if res.Notice == "" {
		return out.Set("notice", nil), nil
	}
	if _, err := r.ensure("main", res.To); err != nil {
		return nil, err
	}
	return out.Set("notice", Object{}.Set("to", res.To).Set("text", res.Notice)), nil
}

func (r *Runner) watch(ctx context.Context, o op) (Object, error) {
	watcher, err := r.ensure("watcher", o.Watcher)
	if err != nil {
		return nil, err
	}
	target, err := r.ensure("target", o.Target)
	if err != nil {
		return nil, err
	}
	r.touch(watcher.Key)
	r.touch(target.Key)
	c, err := r.engine.Watch(ctx, watcher.Key, target)
	if err != nil {
		return Object{}.Set("registered", false).Set("cursor", nil).Set("reason", err.Error()), nil
	}
	return Object{}.Set("registered", true).Set("cursor", cursorObject(c)), nil
}

func texts(evs []vigil.SystemEvent) []string {
	out := []string{}
	for _, e := range evs {
		out = append(out, e.Text)
	}
	return out
}

func (r *Runner) drain(ctx context.Context, o op) (Object, error) {
	watcher, err := r.ensure("watcher", o.Watcher)
	if err != nil {
		return nil, err
	}
	d, err := r.engine.Drain(ctx, watcher.Key)
	if err != nil {
		return nil, err
	}
	// Every notice the turn consumed counts as acknowledged, also one
	// whose cursor is gone (its session was deleted or unwatched): the
	// turn has read it, though no cursor was left to move. A creation
	// notice is consumed and acknowledges nothing.
	acked := []string{}
	for _, e := range d.Events {
		if e.IsNotice() {
			acked = append(acked, e.Target.Key)
		}
	}
	return Object{}.Set("notices", texts(d.Events)).Set("acknowledged", acked).
		Set("pendingAfter", texts(r.engine.Pending(watcher.Key))), nil
}

func (r *Runner) peek(o op) (Object, error) {
	watcher, err := r.ensure("watcher", o.Watcher)
	if err != nil {
		return nil, err
	}
	return Object{}.Set("pending", texts(r.engine.Pending(watcher.Key))), nil
}

func cursorObject(c vigil.Cursor) Object {
	return Object{}.Set("lastSeenSequence", c.LastSeen).Set("notifiedSequence", c.Notified).Set("materialSequence", c.Material)
}

func (r *Runner) cursorOut(ctx context.Context, watcher string, target vigil.SessionRef) (any, error) {
	c, ok, err := r.engine.Cursor(ctx, watcher, target)
	if err != nil || !ok {
		return nil, err
	}
	return cursorObject(c), nil
}

func (r *Runner) cursor(ctx context.Context, o op) (Object, error) {
	watcher, err := r.ensure("watcher", o.Watcher)
	if err != nil {
		return nil, err
	}
	target, err := r.ensure("target", o.Target)
	if err != nil {
		return nil, err
	}
	if watcher == target {
		return Object{}.Set("cursor", nil), nil
	}
	c, err := r.cursorOut(ctx, watcher.Key, target)
	if err != nil {
		return nil, err
	}
	return Object{}.Set("cursor", c), nil
}

// integer reads an optional field that must be a whole JSON number.
func integer(field string, raw jsontext.Value) (int64, bool, error) {
	if len(raw) == 0 || raw.Kind() == 'n' {
		return 0, false, nil
	}
	if raw.Kind() != '0' {
		return 0, false, fmt.Errorf("%s must be an integer, got %s", field, raw)
	}
	v, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%s must be an integer, got %s", field, raw)
	}
	return v, true, nil
}

func (r *Runner) status(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	since, hasSince, err := integer("changesSince", o.ChangesSince)
	if err != nil {
		return nil, err
	}
	limit, hasLimit, err := integer("limit", o.Limit)
	if err != nil {
		return nil, err
	}
	if hasLimit && limit < 1 {
		return nil, fmt.Errorf("limit must be an integer of at least 1, got %d", limit)
	}
	if !hasSince {
		v, err := r.engine.Version(ctx, ref)
		if err != nil {
			return nil, err
		}
		return Object{}.Set("stateVersion", v), nil
	}
	d, err := r.engine.ChangesSince(ctx, ref, since, int(min(limit, vigil.MaxDeltaLimit)))
	if err != nil {
		return nil, err
	}
	events := []vigil.AgentEvent{}
	for _, e := range d.Events {
		a := e.ForAgent()
		a.OccurredAt -= Start.UnixMilli()
		events = append(events, a)
	}
	return Object{}.Set("stateVersion", d.StateVersion).Set("events", events).Set("truncated", d.Truncated).
		Set("nextChangesSince", d.NextChangesSince).Set("earliestAvailableSequence", d.EarliestAvailableSequence).
		Set("historyGap", d.HistoryGap), nil
}

func (r *Runner) versions(ctx context.Context, o op) (Object, error) {
	refs := make([]vigil.SessionRef, 0, len(o.Sessions))
	for _, k := range o.Sessions {
		ref, err := r.ensure("sessions", k)
		if err != nil {
			return nil, err
		}
		refs = append(refs, ref)
	}
	vs, err := r.engine.Versions(ctx, refs)
	if err != nil {
		return nil, err
	}
	m := Object{}
	for _, ref := range refs {
		m = m.Set(ref.Key, vs[ref])
	}
	return Object{}.Set("versions", m), nil
}

// restart drops every in-memory queue by closing the engine and the store,
// then reopens both: Open runs the startup sweep and then the startup
// prune, which counts as the last prune.
func (r *Runner) restart(ctx context.Context) (Object, error) {
	if err := r.shut(); err != nil {
		return nil, err
	}
	if err := r.open(ctx, false); err != nil {
		return nil, err
	}
	pending := Object{}
	keys := append([]string(nil), r.order...)
	sort.Strings(keys)
	for _, k := range keys {
		if p := r.engine.Pending(k); len(p) > 0 {
			pending = pending.Set(k, texts(p))
		}
	}
	return Object{}.Set("pending", pending), nil
}

func (r *Runner) reset(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	return Object{}, r.engine.ResetSession(ctx, ref)
}

func (r *Runner) delete(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	if err := r.engine.DeleteSession(ctx, ref); err != nil {
		return nil, err
	}
	// The session is gone: it has no parent any more, and a child that
	// named it keeps a parent that no longer exists.
	r.sessions[ref.Key] = ""
	r.deleted[ref.Key] = true
	return Object{}, nil
}

func (r *Runner) advanceTime(o op) (Object, error) {
	ms, ok, err := integer("ms", o.Ms)
	if err != nil {
		return nil, err
	}
	if !ok || ms < 0 {
		return nil, errors.New("ms must be an integer of at least 0")
	}
	r.clk.Advance(time.Duration(ms) * time.Millisecond)
	return Object{}.Set("now", r.clk.Now().Sub(Start).Milliseconds()), nil
}

func (r *Runner) repeat(ctx context.Context, o op) (Object, error) {
	if o.Count == nil || *o.Count < 1 {
		return nil, errors.New("count must be an integer of at least 1")
	}
	if len(o.Do) == 0 {
		return nil, errors.New(`repeat needs a "do" op`)
	}
	if o.Do.Kind() != '{' {
		return nil, fmt.Errorf(`"do" must be an op, got %s`, o.Do)
	}
	var inner op
	if err := decodeStrict(o.Do, &inner); err != nil {
		return nil, fmt.Errorf("do: %w", err)
	}
	var last Object
	for n := 0; n < *o.Count; n++ {
		res, err := r.do(ctx, inner)
		if err != nil {
			return nil, fmt.Errorf("repeat %d: %w", n+1, err)
		}
		last = res
	}
	return Object{}.Set("count", *o.Count).Set("last", last), nil
}

// Object is a JSON object that keeps its keys in insertion order.
type Object []field

type field struct {
	key string
	val any
}

// Set returns o with key set to val (appended, or replaced in place).
func (o Object) Set(key string, val any) Object {
	for i := range o {
		if o[i].key == key {
			o[i].val = val
			return o
		}
	}
	return append(o, field{key, val})
}

// Get returns the value of key.
func (o Object) Get(key string) (any, bool) {
	for _, f := range o {
		if f.key == key {
			return f.val, true
		}
	}
	return nil, false
}

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := stdjson.Marshal(f.key)
		b.Write(k)
		b.WriteByte(':')
		var v bytes.Buffer
		enc := stdjson.NewEncoder(&v)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(f.val); err != nil {
			return nil, err
		}
		b.Write(bytes.TrimRight(v.Bytes(), "\n"))
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}
