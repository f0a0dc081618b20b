package clock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/vigilhq/vigil/clock"
)

func TestSleepReturnsNilOnceTheTimeHasPassed(t *testing.T) {
	if err := clock.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep = %v, want nil", err)
	}
}

func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := clock.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on an ended context = %v, want context.Canceled", err)
	}
}
