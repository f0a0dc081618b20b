// Package enginetest holds what tests of several packages do to an
// engine: holding its writer so that writes queue into one batch.
package enginetest

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// HoldWrites commits a write that waits until release is called, so that
// the writes queued meanwhile join one batch behind it. release returns
// once the held write is done.
func HoldWrites(t testing.TB, eng *vigil.Engine) (release func()) {
	t.Helper()
	started, released, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- eng.Update(context.Background(), func(context.Context, *vigil.Txn) error {
			close(started)
			<-released
			return nil
		})
	}()
	<-started
	return func() {
		close(released)
		if err := <-done; err != nil {
			t.Errorf("the write held: %v", err)
		}
	}
}
