package main

// Several `vigil serve` processes on one PostgreSQL database: notices
// recorded through one reach turns parked on another, and killing one
// loses nothing committed.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/leaktest"
	"github.com/vigilhq/vigil/internal/testwait"
)

// builtBinary is the vigil binary the process tests share, built once.
var builtBinary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// gatewayBinary builds the vigil binary once for the whole package run
// (TestMain removes it).
func gatewayBinary(t *testing.T) string {
	t.Helper()
	b := &builtBinary
	b.once.Do(func() {
		if b.dir, b.err = os.MkdirTemp("", "vigil-bin-"); b.err != nil {
			return
		}
		b.path = filepath.Join(b.dir, "vigil")
		cmd := exec.Command("go", "build", "-o", b.path, "./cmd/vigil")
		cmd.Dir = filepath.Join("..", "..")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build ./cmd/vigil: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

func TestMain(m *testing.M) {
	leaktest.Main(m, func() {
		if builtBinary.dir != "" {
			os.RemoveAll(builtBinary.dir)
		}
	})
}

// gatewayProcess is `vigil serve` running as a child process. Its calls go
// through serveRun's helpers (only the address is used).
type gatewayProcess struct {
	*serveRun
	cmd *exec.Cmd
}

// startGatewayProcess runs the vigil binary as `vigil serve` on db
// (without tokens: every request is the local admin) and waits until it
// listens and, on PostgreSQL, hears other gateways.
func startGatewayProcess(t *testing.T, bin, db string) *gatewayProcess {
	t.Helper()
	cmd, stderr, exited := startServeProcess(t, bin, "--db", db, "--addr", "127.0.0.1:0")
	p := &gatewayProcess{serveRun: &serveRun{stderr: stderr}, cmd: cmd}
	shared := strings.HasPrefix(db, "postgres")
	deadline := time.After(serveHangGuard)
	for {
		out, written := stderr.Next()
		if m := listeningLine.FindStringSubmatch(out); m != nil && (!shared || strings.Contains(out, "listening for other gateways' changes")) {
			p.addr = m[1]
			return p
		}
		select {
		case <-exited:
			t.Fatalf("vigil serve exited before listening:\n%s", out)
		case <-deadline:
			t.Fatalf("vigil serve never listened, or on PostgreSQL never heard other gateways (hang guard):\n%s", out)
		case <-written:
		}
	}
}

// startServeProcess starts the vigil binary as `vigil serve` with args,
// its log kept in stderr; exited closes when it has exited. The test's
// end kills it, if it still runs, and waits for it.
func startServeProcess(t *testing.T, bin string, args ...string) (cmd *exec.Cmd, stderr *testwait.Output, exited <-chan struct{}) {
	t.Helper()
	stderr = &testwait.Output{}
	cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	cmd.Env = mcpEnv()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	return cmd, stderr, done
}

// kill ends the process with SIGKILL, as a crash would.
func (p *gatewayProcess) kill(t *testing.T) {
	t.Helper()
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

func pendingTexts(t *testing.T, p *gatewayProcess, session string) []string {
	t.Helper()
	out := callOK[gateway.PendingOutput](t, p.serveRun, "", "", "session_pending", map[string]any{"sessionKey": session})
	var texts []string
	for _, e := range out.Events {
		texts = append(texts, e.Text)
	}
	return texts
}

// twoGateways starts two gateway processes on one fresh schema.
func twoGateways(t *testing.T) (a, b *gatewayProcess) {
	t.Helper()
	db := servePostgresURL(t)
	bin := gatewayBinary(t)
	return startGatewayProcess(t, bin, db), startGatewayProcess(t, bin, db)
}

// callAsync makes a tool call on p in the background (a parked turn, a
// waiting send) and delivers its decoded answer.
func callAsync[T any](t *testing.T, p *gatewayProcess, session, tool string, in any) <-chan T {
	out := make(chan T, 1)
	go func() {
		code, body := p.call(t, "", session, tool, in)
		var v T
		if code != http.StatusOK || json.Unmarshal(body, &v) != nil {
			t.Errorf("%s: %d %s", tool, code, body)
		}
		out <- v
	}()
	return out
}

func TestATurnParkedOnOneGatewayGetsTheNoticeRecordedThroughAnother(t *testing.T) {
	a, b := twoGateways(t)
	const manager = "agent:main:main"

	sp := callOK[gateway.SpawnOutput](t, a.serveRun, "", manager, "sessions_spawn", map[string]any{"task": "write the report"})
	child := sp.ChildSessionKey
	// The notice that the child was created, queued on A, reaches B too;
	// a turn on B takes it, and A drops its copy.
	testwait.Until(t, "B holds the creation notice", func() bool { return len(pendingTexts(t, b, manager)) == 1 })
	first := callOK[gateway.TurnOutput](t, b.serveRun, "", manager, "session_turn", map[string]any{"sessionKey": manager, "waitSeconds": 0})
	if len(first.SystemEvents) != 1 || !strings.HasPrefix(first.SystemEvents[0], "New session created") {
		t.Fatalf("the first turn on B got %+v, want the creation notice", first)
	}
	testwait.Until(t, "A drops the creation notice B delivered", func() bool { return len(pendingTexts(t, a, manager)) == 0 })

	parked := callAsync[gateway.TurnOutput](t, b, manager, "session_turn", map[string]any{"sessionKey": manager, "waitSeconds": 15})
	// A person writes into the child through gateway A.
	callOK[gateway.SendOutput](t, a.serveRun, "", "", "sessions_send",
		map[string]any{"sessionKey": child, "message": "use the new template", "channel": "web", "timeoutSeconds": 0})

	turn := <-parked
	want := []string{vigil.NoticeText(child, 2)}
	if !slices.Equal(turn.SystemEvents, want) || !slices.Equal(turn.Acknowledged, []string{child}) {
		t.Fatalf("the turn parked on B got %+v, want exactly %q, acknowledged", turn, want)
	}
	// Draining on B acknowledged it for both gateways.
	testwait.Until(t, "gateway A drops the notice B's turn acknowledged", func() bool { return len(pendingTexts(t, a, manager)) == 0 })
	again := callOK[gateway.TurnOutput](t, a.serveRun, "", manager, "session_turn", map[string]any{"sessionKey": manager, "waitSeconds": 0})
	if len(again.SystemEvents) != 0 {
		t.Fatalf("a later turn on A got %q, want nothing: the notice was delivered once", again.SystemEvents)
	}
}

func TestKillingAGatewayMidLoadLosesNoCommittedEventAndLeavesNoNoticeStuck(t *testing.T) {
	db := servePostgresURL(t)
	bin := gatewayBinary(t)
	a := startGatewayProcess(t, bin, db)
	b := startGatewayProcess(t, bin, db)

	const pairs = 6
	managers, children := make([]string, pairs), make([]string, pairs)
	for i := range pairs {
		managers[i] = fmt.Sprintf("agent:m%d:main", i)
		sp := callOK[gateway.SpawnOutput](t, b.serveRun, "", managers[i], "sessions_spawn", map[string]any{"task": "work"})
		children[i] = sp.ChildSessionKey
		// The manager's turn takes the notice that its child was created.
		callOK[gateway.TurnOutput](t, b.serveRun, "", managers[i], "session_turn", map[string]any{"sessionKey": managers[i], "waitSeconds": 0})
	}

	// Producers write into the children through A until it dies, counting
	// the writes A confirmed.
	var confirmed [pairs]atomic.Int64
	var total atomic.Int64
	var wg sync.WaitGroup
	client := &http.Client{Timeout: 5 * time.Second}
	for i := range pairs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				body := fmt.Sprintf(`{"sessionKey":%q,"message":"step %d","channel":"web","timeoutSeconds":0}`, children[i], n)
				resp, err := client.Post("http://"+a.addr+"/v1/tools/sessions_send", "application/json", strings.NewReader(body))
				if err != nil {
					return // A is gone
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					confirmed[i].Add(1)
					total.Add(1)
				}
			}
		}()
	}
	testwait.Until(t, "A has confirmed some writes", func() bool { return total.Load() >= 60 })
	a.kill(t)
	wg.Wait()
	t.Logf("A confirmed %d writes before it was killed", total.Load())

	for i := range pairs {
		humans := int64(0)
		for since := int64(0); ; {
			st := callOK[gateway.StatusOutput](t, b.serveRun, "", managers[i], "session_status",
				map[string]any{"sessionKey": children[i], "changesSince": since, "limit": vigil.MaxDeltaLimit})
			for _, e := range st.StateChanges.Events {
				if e.Kind == vigil.KindHumanDirectMessage {
					humans++
				}
			}
			if !st.StateChanges.Truncated {
				break
			}
			since = st.StateChanges.NextChangesSince
		}
		if humans < confirmed[i].Load() {
			t.Errorf("%s: %d person messages stored, but A confirmed %d", children[i], humans, confirmed[i].Load())
		}
	}

	// Every manager whose child changed holds exactly one notice on B; its
	// turn there acknowledges it, and nothing is left over, on B or on a
	// new gateway started in A's place.
	for i := range pairs {
		if confirmed[i].Load() == 0 {
			continue
		}
		testwait.Until(t, managers[i]+"'s notice reaches B", func() bool { return len(pendingTexts(t, b, managers[i])) == 1 })
		turn := callOK[gateway.TurnOutput](t, b.serveRun, "", managers[i], "session_turn",
			map[string]any{"sessionKey": managers[i], "waitSeconds": 0})
		if len(turn.SystemEvents) != 1 || len(turn.Acknowledged) != 1 {
			t.Fatalf("%s's turn on B = %+v, want the one notice, acknowledged", managers[i], turn)
		}
		// Writes after the notice froze its watermark open exactly one
		// follow-up, which the next turn takes.
		if len(turn.FollowUps) > 0 {
			next := callOK[gateway.TurnOutput](t, b.serveRun, "", managers[i], "session_turn",
				map[string]any{"sessionKey": managers[i], "waitSeconds": 0})
			if !slices.Equal(next.SystemEvents, turn.FollowUps) || len(next.FollowUps) != 0 {
				t.Fatalf("%s's second turn = %+v, want the follow-up %q and nothing more", managers[i], next, turn.FollowUps)
			}
		}
	}
	restarted := startGatewayProcess(t, bin, db)
	for i := range pairs {
		if got := pendingTexts(t, restarted, managers[i]); len(got) != 0 {
			t.Errorf("%s: the gateway started after the crash queued %q, want nothing left", managers[i], got)
		}
		if got := pendingTexts(t, b, managers[i]); len(got) != 0 {
			t.Errorf("%s: B still holds %q after the turn", managers[i], got)
		}
	}
}

func TestAMessageStoredThroughOneGatewayReturnsTheTurnParkedOnAnother(t *testing.T) {
	a, b := twoGateways(t)
	const manager = "agent:main:main"
	worker := callOK[gateway.SpawnOutput](t, a.serveRun, "", manager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	callOK[gateway.TurnOutput](t, b.serveRun, "", worker, "session_turn", map[string]any{"sessionKey": worker, "waitSeconds": 0})

	parked := callAsync[gateway.TurnOutput](t, b, worker, "session_turn", map[string]any{"sessionKey": worker, "waitSeconds": 15})
	callOK[gateway.SendOutput](t, a.serveRun, "", "", "sessions_send",
		map[string]any{"sessionKey": worker, "message": "stop and summarise", "channel": "web", "timeoutSeconds": 0})
	turn := <-parked
	if turn.TimedOut || len(turn.Messages) != 1 || turn.Messages[0].Content != "stop and summarise" {
		t.Fatalf("the worker's turn parked on B = %+v, want the person's message", turn)
	}
}

func TestAReplyStoredThroughOneGatewayCompletesTheSendWaitingOnAnother(t *testing.T) {
	a, b := twoGateways(t)
	const manager = "agent:main:main"
	worker := callOK[gateway.SpawnOutput](t, a.serveRun, "", manager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	callOK[gateway.TurnOutput](t, b.serveRun, "", worker, "session_turn", map[string]any{"sessionKey": worker, "waitSeconds": 0})

	sent := callAsync[gateway.SendOutput](t, a, manager, "sessions_send",
		map[string]any{"sessionKey": worker, "message": "how far along?", "timeoutSeconds": 15})
	turn := callOK[gateway.TurnOutput](t, b.serveRun, "", worker, "session_turn", map[string]any{"sessionKey": worker, "waitSeconds": 15})
	if len(turn.Messages) != 1 {
		t.Fatalf("the worker's turn on B = %+v, want the manager's question", turn)
	}
	callOK[gateway.ReplyOutput](t, b.serveRun, "", worker, "session_reply",
		map[string]any{"sessionKey": worker, "text": "half done", "replyTo": turn.Messages[0].ID})
	if out := <-sent; out.Status != "ok" || out.Reply != "half done" {
		t.Fatalf("the send waiting on A = %+v, want the reply stored through B", out)
	}
}

func TestTheEventStreamOfOneGatewayShowsEventsRecordedThroughAnother(t *testing.T) {
	a, b := twoGateways(t)
	const manager = "agent:main:main"

	ctx, cancel := context.WithTimeout(context.Background(), serveHangGuard)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+b.addr+"/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/events on B: %d", resp.StatusCode)
	}
	lines := bufio.NewScanner(resp.Body)

	worker := callOK[gateway.SpawnOutput](t, a.serveRun, "", manager, "sessions_spawn", map[string]any{"task": "draft"}).ChildSessionKey
	callOK[gateway.GoalOutput](t, a.serveRun, "", "", "session_goal",
		map[string]any{"sessionKey": worker, "action": "set", "objective": "ship it"})
	var kinds []string
	for lines.Scan() && len(kinds) < 3 {
		data, ok := strings.CutPrefix(lines.Text(), "data: ")
		if !ok {
			continue
		}
		var e struct {
			SessionKey string `json:"sessionKey"`
			Kind       string `json:"kind"`
		}
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		if e.SessionKey == worker {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []string{string(vigil.KindCreated), string(vigil.KindChildSpawned), string(vigil.KindGoalChanged)}; !slices.Equal(kinds, want) {
		t.Fatalf("B's stream showed %v for the worker, want %v in order", kinds, want)
	}
}
