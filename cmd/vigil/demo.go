package main

// vigil demo: a short story played over HTTP against an in-process gateway,
// printing what each party sees as it happens. Every step checks what it
// expects (one notice per burst, exact deltas), so the demo doubles as a
// smoke test of the whole stack: the engine, the SQLite store, the gateway,
// the HTTP API, turns, wakes and both event streams.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	vigil "github.com/vigilhq/vigil"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/node"

	"github.com/vigilhq/vigil/clock"
)

// demoGuard bounds every wait of the demo: a step that has not happened by
// then has failed. Nothing in the story comes near it.
const demoGuard = 30 * time.Second

// demoTurnWait is the manager's long poll (session_turn waitSeconds).
const demoTurnWait = 30

const demoManager = "agent:main:main"

const demoLong = `Plays a short story against an in-process gateway (a real HTTP server on
127.0.0.1, a temporary SQLite store, no tokens): a manager spawns two
workers, a person writes straight into one of them, and the manager, parked
on a long poll, is woken with exactly one notice and reconciles with
session_status changesSince, the position the notice's data gives. Every
step checks what it expects; the exit status is 0 only if the whole story
went as told.

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

	n, err := node.Open(ctx, node.Options{DB: filepath.Join(dir, "vigil.db"), Synchronous: "NORMAL", Logger: quiet})
	if err != nil {
		return fmt.Errorf("open the gateway: %w", err)
	}
	defer n.Close()
	g := n.Gateway()
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

	base := "http://" + ln.Addr().String()
	person, err := client.New(base) // no acting session: a person
	if err != nil {
		return err
	}
	d := &demoRun{
		out:    stdout,
		pace:   pace,
		person: person,
		mgr:    person.As(demoManager),
		names:  map[string]string{demoManager: "manager"},
		seen:   map[string]int64{},
	}
	fmt.Fprintf(stdout, "vigil demo: a gateway at %s (temporary SQLite store, no tokens)\n", base)
	fmt.Fprintln(stdout, "Without tokens every request is the local admin: a person's changes show actor \"human local\".")
	fmt.Fprintln(stdout)
	return d.play(storyCtx)
}

// demoRun is one playing of the story.
type demoRun struct {
	out    io.Writer
	pace   time.Duration
	person *client.Client    // no acting session: a person (the local admin)
	mgr    *client.Client    // acting as the manager
	names  map[string]string // session key -> short name in the story
	// seen is, for each worker, the version the manager last saw of it:
	// where the notice about it must say to reconcile from.
	seen map[string]int64

	log     <-chan client.Event // the signal log stream (GET /v1/events)
	manager <-chan client.Event // the manager's session stream
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

// turn takes one turn of session over POST /v1/sessions/{key}/turn.
func (d *demoRun) turn(ctx context.Context, session string, wait int) (*client.TurnOutput, error) {
	return d.person.Turn(ctx, client.TurnInput{SessionKey: session, WaitSeconds: &wait})
}

// turnUntilWork is a runtime's turn loop: a long poll that ends with no
// work is simply taken again.
func (d *demoRun) turnUntilWork(ctx context.Context, session string, wait int) (*client.TurnOutput, error) {
	for {
		out, err := d.turn(ctx, session, wait)
		if err != nil || !out.TimedOut {
			return out, err
		}
	}
}

// reply answers as session over POST /v1/sessions/{key}/reply.
func (d *demoRun) reply(ctx context.Context, session, text string, replyTo int64) (*client.ReplyOutput, error) {
	return d.person.Reply(ctx, client.ReplyInput{SessionKey: session, Text: text, ReplyTo: replyTo})
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
	out *client.TurnOutput
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

// --- event streams ---

// events reads an opened stream in the background: its events, less
// bookmarks, with an error ending it as a nil event. The channel closes
// when the stream ends.
func events(ctx context.Context, s *client.Stream) <-chan client.Event {
	ch := make(chan client.Event, 256)
	go func() {
		defer close(ch)
		for ev, err := range s.All() {
			if err != nil {
				return
			}
			if _, quiet := ev.(client.Bookmark); quiet {
				continue
			}
			select {
			case ch <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}

// nextLog waits for the next signal-log event and checks it is kind on
// session; it prints it as vigil sees it.
func (d *demoRun) nextLog(ctx context.Context, kind client.Kind, session, comment string) (client.LogEvent, error) {
	ev, err := await(ctx, d.log, "a "+string(kind)+" event on the log stream")
	if err != nil {
		return client.LogEvent{}, err
	}
	e, ok := ev.(client.LogEvent)
	if !ok {
		if ev == nil {
			return e, errors.New("the log stream ended")
		}
		return e, fmt.Errorf("log stream: expected a signal event, got %#v", ev)
	}
	if e.Kind != kind || e.SessionKey != session {
		return e, fmt.Errorf("log stream: expected %s on %s, got %s on %s", kind, session, e.Kind, e.SessionKey)
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
	if ev == nil {
		return errors.New("the manager's session stream ended")
	}
	live, ok := ev.(client.LiveEvent)
	if !ok || live.Type != client.LiveNotice || live.Notice == nil || !isCreation(live.Notice.Data, created) {
		return fmt.Errorf("manager's session stream: expected the notice that %s was created, got %#v", d.name(created), ev)
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
	if len(out.Events) != n || len(out.Acknowledged) != 0 || len(out.Messages) != 0 {
		return fmt.Errorf("the manager's turn: %q acknowledging %q, want %d creation notices acknowledging nothing",
			out.SystemEvents, out.Acknowledged, n)
	}
	d.say("manager", "session_turn: %d creation notice(s), one per new session (taking them acknowledges nothing):", n)
	for _, ev := range out.Events {
		if ev.Data == nil || ev.Data.Type != client.NoticeCreated {
			return fmt.Errorf("the manager's turn: %q is not a creation notice (data %+v)", ev.Text, ev.Data)
		}
		// The text's middle line is the new session's facts, as the
		// manager's model reads them; the data names the session.
		lines := strings.Split(ev.Text, "\n")
		d.say("manager", "  %s (data: created, %s)", lines[len(lines)/2], d.name(ev.Data.Target))
	}
	return nil
}

// isCreation reports whether a notice's data says session was created.
func isCreation(data *client.NoticeData, session string) bool {
	return data != nil && data.Type == client.NoticeCreated && data.Target == session
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
		live, ok := ev.(client.LiveEvent)
		switch {
		case ev == nil:
			return "", errors.New("the manager's session stream ended")
		case ok && live.Type == client.LiveNotice && live.Notice != nil && notice == "":
			notice = live.Notice.Text
		case ok && live.Type == client.LiveWake && !woken:
			woken = true
		default:
			return "", fmt.Errorf("manager's session stream: unexpected event %#v", ev)
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
	// Both streams are open before the story starts, so nothing is missed.
	logStream, err := d.person.OpenEvents(ctx, client.EventsOptions{After: new(int64(0))})
	if err != nil {
		return fmt.Errorf("open the log stream: %w", err)
	}
	d.log = events(ctx, logStream)
	mgrStream, err := d.person.OpenSessionEvents(ctx, demoManager, client.SessionEventsOptions{})
	if err != nil {
		return fmt.Errorf("open the manager's session stream: %w", err)
	}
	d.manager = events(ctx, mgrStream)

	// 1. The manager spawns two workers and gives worker-1 a goal.
	var w1, w2 *client.SpawnOutput
	for i, task := range []string{"Draft the Q3 report from the sales sheet.", "Collect the regional numbers for Q3."} {
		label := fmt.Sprintf("worker-%d", i+1)
		sp, err := d.mgr.Spawn(ctx, client.SpawnInput{Task: task, Label: label})
		if err != nil {
			return fmt.Errorf("spawn %s: %w", label, err)
		}
		d.names[sp.ChildSessionKey] = label
		d.say("manager", "sessions_spawn %s: %q", label, task)
		d.say("manager", "  -> %s (run %s)", sp.ChildSessionKey, sp.RunID)
		if _, err := d.nextLog(ctx, client.KindCreated, sp.ChildSessionKey, "the manager created it: kept for reconciliation, notifies nobody"); err != nil {
			return err
		}
		spawned, err := d.nextLog(ctx, client.KindChildSpawned, sp.ChildSessionKey, "seeds the manager's cursor: it now watches "+label)
		if err != nil {
			return err
		}
		// The spawn is the last of the worker the manager has seen.
		d.seen[sp.ChildSessionKey] = spawned.Sequence
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
	st2, err := d.mgr.Status(ctx, client.StatusInput{SessionKey: w2.ChildSessionKey})
	if err != nil {
		return err
	}
	knownW2 := st2.StateVersion // what the manager knows of worker-2

	goal := "Q3 report from the draft figures"
	if _, err := d.mgr.Goal(ctx, client.GoalInput{SessionKey: w1.ChildSessionKey, Action: client.GoalSet, Objective: goal}); err != nil {
		return fmt.Errorf("set worker-1's goal: %w", err)
	}
	d.say("manager", "session_goal set on worker-1: %q", goal)
	if _, err := d.nextLog(ctx, client.KindGoalChanged, w1.ChildSessionKey, "the manager's own change: no notice for it"); err != nil {
		return err
	}
	if err := d.managerTakesCreationNotices(ctx, 2); err != nil {
		return err
	}
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 2. The workers take their first turns: their tasks.
	for _, w := range []*client.SpawnOutput{w1, w2} {
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
	if _, err := d.person.Send(ctx, client.SendInput{SessionKey: w1.ChildSessionKey, Message: personMsg,
		Channel: "chat", TimeoutSeconds: new(0)}); err != nil {
		return fmt.Errorf("the person's message: %w", err)
	}
	d.say("ann (person)", "writes straight into worker-1: %q", personMsg)
	human, err := d.nextLog(ctx, client.KindHumanDirectMessage, w1.ChildSessionKey, "worker-1 is watched: it has a parent")
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
	if !slices.ContainsFunc(delta1, func(e client.AgentEvent) bool {
		return e.Kind == client.KindHumanDirectMessage && e.Sequence == human.Sequence && e.ActorType == client.ActorHuman
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
	var instructed *client.SendOutput
	go func() {
		var err error
		instructed, err = d.mgr.Send(ctx, client.SendInput{SessionKey: w1.ChildSessionKey,
			Message: instruction, TimeoutSeconds: new(30)})
		sendDone <- err
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
	ended, err := d.person.EndRun(ctx, client.RunEndInput{RunID: w2.RunID, Outcome: client.OutcomeTimeout})
	if err != nil {
		return fmt.Errorf("end worker-2's run: %w", err)
	}
	if !ended.Recorded {
		return errors.New("worker-2's run end was not recorded")
	}
	d.say("runtime", "worker-2's run hit its time limit: run_end %s outcome timeout", w2.RunID)
	failed, err := d.nextLog(ctx, client.KindRunFailed, w2.ChildSessionKey, "log only: no notice, no wake")
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
	if _, err := d.person.Goal(ctx, client.GoalInput{SessionKey: w1.ChildSessionKey, Action: client.GoalEdit, Objective: goal2}); err != nil {
		return fmt.Errorf("the person's goal edit: %w", err)
	}
	d.say("ann (person)", "edits worker-1's goal: %q", goal2)
	edit, err := d.nextLog(ctx, client.KindGoalChanged, w1.ChildSessionKey, "")
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
	delta2, err := d.reconcile(ctx, w1.ChildSessionKey, since2)
	if err != nil {
		return err
	}
	if len(delta2) != 1 || delta2[0].Kind != client.KindGoalChanged || delta2[0].Sequence != edit.Sequence {
		return fmt.Errorf("the delta since %d should be only the goal change #%d, got %s", since2, edit.Sequence, kinds(delta2))
	}
	d.say("manager", "only what is new: the goal change; the person's message was acknowledged by the first turn")
	if err := d.pause(ctx); err != nil {
		return err
	}

	// 7. Log-only events show when the manager looks.
	list, err := d.mgr.List(ctx, client.ListInput{AgentID: "main"})
	if err != nil {
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
	if len(delta3) != 1 || delta3[0].Kind != client.KindRunFailed || delta3[0].Sequence != failed.Sequence ||
		delta3[0].Payload["outcome"] != "timeout" {
		return fmt.Errorf("worker-2's delta since %d should be only run_failed #%d with outcome timeout, got %s", knownW2, failed.Sequence, kinds(delta3))
	}
	d.say("manager", "run_failed is log only: it never notified anyone; a delta shows it with its precise outcome")

	// Nothing is left pending for the manager.
	pend, err := d.mgr.Pending(ctx, client.PendingInput{SessionKey: demoManager})
	if err != nil {
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

func (d *demoRun) showWorkerTurn(ctx context.Context, key string, out *client.TurnOutput, answer string) error {
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
// notice about target the stream announced, saying to reconcile from the
// version of target the manager last saw (in its text and its data),
// prints it and returns the version its data gives.
func (d *demoRun) showManagerTurn(out *client.TurnOutput, target, streamed string) (int64, error) {
	if out.TimedOut || out.TurnID == "" {
		return 0, errors.New("the turn ended without work")
	}
	if len(out.Events) != 1 {
		return 0, fmt.Errorf("%d system events, want exactly one notice: %q", len(out.Events), out.SystemEvents)
	}
	if len(out.Messages) != 0 {
		return 0, fmt.Errorf("%d unexpected messages", len(out.Messages))
	}
	// The notice's data says where to reconcile from; its text says the
	// same to a model.
	ev, since := out.Events[0], d.seen[target]
	data := ev.Data
	if data == nil || data.Type != client.NoticeChanged || data.Target != target || data.ChangesSince == nil || *data.ChangesSince != since {
		return 0, fmt.Errorf("the notice's data %+v, want a change of %s since %d", data, target, since)
	}
	text := ev.Text
	if want := vigil.NoticeText(target, since); text != want {
		return 0, fmt.Errorf("the notice %q, want %q", text, want)
	}
	if text != streamed {
		return 0, fmt.Errorf("the turn's notice %q differs from the streamed one %q", text, streamed)
	}
	if !slices.Equal(out.Acknowledged, []string{target}) || len(out.FollowUps) != 0 {
		return 0, fmt.Errorf("acknowledged %q with follow-ups %q, want %s and none", out.Acknowledged, out.FollowUps, target)
	}
	d.say("manager", "woken: session_turn returns 1 notice, 0 messages (taking it acknowledges the notice)")
	d.say("manager", "  notice: %s", text)
	var by []string
	for _, a := range data.Actors {
		by = append(by, d.actor(string(a.Type), a.ID))
	}
	d.say("manager", "  data: changed, changesSince %d, kinds %v, by %s", *data.ChangesSince, data.Kinds, strings.Join(by, ", "))
	return *data.ChangesSince, nil
}

// reconcile has the manager ask session_status changesSince and prints the
// delta; what it read is then the version of key the manager has seen.
func (d *demoRun) reconcile(ctx context.Context, key string, since int64) ([]client.AgentEvent, error) {
	st, err := d.mgr.Status(ctx, client.StatusInput{SessionKey: key, ChangesSince: &since})
	if err != nil {
		return nil, fmt.Errorf("session_status %s changesSince %d: %w", d.name(key), since, err)
	}
	sc := st.StateChanges
	if sc == nil {
		return nil, fmt.Errorf("session_status %s changesSince %d: no stateChanges", d.name(key), since)
	}
	if sc.HistoryGap || sc.Truncated {
		return nil, fmt.Errorf("session_status %s changesSince %d: historyGap %v, truncated %v", d.name(key), since, sc.HistoryGap, sc.Truncated)
	}
	d.seen[key] = st.StateVersion
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

func kinds(events []client.AgentEvent) string {
	var parts []string
	for _, e := range events {
		parts = append(parts, fmt.Sprintf("#%d %s", e.Sequence, e.Kind))
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
