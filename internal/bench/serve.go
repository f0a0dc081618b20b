package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/vigilhq/vigil/gateway"
)

// Tokens of the gateways the bench starts (the credentials file it writes
// for them): a person, and an admin that takes runtimes' turns.
const (
	operatorToken = "bench-operator-token-0001"
	adminToken    = "bench-admin-token-000001"
)

// serveProc is a `vigil serve` the bench started as a child process.
type serveProc struct {
	cmd  *exec.Cmd
	addr string
	// queued is how many notices its startup sweep queued.
	queued int

	mu      sync.Mutex
	stopped bool
	waitErr error
	exited  chan struct{}
}

// serveOptions say how to start a gateway.
type serveOptions struct {
	// sync is SQLite's synchronous setting ("" leaves the default).
	sync string
	// tokens configures the bench's operator and admin tokens; without
	// them every request is the local admin.
	tokens bool
	// follow waits, on PostgreSQL, until the gateway hears other
	// gateways' changes.
	follow bool
	// extra are more flags for vigil serve.
	extra []string
}

// startServe runs the vigil executable as `vigil serve` on db, listening
// on a loopback port of its choosing, and returns once it listens. The
// child sees none of the user's VIGIL_ settings. It is given db in
// VIGIL_DB, not on its command line, which anyone on the machine can
// read: a PostgreSQL URL holds a password.
func (e *env) startServe(ctx context.Context, db string, o serveOptions) (*serveProc, error) {
	args := []string{"serve", "--addr", "127.0.0.1:0", "--log-format", "json"}
	if o.sync != "" {
		args = append(args, "--synchronous", o.sync)
	}
	args = append(args, o.extra...)
	if o.tokens {
		path, err := e.tokensFile()
		if err != nil {
			return nil, err
		}
		args = append(args, "--config", path)
	}
	cmd := exec.Command(e.cfg.Executable, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VIGIL_") { // no tokens, config or database of the user's
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "VIGIL_DB="+db)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start vigil serve: %w", err)
	}
	p := &serveProc{cmd: cmd, exited: make(chan struct{})}
	listening, following := make(chan string, 1), make(chan struct{}, 1)
	var tail []string
	var tailMu sync.Mutex
	go func() {
		lines := bufio.NewScanner(stderr)
		lines.Buffer(make([]byte, 64<<10), 1<<20)
		for lines.Scan() {
			line := lines.Text()
			tailMu.Lock()
			if len(tail) < 20 {
				tail = append(tail, line)
			}
			tailMu.Unlock()
			var rec struct {
				Msg           string `json:"msg"`
				Addr          string `json:"addr"`
				NoticesQueued int    `json:"noticesQueued"`
			}
			if json.Unmarshal([]byte(line), &rec) != nil {
				continue
			}
			switch rec.Msg {
			case "startup sweep done":
				p.queued = rec.NoticesQueued
			case "vigil listening":
				listening <- rec.Addr
			case "listening for other gateways' changes":
				select {
				case following <- struct{}{}:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	fail := func(why string) error {
		p.stop()
		tailMu.Lock()
		defer tailMu.Unlock()
		return fmt.Errorf("vigil serve %s:\n%s", why, strings.Join(tail, "\n"))
	}
	guard := time.NewTimer(2 * time.Minute)
	defer guard.Stop()
	select {
	case p.addr = <-listening:
	case <-p.exited:
		return nil, fail("exited before listening")
	case <-guard.C:
		return nil, fail("did not listen within 2 minutes")
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
	if o.follow {
		select {
		case <-following:
		case <-p.exited:
			return nil, fail("exited before it heard other gateways")
		case <-guard.C:
			return nil, fail("did not listen for other gateways within 2 minutes")
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		}
	}
	return p, nil
}

// pid is the child's process id.
func (p *serveProc) pid() int { return p.cmd.Process.Pid }

// stop interrupts the gateway (killing it after 30 seconds) and waits for
// it to exit. Stopping twice is harmless. An exit status other than 0
// after the interrupt is not an error: the bench only needed it gone.
func (p *serveProc) stop() error {
	p.mu.Lock()
	first := !p.stopped
	p.stopped = true
	p.mu.Unlock()
	if first {
		p.cmd.Process.Signal(os.Interrupt)
		t := time.AfterFunc(30*time.Second, func() { p.cmd.Process.Kill() })
		defer t.Stop()
	}
	<-p.exited
	var exit *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &exit) {
		return p.waitErr
	}
	return nil
}

// tokensFile writes, once per run, the credentials file the bench's
// gateways read, and returns its path.
func (e *env) tokensFile() (string, error) {
	path := filepath.Join(e.dir, "tokens.json")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	data, err := json.Marshal(gateway.Config{Tokens: []gateway.TokenConfig{
		{Token: operatorToken, Role: gateway.RoleOperator, ID: "bench-person"},
		{Token: adminToken, Role: gateway.RoleAdmin, ID: "bench-admin"},
	}})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", fmt.Errorf("write the bench's credentials file: %w", err)
	}
	return path, nil
}
