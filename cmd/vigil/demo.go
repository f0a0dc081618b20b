package main

// vigil demo: a short story played over HTTP against an in-process gateway,
// printing what each party sees as it happens. Every step checks what it
// expects (one notice per burst, exact deltas), so the demo doubles as a
// smoke test of the whole stack: the engine, the SQLite store, the gateway,
// the HTTP API, turns, wakes and both event streams.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	vigil "github.com/vigilhq/vigil"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/store/sqlitestore"

	"github.com/vigilhq/vigil/clock"
)

// demoGuard bounds every wait of the demo: a step that has not happened by
// then has failed. Nothing in the story comes near it.
const demoGuard = 30 * time.Second

// demoTurnWait is the manager's long poll (session_turn waitSeconds).
const demoTurnWait = 30

const demoManager = "agent:main:main"

// noticePattern matches a stale-state notice and captures its target and
// changesSince.
var noticePattern = regexp.MustCompile(`^Session "([^"]+)" changed \(other actor\)\. Reconcile before acting: session_status sessionKey "([^"]+)" changesSince (\d+)\.$`)

const demoLong = `Plays a short story against an in-process gateway (a real HTTP server on
127.0.0.1, a temporary SQLite store, no tokens): a manager spawns two
workers, a person writes straight into one of them, and the manager, parked
on a long poll, is woken with exactly one notice and reconciles with
session_status changesSince. Every step checks what it expects; the exit
status is 0 only if the whole story went as told.

flags:`

// runDemo is "vigil demo" with its arguments.
func runDemo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	env := &cliIO{getenv: func(string) string { return "" }, stdin: strings.NewReader(""), stdout: stdout, stderr: stderr}
	return runEnv(ctx, append([]string{"demo"}, args...), env)
}

// newDemoCmd is `vigil demo`.
func newDemoCmd(env *cliIO) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo [--pace DURATION]",
		Short: "play the session-state-awareness story against an in-process gateway, checking every step",
		Long:  demoLong,
		Args:  noArgs,
	}
	pace := cmd.Flags().Duration("pace", 0, "pause between steps, for people watching (e.g. 400ms)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *pace < 0 {
			return cliUsagef("--pace must not be negative, got %s", *pace)
		}
		if err := demo(cmd.Context(), *pace, env.stdout); err != nil {
			if cmd.Context().Err() != nil {
				return &cliExit{code: exitError, msg: "interrupted"}
			}
			return &cliExit{code: exitError, msg: fmt.Sprintf("FAILED: %v", err)}
		}
		return nil
	}
	return cmd
}

// demo starts the gateway, plays the story and tears everything down.
func demo(ctx context.Context, pace time.Duration, stdout io.Writer) (err error) {
	dir, err := os.MkdirTemp("", "vigil-demo-")
	if err != nil {
		return fmt.Errorf("create a temporary directory: %w", err)
	}
	defer os.RemoveAll(dir)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	st, err := sqlitestore.Open(ctx, filepath.Join(dir, "vigil.db"), sqlitestore.Options{Synchronous: "NORMAL"})
	if err != nil {
		return fmt.Errorf("open the store: %w", err)
	}
	defer st.Close()
	hub := gateway.NewHub()
	eng, err := vigil.Open(ctx, st, hub.Attach(vigil.Options{Logger: quiet}))
	if err != nil {
		return fmt.Errorf("open the engine: %w", err)
	}
	defer eng.Close()
	g := gateway.New(eng, st, gateway.Options{Logger: quiet, Hub: hub})
	creds, err := gateway.NewCredentials(gateway.Config{}, "")
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	// The server's streams end when serveCtx does, at shutdown.
	serveCtx, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	hopts := httpapi.Options{Credentials: creds, Logger: quiet, Context: serveCtx, RestrictHosts: true}
	srv := httpapi.NewServer(httpapi.New(g, hopts), hopts, quiet)
	srv.RegisterOnShutdown(g.Close)
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()

	// The streams and any request still in flight end with storyCtx, so
	// the server can shut down without waiting on them.
	storyCtx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		endStreams()
		shutCtx, stop := context.WithTimeout(context.Background(), 5*time.Second)
		defer stop()
		if srv.Shutdown(shutCtx) != nil {
			srv.Close()
		}
		<-served
	}()

	d := &demoRun{
		out:   stdout,
		pace:  pace,
		base:  "http://" + ln.Addr().String(),
		hc:    &http.Client{},
		names: map[string]string{demoManager: "manager"},
	}
	fmt.Fprintf(stdout, "vigil demo: a gateway at %s (temporary SQLite store, no tokens)\n", d.base)
	fmt.Fprintln(stdout, "Without tokens every request is the local admin: a person's changes show actor \"human local\".")
	fmt.Fprintln(stdout)
	return d.play(storyCtx)
}

