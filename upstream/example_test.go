package upstream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/upstream"
)

// A gateway adopts a Claude Code session, stores the link's marker, and
// checks the transcript on its cadence: a person's turn is found once,
// an echo of what vigil sent is not, and a deleted transcript is declared
// missing on the third check.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "upstream-example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "5f0c.jsonl")
	now := time.Date(2026, 3, 4, 9, 0, 0, 0, time.UTC)
	os.WriteFile(path, nil, 0o600) // adoption creates an empty transcript if there is none

	f := upstream.Follower{Roots: []string{dir}, Clock: clock.NewManual(now)}
	m, err := f.Start(ctx, upstream.Claude, path)
	if err != nil {
		fmt.Println(err)
		return
	}
	stored, _ := json.Marshal(m) // kept with the link

	// vigil sent "run the tests"; the agent echoes it; then a person types.
	for _, text := range []string{"run the tests", "hello from the terminal"} {
		row, _ := upstream.HumanRow(upstream.Claude, text, now.Add(time.Minute))
		file, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		file.Write(row)
		file.Close()
	}

	// One tick.
	m, _ = upstream.ParseMarker(stored)
	r, _ := f.Check(ctx, m, []string{"run the tests"})
	fmt.Printf("turns %d (%q), echoes %d, at %s\n", len(r.Turns), r.Turns[0].Text, r.Echoes, r.OccurredAt().Format(time.TimeOnly))
	// Record one human_direct_message under "upstream:<session>:"+r.DedupeID(), then store r.Marker.
	m = r.Marker

	// The transcript is deleted; the counter declares it once.
	os.Remove(path)
	var missing upstream.MissingCounter
	key := "agent:main:claude:t1@" + m.Linked.Format(time.RFC3339Nano)
	for tick := 1; tick <= 4; tick++ {
		r, _ := f.Check(ctx, m, nil)
		if missing.Observe(key, r.Missing) {
			fmt.Printf("tick %d: upstream missing, link dropped\n", tick)
			missing.Forget(key)
			break
		}
		fmt.Printf("tick %d: missing %v\n", tick, r.Missing)
	}
	// Output:
	// turns 1 ("hello from the terminal"), echoes 1, at 09:01:00
	// tick 1: missing true
	// tick 2: missing true
	// tick 3: upstream missing, link dropped
}
