package client_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The client is for programs that are not the server: importing it must
// not bring in the gateway, the engine, a store or cgo. It may use what
// vigil keeps for any side that imports nothing of vigil's (redact).
func TestTheClientImportsNothingOfTheServerAndNoCgo(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-deps", "github.com/vigilhq/vigil/client")
	cmd.Env = append(cmd.Environ(), "CGO_ENABLED=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/vigilhq/vigil") && pkg != "github.com/vigilhq/vigil/client" &&
			pkg != "github.com/vigilhq/vigil/internal/redact" {
			t.Errorf("the client imports %s", pkg)
		}
		if pkg == "runtime/cgo" || pkg == "C" {
			t.Errorf("the client needs cgo (%s)", pkg)
		}
	}
}