// demoRun is one playing of the story.
type demoRun struct {
	out   io.Writer
	pace  time.Duration
	base  string
	hc    *http.Client
	names map[string]string // session key -> short name in the story

	log     <-chan sseEvent // the signal log stream (GET /v1/events)
	manager <-chan sseEvent // the manager's session stream
}

// say prints one line of the story as who.
func (d *demoRun) say(who, format string, args ...any) {
	fmt.Fprintf(d.out, "%-15s %s\n", "["+who+"]", fmt.Sprintf(format, args...))
}

// pause waits between steps, for a person watching.
func (d *demoRun) pause(ctx context.Context) error {
	if d.pace <= 0 {
		return ctx.Err()
	}
	return clock.Sleep(ctx, d.pace)
}

// name is a session's short name in the story.
func (d *demoRun) name(key string) string {
	if n, ok := d.names[key]; ok {
		return n
	}
	return key
}

// call POSTs in as JSON to path, acting as session (none: a person), and
// decodes the answer into out.
func (d *demoRun) call(ctx context.Context, session, path string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.base+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set(httpapi.SessionHeader, session)
	}
	resp, err := d.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("POST %s: read the answer: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var e httpapi.ErrorBody
		if json.Unmarshal(data, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("POST %s: %s: %s", path, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("POST %s: decode the answer: %w", path, err)
	}
	return nil
}

func (d *demoRun) tool(ctx context.Context, session, name string, in, out any) error {
	return d.call(ctx, session, "/v1/tools/"+name, in, out)
}

// turn takes one turn of session over POST /v1/sessions/{key}/turn.
func (d *demoRun) turn(ctx context.Context, session string, wait int) (gateway.TurnOutput, error) {
	var out gateway.TurnOutput
	err := d.call(ctx, session, "/v1/sessions/"+url.PathEscape(session)+"/turn", map[string]any{"waitSeconds": wait}, &out)
	return out, err
}

// turnUntilWork is a runtime's turn loop: a long poll that ends with no
// work is simply taken again.
func (d *demoRun) turnUntilWork(ctx context.Context, session string, wait int) (gateway.TurnOutput, error) {
	for {
		out, err := d.turn(ctx, session, wait)
		if err != nil || !out.TimedOut {
			return out, err
		}
	}
}

// reply answers as session over POST /v1/sessions/{key}/reply.
func (d *demoRun) reply(ctx context.Context, session, text string, replyTo int64) (gateway.ReplyOutput, error) {
	var out gateway.ReplyOutput
	err := d.call(ctx, session, "/v1/sessions/"+url.PathEscape(session)+"/reply",
		map[string]any{"text": text, "replyTo": replyTo}, &out)
	return out, err
}

// parkTurn starts the manager's turn in the background: it parks on the
// long poll until a wake (or a message) ends it.
func (d *demoRun) parkTurn(ctx context.Context) <-chan turnResult {
	ch := make(chan turnResult, 1)
	go func() {
		out, err := d.turnUntilWork(ctx, demoManager, demoTurnWait)
		ch <- turnResult{out, err}
	}()
	return ch
}

type turnResult struct {
	out gateway.TurnOutput
	err error
}

// await waits (up to the hang guard) for a background result.
func await[T any](ctx context.Context, ch <-chan T, what string) (T, error) {
	var zero T
	t := time.NewTimer(demoGuard)
	defer t.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-t.C:
		return zero, fmt.Errorf("%s did not happen within %s", what, demoGuard)
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// --- server-sent events ---

type sseEvent struct {
	ID, Event string
	Data      []byte
}

// openStream GETs an event stream and returns its events. It returns once
// the server has accepted the stream, so nothing after it is missed.
func (d *demoRun) openStream(ctx context.Context, path string) (<-chan sseEvent, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := d.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: HTTP %d: %s", path, resp.StatusCode, bytes.TrimSpace(data))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	// The server writes ": connected" once it listens.
	if !sc.Scan() {
		resp.Body.Close()
		return nil, fmt.Errorf("GET %s: the stream ended before it started", path)
	}
	ch := make(chan sseEvent, 256)
	go func() {
		defer resp.Body.Close()
		defer close(ch)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.Event != "" {
					select {
					case ch <- ev:
					case <-ctx.Done():
						return
					}
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				ev.ID = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				ev.Event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.Data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	return ch, nil
}

// nextLog waits for the next signal-log event and checks it is kind on
// session; it prints it as vigil sees it.
func (d *demoRun) nextLog(ctx context.Context, kind vigil.Kind, session, comment string) (httpapi.LogEvent, error) {
	var e httpapi.LogEvent
	ev, err := await(ctx, d.log, "a "+string(kind)+" event on the log stream")
	if err != nil {
		return e, err
	}
	if ev.Event == "" {
		return e, errors.New("the log stream ended")
	}
	if ev.Event != "signal" {
		return e, fmt.Errorf("log stream: expected a signal event, got %q: %s", ev.Event, ev.Data)
	}
	if err := json.Unmarshal(ev.Data, &e); err != nil {
		return e, fmt.Errorf("log stream: %w", err)
	}
	if e.Kind != kind || e.SessionKey != session {
		return e, fmt.Errorf("log stream: expected %s on %s, got %s on %s", kind, session, e.Kind, e.SessionKey)
	}
	if ev.ID != strconv.FormatInt(e.Sequence, 10) {
		return e, fmt.Errorf("log stream: event id %q is not its sequence %d", ev.ID, e.Sequence)
	}
	line := fmt.Sprintf("log #%d %s on %s by %s: %s", e.Sequence, e.Kind, d.name(e.SessionKey), d.actor(string(e.ActorType), e.ActorID), e.Summary)
	if comment != "" {
		line += " (" + comment + ")"
	}
	d.say("vigil", "%s", line)
	return e, nil
}

// creationNotice waits for the notice the manager's session stream carries
// after a session of its agent is created: a notice with no wake.
func (d *demoRun) creationNotice(ctx context.Context, created string) error {
	ev, err := await(ctx, d.manager, "a creation notice on the manager's session stream")
	if err != nil {
		return err
	}
	if ev.Event == "" {
		return errors.New("the manager's session stream ended")
	}
	var live gateway.LiveEvent
	if err := json.Unmarshal(ev.Data, &live); err != nil {
		return fmt.Errorf("manager's session stream: %w", err)
	}
	if ev.Event != gateway.LiveNotice || live.Notice == nil || !strings.Contains(live.Notice.Text, `"sessionKey":"`+created+`"`) {
		return fmt.Errorf("manager's session stream: expected the notice that %s was created, got %s: %s", d.name(created), ev.Event, ev.Data)
	}
	d.say("vigil", "queues a creation notice for the manager, without waking it (session stream: notice)")
	return nil
}

// managerTakesCreationNotices has the manager take a turn that finds the
// n creation notices queued, and nothing else.
func (d *demoRun) managerTakesCreationNotices(ctx context.Context, n int) error {
	out, err := d.turn(ctx, demoManager, 0)
	if err != nil {
		return fmt.Errorf("the manager's turn: %w", err)
	}
	if len(out.SystemEvents) != n || len(out.Acknowledged) != 0 || len(out.Messages) != 0 {
		return fmt.Errorf("the manager's turn: %q acknowledging %q, want %d creation notices acknowledging nothing",
			out.SystemEvents, out.Acknowledged, n)
	}
	d.say("manager", "session_turn: %d creation notice(s), one per new session (taking them acknowledges nothing):", n)
	for _, text := range out.SystemEvents {
		if !strings.HasPrefix(text, "New session created") {
			return fmt.Errorf("the manager's turn: %q is not a creation notice", text)
		}
		lines := strings.Split(text, "\n")
		d.say("manager", "  %s", lines[len(lines)/2])
	}
	return nil
}

// managerNotice waits for the notice and the wake the manager's session
// stream carries after a material change, and prints them.
func (d *demoRun) managerNotice(ctx context.Context) (string, error) {
	var notice string
	woken := false
	for notice == "" || !woken {
		ev, err := await(ctx, d.manager, "a notice and a wake on the manager's session stream")
		if err != nil {
			return "", err
		}
		if ev.Event == "" {
			return "", errors.New("the manager's session stream ended")
		}
		var live gateway.LiveEvent
		if err := json.Unmarshal(ev.Data, &live); err != nil {
			return "", fmt.Errorf("manager's session stream: %w", err)
		}
		switch {
		case ev.Event == gateway.LiveNotice && live.Notice != nil && notice == "":
			notice = live.Notice.Text
		case ev.Event == gateway.LiveWake && !woken:
			woken = true
		default:
			return "", fmt.Errorf("manager's session stream: unexpected %s event: %s", ev.Event, ev.Data)
		}
	}
	d.say("vigil", "queues one notice for the manager and wakes it (session stream: notice, wake)")
	return notice, nil
}

func (d *demoRun) actor(typ, id string) string {
	if id == "" {
		return typ
	}
	return typ + " " + d.name(id)
}

// --- the story ---

func (d *demoRun) play(ctx context.Context) error {
	var err error
	if d.log, err = d.openStream(ctx, "/v1/events?after=0"); err != nil {
		return err
	}
	if d.manager, err = d.openStream(ctx, "/v1/sessions/"+url.PathEscape(demoManager)+"/events"); err != nil {
		return err
	}

	// 1. The manager spawns two workers and gives worker-1 a goal.
	var w1, w2 gateway.SpawnOutput
	for i, task := range []string{"Draft the Q3 report from the sales sheet.", "Collect the regional numbers for Q3."} {
		label := fmt.Sprintf("worker-%d", i+1)
		var sp gateway.SpawnOutput
		if err := d.tool(ctx, demoManager, "sessions_spawn", gateway.SpawnInput{Task: task, Label: label}, &sp); err != nil {
			return fmt.Errorf("spawn %s: %w", label, err)
		}
		d.names[sp.ChildSessionKey] = label
		d.say("manager", "sessions_spawn %s: %q", label, task)
		d.say("manager", "  -> %s (run %s)", sp.ChildSessionKey, sp.RunID)
		if _, err := d.nextLog(ctx, vigil.KindCreated, sp.ChildSessionKey, "the manager created it: kept for reconciliation, notifies nobody"); err != nil {
			return err
		}
		if _, err := d.nextLog(ctx, vigil.KindChildSpawned, sp.ChildSessionKey, "seeds the manager's cursor: it now watches "+label); err != nil {
			return err
		}
		if err := d.creationNotice(ctx, sp.ChildSessionKey); err != nil {
			return err
		}
		if i == 0 {
			w1 = sp
		} else {
			w2 = sp
		}
		if err := d.pause(ctx); err != nil {
			return err
		}
	}
	var st2 gateway.StatusOutput
	if err := d.tool(ctx, demoManager, "session_status", gateway.StatusInput{SessionKey: w2.ChildSessionKey}, &st2); err != nil {
		return err
	}
	knownW2 := st2.StateVersion // what the manager knows of worker-2

	goal := "Q3 report from the draft figures"
	var gout gateway.GoalOutput
	if err := d.tool(ctx, demoManager, "session_goal", gateway.GoalInput{SessionKey: w1.ChildSessionKey, Action: "set", Objective: goal}, &gout); err != nil {
		return fmt.Errorf("set worker-1's goal: %w", err)
	}
	d.say("manager", "session_goal set on worker-1: %q", goal)
	if _, err := d.nextLog(ctx, vigil.KindGoalChanged, w1.ChildSessionKey, "the manager's own change: no notice for it"); err != nil {
		return err
	}
	if err := d.managerTakesCreationNotices(ctx, 2); err != nil {
		return err
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 2. The workers take their first turns: their tasks.
	for _, w := range []gateway.SpawnOutput{w1, w2} {
		if err := d.workerTurn(ctx, w.ChildSessionKey, 1, "On it."); err != nil {
			return err
		}
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 3. The manager parks on a long poll; a person writes into worker-1.
	first := d.parkTurn(ctx)
	d.say("manager", "session_turn (waitSeconds %d): nothing to do yet, parked on the long poll", demoTurnWait)
	if err := d.pause(ctx); err != nil {
		return err
	}
	personMsg := "Use the revised figures, not the draft."
	var sent gateway.SendOutput
	zero := 0
	if err := d.tool(ctx, "", "sessions_send", gateway.SendInput{SessionKey: w1.ChildSessionKey, Message: personMsg,
		Channel: "chat", TimeoutSeconds: &zero}, &sent); err != nil {
		return fmt.Errorf("the person's message: %w", err)
	}
	d.say("ann (person)", "writes straight into worker-1: %q", personMsg)
	human, err := d.nextLog(ctx, vigil.KindHumanDirectMessage, w1.ChildSessionKey, "worker-1 is watched: it has a parent")
	if err != nil {
		return err
	}
	notice1, err := d.managerNotice(ctx)
	if err != nil {
		return err
	}

	// 4. The manager is woken with exactly one notice and reconciles.
	res, err := await(ctx, first, "the manager's woken turn")
	if err != nil {
		return err
	}
	if res.err != nil {
		return fmt.Errorf("the manager's first turn: %w", res.err)
	}
	since1, err := d.showManagerTurn(res.out, w1.ChildSessionKey, notice1)
	if err != nil {
		return fmt.Errorf("the manager's first turn: %w", err)
	}
	delta1, err := d.reconcile(ctx, w1.ChildSessionKey, since1)
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(delta1, func(e vigil.AgentEvent) bool {
		return e.Kind == vigil.KindHumanDirectMessage && e.Sequence == human.Sequence && e.ActorType == vigil.ActorHuman
	}) {
		return fmt.Errorf("the delta since %d does not list the person's message (#%d)", since1, human.Sequence)
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// Worker-1 sees the person's message on its next turn.
	if err := d.workerTurn(ctx, w1.ChildSessionKey, 1, "Switching to the revised figures."); err != nil {
		return err
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// The manager reconciles: an updated instruction, waiting for the reply.
	instruction := "Ann's revised figures win: redo the totals with them, then send me the draft."
	d.say("manager", "reconciles: sessions_send to worker-1 %q (waits for the reply)", instruction)
	sendDone := make(chan error, 1)
	var instructed gateway.SendOutput
	go func() {
		wait := 30
		sendDone <- d.tool(ctx, demoManager, "sessions_send", gateway.SendInput{SessionKey: w1.ChildSessionKey,
			Message: instruction, TimeoutSeconds: &wait}, &instructed)
	}()
	if err := d.workerTurnWaiting(ctx, w1.ChildSessionKey, "Understood: redoing the totals with the revised figures."); err != nil {
		return err
	}
	serr, err := await(ctx, sendDone, "the manager's send to worker-1")
	if err != nil {
		return err
	}
	if serr != nil {
		return fmt.Errorf("the manager's instruction: %w", serr)
	}
	if instructed.Status != "ok" {
		return fmt.Errorf("the manager's instruction: status %q, want ok (%s)", instructed.Status, instructed.Error)
	}
	d.say("manager", "  <- reply (status ok): %q", instructed.Reply)
	d.say("vigil", "(a message between sessions is actor agent: it records nothing and notifies no one)")
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 5. The manager parks again. Worker-2's run times out: log only.
	second := d.parkTurn(ctx)
	d.say("manager", "session_turn (waitSeconds %d): parked again", demoTurnWait)
	if err := d.pause(ctx); err != nil {
		return err
	}
	var ended gateway.RunEndOutput
	if err := d.tool(ctx, "", "run_end", gateway.RunEndInput{RunID: w2.RunID, Outcome: "timeout"}, &ended); err != nil {
		return fmt.Errorf("end worker-2's run: %w", err)
	}
	if !ended.Recorded {
		return errors.New("worker-2's run end was not recorded")
	}
	d.say("runtime", "worker-2's run hit its time limit: run_end %s outcome timeout", w2.RunID)
	failed, err := d.nextLog(ctx, vigil.KindRunFailed, w2.ChildSessionKey, "log only: no notice, no wake")
	if err != nil {
		return err
	}
	select {
	case r := <-second:
		return fmt.Errorf("the manager's turn ended after a log-only event: %+v (err %v)", r.out, r.err)
	default:
		d.say("vigil", "(the manager's turn stays parked)")
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 6. The person edits worker-1's goal: one fresh notice.
	goal2 := "Q3 report with the revised figures, due Friday"
	if err := d.tool(ctx, "", "session_goal", gateway.GoalInput{SessionKey: w1.ChildSessionKey, Action: "edit", Objective: goal2}, &gout); err != nil {
		return fmt.Errorf("the person's goal edit: %w", err)
	}
	d.say("ann (person)", "edits worker-1's goal: %q", goal2)
	edit, err := d.nextLog(ctx, vigil.KindGoalChanged, w1.ChildSessionKey, "")
	if err != nil {
		return err
	}
	notice2, err := d.managerNotice(ctx)
	if err != nil {
		return err
	}
	res, err = await(ctx, second, "the manager's second woken turn")
	if err != nil {
		return err
	}
	if res.err != nil {
		return fmt.Errorf("the manager's second turn: %w", res.err)
	}
	since2, err := d.showManagerTurn(res.out, w1.ChildSessionKey, notice2)
	if err != nil {
		return fmt.Errorf("the manager's second turn: %w", err)
	}
	if since2 < human.Sequence {
		return fmt.Errorf("the second notice says changesSince %d, before the acknowledged #%d", since2, human.Sequence)
	}
	delta2, err := d.reconcile(ctx, w1.ChildSessionKey, since2)
	if err != nil {
		return err
	}
	if len(delta2) != 1 || delta2[0].Kind != vigil.KindGoalChanged || delta2[0].Sequence != edit.Sequence {
		return fmt.Errorf("the delta since %d should be only the goal change #%d, got %s", since2, edit.Sequence, kinds(delta2))
	}
	d.say("manager", "only what is new: the goal change; the person's message was acknowledged by the first turn")
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 7. Log-only events show when the manager looks.
	var list gateway.ListOutput
	if err := d.tool(ctx, demoManager, "sessions_list", gateway.ListInput{AgentID: "main"}, &list); err != nil {
		return err
	}
	var nowW2 int64
	for _, row := range list.Sessions {
		if row.SessionKey == w2.ChildSessionKey {
			nowW2 = row.StateVersion
		}
	}
	d.say("manager", "sessions_list: worker-2 is at stateVersion %d, it knew %d: something happened without a notice", nowW2, knownW2)
	if nowW2 <= knownW2 {
		return fmt.Errorf("worker-2's stateVersion %d did not move past %d", nowW2, knownW2)
	}
	delta3, err := d.reconcile(ctx, w2.ChildSessionKey, knownW2)
	if err != nil {
		return err
	}
	if len(delta3) != 1 || delta3[0].Kind != vigil.KindRunFailed || delta3[0].Sequence != failed.Sequence ||
		delta3[0].Payload["outcome"] != "timeout" {
		return fmt.Errorf("worker-2's delta since %d should be only run_failed #%d with outcome timeout, got %s", knownW2, failed.Sequence, kinds(delta3))
	}
	d.say("manager", "run_failed is log only: it never notified anyone; a delta shows it with its precise outcome")

	// Nothing is left pending for the manager.
	var pend gateway.PendingOutput
	if err := d.tool(ctx, demoManager, "session_pending", gateway.PendingInput{SessionKey: demoManager}, &pend); err != nil {
		return err
	}
	if len(pend.Events) != 0 {
		return fmt.Errorf("the manager still has %d queued system events", len(pend.Events))
	}
	d.say("vigil", "the manager's queue is empty: two changes by others, two notices, two exact deltas")
	fmt.Fprintln(d.out)
	fmt.Fprintln(d.out, "vigil demo: every step went as expected")
	return nil
}

// workerTurn has a worker take a turn with work already waiting (want
// messages), and reply to the last message.
func (d *demoRun) workerTurn(ctx context.Context, key string, want int, answer string) error {
	out, err := d.turn(ctx, key, 0)
	if err != nil {
		return fmt.Errorf("%s's turn: %w", d.name(key), err)
	}
	if len(out.Messages) != want {
		return fmt.Errorf("%s's turn: %d messages, want %d", d.name(key), len(out.Messages), want)
	}
	return d.showWorkerTurn(ctx, key, out, answer)
}

// workerTurnWaiting has a worker take a turn on a long poll until a message
// arrives, and reply to it.
func (d *demoRun) workerTurnWaiting(ctx context.Context, key, answer string) error {
	out, err := d.turnUntilWork(ctx, key, demoTurnWait)
	if err != nil {
		return fmt.Errorf("%s's turn: %w", d.name(key), err)
	}
	if len(out.Messages) != 1 {
		return fmt.Errorf("%s's turn: %d messages, want 1", d.name(key), len(out.Messages))
	}
	return d.showWorkerTurn(ctx, key, out, answer)
}

func (d *demoRun) showWorkerTurn(ctx context.Context, key string, out gateway.TurnOutput, answer string) error {
	who := d.name(key)
	if len(out.SystemEvents) != 0 {
		return fmt.Errorf("%s's turn: unexpected system events %q", who, out.SystemEvents)
	}
	d.say(who, "session_turn: %d message(s)", len(out.Messages))
	for _, m := range out.Messages {
		from := d.actor(string(m.ActorType), m.ActorID)
		if m.Channel != "" {
			from += " via " + m.Channel
		}
		d.say(who, "  message %d from %s: %q", m.ID, from, m.Content)
	}
	last := out.Messages[len(out.Messages)-1]
	r, err := d.reply(ctx, key, answer, last.ID)
	if err != nil {
		return fmt.Errorf("%s's reply: %w", who, err)
	}
	if r.Delivered {
		d.say(who, "session_reply to message %d: %q (delivered to the waiting sender)", last.ID, answer)
	} else {
		d.say(who, "session_reply to message %d: %q", last.ID, answer)
	}
	return nil
}

// showManagerTurn checks that the manager's turn carried exactly the one
// notice about target the stream announced, prints it and returns its
// changesSince.
func (d *demoRun) showManagerTurn(out gateway.TurnOutput, target, streamed string) (int64, error) {
	if out.TimedOut || out.TurnID == "" {
		return 0, errors.New("the turn ended without work")
	}
	if len(out.SystemEvents) != 1 {
		return 0, fmt.Errorf("%d system events, want exactly one notice: %q", len(out.SystemEvents), out.SystemEvents)
	}
	if len(out.Messages) != 0 {
		return 0, fmt.Errorf("%d unexpected messages", len(out.Messages))
	}
	text := out.SystemEvents[0]
	m := noticePattern.FindStringSubmatch(text)
	if m == nil || m[1] != target || m[2] != target {
		return 0, fmt.Errorf("not a notice about %s: %q", target, text)
	}
	if text != streamed {
		return 0, fmt.Errorf("the turn's notice %q differs from the streamed one %q", text, streamed)
	}
	if !slices.Equal(out.Acknowledged, []string{target}) || len(out.FollowUps) != 0 {
		return 0, fmt.Errorf("acknowledged %q with follow-ups %q, want %s and none", out.Acknowledged, out.FollowUps, target)
	}
	since, err := strconv.ParseInt(m[3], 10, 64)
	if err != nil {
		return 0, err
	}
	d.say("manager", "woken: session_turn returns 1 notice, 0 messages (taking it acknowledges the notice)")
	d.say("manager", "  notice: %s", text)
	return since, nil
}

// reconcile has the manager ask session_status changesSince and prints the
// delta.
func (d *demoRun) reconcile(ctx context.Context, key string, since int64) ([]vigil.AgentEvent, error) {
	var st gateway.StatusOutput
	if err := d.tool(ctx, demoManager, "session_status", gateway.StatusInput{SessionKey: key, ChangesSince: &since}, &st); err != nil {
		return nil, fmt.Errorf("session_status %s changesSince %d: %w", d.name(key), since, err)
	}
	sc := st.StateChanges
	if sc == nil {
		return nil, fmt.Errorf("session_status %s changesSince %d: no stateChanges", d.name(key), since)
	}
	if sc.HistoryGap || sc.Truncated {
		return nil, fmt.Errorf("session_status %s changesSince %d: historyGap %v, truncated %v", d.name(key), since, sc.HistoryGap, sc.Truncated)
	}
	d.say("manager", "session_status %s changesSince %d -> stateVersion %d, %d change(s):", d.name(key), since, st.StateVersion, len(sc.Events))
	for _, e := range sc.Events {
		if e.Sequence <= since {
			return nil, fmt.Errorf("the delta since %d lists #%d", since, e.Sequence)
		}
		line := fmt.Sprintf("  #%d %s by %s: %s", e.Sequence, e.Kind, d.actor(string(e.ActorType), e.ActorID), e.Summary)
		if len(e.Payload) > 0 {
			keys := make([]string, 0, len(e.Payload))
			for k := range e.Payload {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			var parts []string
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%v", k, e.Payload[k]))
			}
			line += " [" + strings.Join(parts, " ") + "]"
		}
		d.say("manager", "%s", line)
	}
	return sc.Events, nil
}

func kinds(events []vigil.AgentEvent) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("#%d %s", e.Sequence, e.Kind))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
