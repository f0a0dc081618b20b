package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func runCmd(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, func(string) string { return "" }, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSimPrintsOneLinePerOp(t *testing.T) {
	code, out, errOut := runCmd(t, "", "sim", filepath.Join("..", "..", "testdata", "scenarios", "coalescing.json"))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if n := strings.Count(out, "\n"); n != 16 {
		t.Fatalf("%d lines, want 16", n)
	}
}

func TestSimReadsStandardInput(t *testing.T) {
	code, out, _ := runCmd(t, `{"ops": [{"op": "versions", "sessions": ["agent:a:main"]}]}`, "sim", "-")
	if code != 0 || !strings.Contains(out, `"versions":{"agent:a:main":0}`) {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestSimRefusesAFileThatIsNotAScenario(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(path, []byte(`{"ops": [`), 0o644)
	code, out, errOut := runCmd(t, "", "sim", path)
	if code != 1 || out != "" || !strings.Contains(errOut, "not a valid scenario file") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

func TestSimReportsAMissingFile(t *testing.T) {
	code, _, errOut := runCmd(t, "", "sim", "/nonexistent/x.json")
	if code != 1 || !strings.Contains(errOut, "no such file") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestAnUnknownCommandExits2PointingAtTheHelp(t *testing.T) {
	code, out, errOut := runCmd(t, "", "frobnicate")
	if code != 2 || out != "" || !strings.Contains(errOut, `unknown command "frobnicate"`) || !strings.Contains(errOut, "vigil --help") ||
		strings.Contains(errOut, "client commands") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestAMistypedCommandSuggestsTheNearestOne(t *testing.T) {
	code, _, errOut := runCmd(t, "", "stauts")
	if code != 2 || !strings.Contains(errOut, "Did you mean this?") || !strings.Contains(errOut, "status") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}
