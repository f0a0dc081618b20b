package sqlitestore

import (
	"testing"
	"time"
)

// The checkpointer rests a full interval unless the log is long and is
// being copied fast: then it copies again soon, so the writer's backstop
// never finds much left to copy, while a long log with nothing to copy
// (held by a reader elsewhere) costs no extra passes.
func TestCheckpointsRestBrieflyOnlyWhileALongLogGrowsFast(t *testing.T) {
	fast := int64(fastFramesPerSecond / 10) // per interval
	for _, c := range []struct {
		what   string
		log    int64
		copied int64
		brief  bool
	}{
		{"a short log", longLogFrames - 1, fast * 10, false},
		{"a long log copied fast", longLogFrames, fast, true},
		{"the backstop's length copied fast", writerAutoCheckpoint, fast * 3, true},
		{"a long log with nothing to copy", writerAutoCheckpoint, 0, false},
		{"a long log copied slowly", longLogFrames * 2, fast / 2, false},
	} {
		got := restAfter(c.log, c.copied, checkpointEvery)
		if brief := got < checkpointEvery; brief != c.brief {
			t.Errorf("%s: rest %v, want a brief rest: %v", c.what, got, c.brief)
		}
	}
	if got := restAfter(longLogFrames, 1, time.Microsecond); got >= checkpointEvery {
		t.Errorf("a long log growing by a frame a microsecond: rest %v, want a brief one", got)
	}
}
