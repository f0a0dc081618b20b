package bench

import (
	"bufio"
	"io"
	"strings"
	"testing"
	"time"
)

// Of a session's stream, only the frames of a person's messages count as
// sends heard: not the message frames beside them, nor other signals.
func TestOnlyAPersonsMessageSignalsCountAsSendsHeard(t *testing.T) {
	stream := strings.Join([]string{
		"event: message",
		`data: {"type":"message","message":{"content":"\"kind\":\"human_direct_message\""}}`,
		"",
		"id: 7",
		"event: signal",
		`data: {"sequence":7,"kind":"human_direct_message","actorType":"human"}`,
		"",
		"id: 8",
		"event: signal",
		`data: {"sequence":8,"kind":"goal_changed","actorType":"human"}`,
		"",
		": keep-alive",
		"",
		"id: 9",
		"event: signal",
		`data: {"sequence":9,"kind":"human_direct_message","actorType":"human"}`,
		"",
		"",
	}, "\n")
	n := 0
	err := readSends(bufio.NewReader(strings.NewReader(stream)), func(time.Time) { n++ })
	if err != io.EOF {
		t.Fatalf("readSends ended with %v, want the stream's end", err)
	}
	if n != 2 {
		t.Fatalf("%d sends heard, want 2 (sequences 7 and 9)", n)
	}
}
