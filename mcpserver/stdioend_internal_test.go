package mcpserver

// A stdio client that closes its input has sent all it will: the
// requests it sent before are still answered, within a bound, and then
// the session ends.

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// stdioEnding is a server on a stdio transport whose input the test
// writes and ends, with its clock and its answers.
type stdioEnding struct {
	g       *gateway.Gateway
	guard   context.Context
	clock   *clock.Manual
	in      *io.PipeWriter
	answers chan map[string]any // every line written, closed once the server has ended
	served  chan error
	// finishing is closed once the input has ended and the finish
	// timeout runs.
	finishing chan struct{}
}

const stdioFinishTimeout = time.Minute

func startStdioEnding(t *testing.T) *stdioEnding {
	t.Helper()
	guard, cancel := context.WithTimeout(context.Background(), edgeHangGuard) // a hang guard, not a timing
	t.Cleanup(cancel)
	g := gatewaytest.Open(t, gatewaytest.Options{}).Gateway
	caller, err := g.ResolveCaller(guard, gateway.LocalPrincipal, "agent:main:main")
	if err != nil {
		t.Fatal(err)
	}
	s := &stdioEnding{g: g, guard: guard, clock: clock.NewManual(time.Unix(0, 0)), answers: make(chan map[string]any, 16),
		served: make(chan error, 1), finishing: make(chan struct{})}
	toServer, in := io.Pipe()
	s.in = in
	toClient, fromServer := io.Pipe()
	tr := StdioTransportWith(toServer, fromServer, StdioOptions{FinishTimeout: stdioFinishTimeout, Clock: s.clock})
	tr.(*mcp.IOTransport).Reader.(*checkedMessages).due.finishing = func() { close(s.finishing) }
	ctx, stop := context.WithCancel(guard)
	go func() {
		s.served <- New(ctx, g, caller, nil).Run(ctx, tr)
		fromServer.Close()
	}()
	go func() {
		defer close(s.answers)
		lines := bufio.NewScanner(toClient)
		for lines.Scan() {
			var answer map[string]any
			if json.Unmarshal(lines.Bytes(), &answer) == nil {
				s.answers <- answer
			}
		}
	}()
	t.Cleanup(func() {
		in.Close()
		stop()
		toClient.Close()
	})
	s.send(t, `{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}`)
	if a := s.answer(t); a["id"] != float64(1) {
		t.Fatalf("the answer to initialize: %v", a)
	}
	s.send(t, `{"jsonrpc": "2.0", "method": "notifications/initialized"}`)
	return s
}

func (s *stdioEnding) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// answer returns the next line the server writes, nil once it has ended.
func (s *stdioEnding) answer(t *testing.T) map[string]any {
	t.Helper()
	select {
	case a := <-s.answers:
		return a
	case <-s.guard.Done():
		t.Fatal("no answer, and the server did not end (hang guard)")
		return nil
	}
}

// waitingCall sends a session_wait, as request 2, and returns once it waits.
func (s *stdioEnding) waitingCall(t *testing.T) {
	t.Helper()
	s.send(t, `{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "session_wait", "arguments": {"timeoutSeconds": 60}}}`)
	if err := s.g.AwaitHeld(s.guard, gateway.HoldWait, 1); err != nil {
		t.Fatalf("the session_wait never waited: %v", err)
	}
}

func TestAStdioRequestReadBeforeTheInputEndedIsStillAnswered(t *testing.T) {
	s := startStdioEnding(t)
	s.waitingCall(t)
	s.in.Close()
	<-s.finishing
	person, err := s.g.ResolveCaller(s.guard, gateway.Principal{Role: gateway.RoleOperator, ID: "ann"}, "")
	if err != nil {
		t.Fatal(err)
	}
	now := 0
	if _, err := s.g.Send(s.guard, person, gateway.SendInput{SessionKey: "agent:main:main", Message: "go on", TimeoutSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	a := s.answer(t)
	if a == nil || a["id"] != float64(2) || a["result"] == nil {
		t.Fatalf("after the input ended, the waiting call was answered %v, want its result", a)
	}
	if err := <-s.served; err != nil {
		t.Fatalf("the server ended with %v once it had answered, want nil", err)
	}
}

func TestAStdioRequestStillRunningWhenTheFinishTimeoutPassesIsCancelledUnanswered(t *testing.T) {
	s := startStdioEnding(t)
	s.waitingCall(t)
	s.in.Close()
	<-s.finishing
	s.clock.Advance(stdioFinishTimeout)
	if err := s.g.AwaitHeld(s.guard, gateway.HoldWait, 0); err != nil {
		t.Fatalf("the call still waits once the finish timeout passed: %v", err)
	}
	if a := s.answer(t); a != nil {
		t.Fatalf("the call cut by the finish timeout was answered %v, want no answer", a)
	}
	<-s.served
}

func TestAStdioSessionWhoseRequestsWereAllAnsweredEndsWithItsInput(t *testing.T) {
	s := startStdioEnding(t)
	s.in.Close()
	if err := <-s.served; err != nil {
		t.Fatalf("the server ended with %v, want nil", err)
	}
	select {
	case <-s.finishing:
		t.Fatal("the end of the input waited for answers when none was due")
	default:
	}
}
