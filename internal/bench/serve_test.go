package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Anyone on the machine can read a process's command line (ps), so the
// gateways the bench starts take the database's URL, password and all,
// from their environment.
func TestAGatewayTheBenchStartsHasTheDatabaseURLOutOfItsCommandLine(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in gateway is a shell script")
	}
	dir := t.TempDir()
	seen, exe := filepath.Join(dir, "seen"), filepath.Join(dir, "vigil")
	// It notes what it was given before it says it listens, so the note is
	// whole once startServe returns.
	script := "#!/bin/sh\n" +
		"printf 'arg %s\\n' \"$@\" > '" + seen + "'\n" +
		"printf 'env %s\\n' \"$VIGIL_DB\" >> '" + seen + "'\n" +
		"echo '{\"msg\":\"vigil listening\",\"addr\":\"127.0.0.1:1\"}' >&2\n" +
		"exec sleep 60\n"
	if err := os.WriteFile(exe, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	const db = "postgres://vigil:s3cret@db.example/vigil?schema=bench"
	e := &env{cfg: Config{Executable: exe}, dir: dir}
	p, err := e.startServe(t.Context(), db, serveOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	note, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(note)), "\n") {
		if strings.HasPrefix(line, "arg ") && strings.Contains(line, "s3cret") {
			t.Errorf("the gateway's command line holds the password: %q", line)
		}
	}
	if !strings.Contains(string(note), "env "+db+"\n") {
		t.Errorf("the gateway was not given the database in VIGIL_DB:\n%s", note)
	}
}
