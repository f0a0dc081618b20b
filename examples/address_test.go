package examples_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/internal/testwait"
)

// The examples find the gateway where the vigil CLI does: VIGIL_ADDR.
// VIGIL_URL, their older name, still works, saying once that it is
// deprecated. Each run here is refused (agent main's token may not act as
// agent ops's session), which shows it reached the gateway it was given.
func TestTheRuntimeFindsTheGatewayAtVIGILADDRAndStillAtVIGILURLWithANote(t *testing.T) {
	py := python3(t)
	gw := startGateway(t)
	const note = "VIGIL_URL is deprecated; set VIGIL_ADDR instead"
	for _, c := range []struct {
		name, env string
		notes     int
	}{
		{"VIGIL_ADDR", "VIGIL_ADDR=" + gw.URL, 0},
		{"VIGIL_URL", "VIGIL_URL=" + gw.URL, 1},
		{"both", "VIGIL_ADDR=" + gw.URL + "\x00VIGIL_URL=http://127.0.0.1:1", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, filepath.Join("python-runtime", "runtime.py"),
				"--token", mainToken, "--session", "agent:ops:main", "--once")
			cmd.Env = append(withoutAddress(os.Environ()), "PYTHONDONTWRITEBYTECODE=1")
			cmd.Env = append(cmd.Env, strings.Split(c.env, "\x00")...)
			stdout, stderr := &testwait.Output{}, &testwait.Output{}
			cmd.Stdout, cmd.Stderr = stdout, stderr
			err := cmd.Run()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stdout.String(), "HTTP 403 permission_denied") {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			}
			if n := strings.Count(stderr.String(), note); n != c.notes {
				t.Errorf("the deprecation note %d times, want %d; stderr:\n%s", n, c.notes, stderr)
			}
		})
	}
}

// withoutAddress is env without the gateway's address variables.
func withoutAddress(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "VIGIL_ADDR=") && !strings.HasPrefix(kv, "VIGIL_URL=") {
			out = append(out, kv)
		}
	}
	return out
}
