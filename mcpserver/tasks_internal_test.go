package mcpserver

// The life of a task: kept for the retention after it finished, timed by
// an injected clock, and given up when its server's context ends.

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
)

// startTask has ts make a task of a tool call as c, which must be one.
func startTask(t *testing.T, ts *tasks, c gateway.Caller, tool, args string) *task {
	t.Helper()
	tl, ok := ts.g.Tools().Get(tool)
	if !ok {
		t.Fatalf("no tool %s", tool)
	}
	doing, ok := waitingCall(c, tool, json.RawMessage(args))
	if !ok {
		t.Fatalf("%s %s does not wait", tool, args)
	}
	res, err := ts.start(c, tl, json.RawMessage(args), doing)
	if err != nil {
		t.Fatalf("start %s: %v", tool, err)
	}
	task, err := ts.lookup(c, res.TaskID)
	if err != nil {
		t.Fatalf("the task just made: %v", err)
	}
	return task
}

func TestAFinishedTaskIsForgottenOnceKeptForTheRetention(t *testing.T) {
	g := edgeGateway(t)
	c := agentCaller(t, g, "main", "agent:main:main")
	clk := clock.NewManual(time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC))
	const keep = time.Minute
	ts := newTasks(t.Context(), g, slog.New(slog.DiscardHandler), HTTPOptions{Clock: clk, TaskRetention: keep})
	// A fence already reached finishes at once.
	task := startTask(t, ts, c, "session_status", `{"sessionKey":"agent:main:main","waitForVersion":0}`)
	<-task.done
	clk.Advance(5 * time.Second)
	shown := ts.show(t.Context(), task)
	if shown.Status != taskCompleted || shown.TTLMs == nil || *shown.TTLMs != keep.Milliseconds() {
		t.Fatalf("the finished task: %+v, want completed, forgotten %v after its creation", shown, keep)
	}
	clk.Advance(keep - 5*time.Second - time.Millisecond)
	if _, err := ts.lookup(c, task.id); err != nil || g.Held(gateway.HoldMCPTask) != 1 {
		t.Fatalf("just short of the retention: %v, %d tasks counted; want it kept and counted", err, g.Held(gateway.HoldMCPTask))
	}
	clk.Advance(time.Millisecond)
	if _, err := ts.lookup(c, task.id); err == nil || g.Held(gateway.HoldMCPTask) != 0 {
		t.Fatalf("at the retention: %v, %d tasks counted; want it forgotten and its place given back", err, g.Held(gateway.HoldMCPTask))
	}
}

func TestTheServerEndingCancelsItsTasksAndGivesTheirPlacesBack(t *testing.T) {
	g := edgeGateway(t)
	c := agentCaller(t, g, "main", "agent:main:main")
	ctx, stop := context.WithCancel(t.Context())
	ts := newTasks(ctx, g, slog.New(slog.DiscardHandler), HTTPOptions{})
	task := startTask(t, ts, c, "session_wait", `{"timeoutSeconds":60}`)
	guard, cancel := context.WithTimeout(t.Context(), edgeHangGuard)
	defer cancel()
	if err := g.AwaitHeld(guard, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the task's wait never parked: %v", err)
	}
	stop()
	if err := g.AwaitHeld(guard, gateway.HoldMCPTask, 0); err != nil {
		t.Fatalf("the server ended and its task kept its place: %v", err)
	}
	if n := g.Held(gateway.HoldWait); n != 0 {
		t.Fatalf("%d waits held once the tasks were given up, want none", n)
	}
	<-task.done
	if task.status != taskCancelled || task.message != errShuttingDown.Error() {
		t.Fatalf("the task: %s %q, want cancelled as the gateway shuts down", task.status, task.message)
	}
	wait, _ := g.Tools().Get("session_wait")
	if _, err := ts.start(c, wait, json.RawMessage(`{}`), "x"); gateway.Code(err) != gateway.CodeUnavailable {
		t.Fatalf("a task after the end: %v, want unavailable", err)
	}
}

func TestWaitingOnBackgroundAfterTheServerEndsOutlastsEveryTask(t *testing.T) {
	g := edgeGateway(t)
	c := agentCaller(t, g, "main", "agent:main:main")
	ctx, stop := context.WithCancel(t.Context())
	var background sync.WaitGroup
	ts := newTasks(ctx, g, slog.New(slog.DiscardHandler), HTTPOptions{Background: &background})
	task := startTask(t, ts, c, "session_wait", `{"timeoutSeconds":60}`)
	guard, cancel := context.WithTimeout(t.Context(), edgeHangGuard)
	defer cancel()
	if err := g.AwaitHeld(guard, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the task's wait never parked: %v", err)
	}
	stop()
	background.Wait()
	select {
	case <-task.done:
	default:
		t.Fatal("the background was done while a task still ran")
	}
}
