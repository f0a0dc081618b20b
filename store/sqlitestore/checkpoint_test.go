package sqlitestore

import "testing"

// The checkpointer rests between passes only while the log is short; a
// log that grew long is copied again after the next commit, so the
// writer's backstop never finds much left to copy.
func TestCheckpointsRestOnlyWhileTheLogIsShort(t *testing.T) {
	for _, c := range []struct {
		log  int64
		rest bool
	}{{0, true}, {longLogFrames - 1, true}, {longLogFrames, false}, {writerAutoCheckpoint, false}} {
		if got := restAfter(c.log) > 0; got != c.rest {
			t.Errorf("restAfter(%d frames) = %v, want a rest: %v", c.log, restAfter(c.log), c.rest)
		}
	}
}
