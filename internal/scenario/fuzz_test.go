package scenario

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FuzzScenario feeds arbitrary bytes to the scenario decoder and replays
// whatever it accepts. Neither may panic; input that is not strict JSON
// (invalid UTF-8, a duplicate name, broken syntax) must be refused; and a
// file that is accepted runs to its end with one JSON line per op, an op
// that is wrong in itself saying so on its own line.
//
//	go test -run X -fuzz FuzzScenario -fuzztime 30s ./internal/scenario
func FuzzScenario(f *testing.F) {
	files, err := filepath.Glob(filepath.Join(scenarioDir, "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no scenarios in %s: %v", scenarioDir, err)
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		`[]`,
		`{"description": "empty", "ops": []}`,
		`[{"op": "spawn", "parent": "agent:a:main", "child": "agent:a:subagent:c"},
		  {"op": "human_message", "session": "agent:a:subagent:c"}, {"op": "restart"},
		  {"op": "drain", "watcher": "agent:a:main"}, {"op": "cursor", "watcher": "agent:a:main", "target": "agent:a:subagent:c"}]`,
		`[{"op": "watch", "watcher": "agent:a:coord", "target": "agent:a:dm:x"},
		  {"op": "repeat", "count": 3, "do": {"op": "human_message", "session": "agent:a:dm:x"}},
		  {"op": "delete", "session": "agent:a:dm:x"}, {"op": "drain", "watcher": "agent:a:coord"}]`,
		`[{"op": "compacted", "session": "agent:a:main", "operationId": "o"}, {"op": "advance_time", "ms": 2678400001},
		  {"op": "compacted", "session": "agent:a:main", "operationId": "o"}, {"op": "prune"},
		  {"op": "status", "session": "agent:a:main", "changesSince": 0, "limit": 1}]`,
		`[{"op": "goal", "session": "agent:a:subagent:g", "actorType": "agent", "actorId": "agent:a:main"},
		  {"op": "run_end", "session": "agent:a:subagent:g", "outcome": "timeout", "requester": "agent:a:main"},
		  {"op": "versions", "sessions": ["agent:a:subagent:g", "agent:b:main"]}, {"op": "reset", "session": "agent:a:main"}]`,
		"[{\"op\": \"peek\", \"watcher\": \"agent:a:\xff\"}]",
		`{"ops": [], "ops": []}`,
		`[{"OP": "peek", "watcher": "agent:a:main"}, {"op": "peek", "Watcher": "agent:a:main"}]`,
		`[{"op": "status", "session": "agent:a:main", "changesSince": 1e3}, {"op": "teleport"}, 7]`,
		`[{"op": "adopt", "session": "agent:a:claude:t"}, {"op": "watch", "watcher": "agent:a:main", "target": "agent:a:claude:t"},
		  {"op": "upstream_human", "session": "agent:a:claude:t", "text": "hi", "echo": true}, {"op": "upstream_human", "session": "agent:a:claude:t"},
		  {"op": "restart"}, {"op": "upstream_missing", "session": "agent:a:claude:t", "ticks": 4}, {"op": "upstream_tick", "session": "agent:b:x:y"}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data)
		if err != nil {
			return // refused, with a reason: that is all bad input may get
		}
		if !utf8.Valid(data) || !jsontext.Value(data).IsValid() {
			t.Fatalf("Parse accepted input that is not strict JSON: %q", data)
		}
		if len(file.Ops) > 40 || replayCost(file.Ops) > 400 {
			t.Skip("too long to replay on every input")
		}
		var out bytes.Buffer
		if err := Run(context.Background(), data, &out); err != nil {
			t.Fatalf("a file that parses did not run: %v", err)
		}
		lines := bytes.Split(bytes.TrimSuffix(out.Bytes(), []byte("\n")), []byte("\n"))
		if len(file.Ops) == 0 {
			lines = nil
		}
		if len(lines) != len(file.Ops) {
			t.Fatalf("%d output lines for %d ops:\n%s", len(lines), len(file.Ops), out.Bytes())
		}
		for i, l := range lines {
			var line struct {
				I *int `json:"i"`
			}
			if err := stdjson.Unmarshal(l, &line); err != nil || line.I == nil || *line.I != i {
				t.Fatalf("line %d is not the output of op %d: %s (%v)", i, i, l, err)
			}
		}
	})
}

// replayCost is about how many ops a replay of ops runs, repeats
// multiplied out.
func replayCost(ops []jsontext.Value) int {
	n := 0
	for _, raw := range ops {
		var o struct {
			Count *int           `json:"count"`
			Do    jsontext.Value `json:"do"`
			Ticks jsontext.Value `json:"ticks"`
		}
		err := json.Unmarshal(raw, &o)
		ticks, _ := strconv.Atoi(string(o.Ticks)) // an upstream op's checks
		if err != nil || o.Count == nil || *o.Count < 1 {
			n += 1 + max(0, ticks)
			continue
		}
		inner := 1
		if o.Do.Kind() == '{' {
			inner = replayCost([]jsontext.Value{o.Do})
		}
		if *o.Count > 1000 || inner > 1000 {
			return 1 << 30
		}
		n += *o.Count * inner
	}
	return n
}
