package httpapi

import (
	"runtime"
	"runtime/debug"
	"sync"
	"time"

	"github.com/vigilhq/vigil/clock"
)

// giveBack returns the memory of many closed streams to the operating
// system soon after they closed. The runtime would keep it until a
// collection it runs on its own (a gateway that is quiet once its streams
// are gone may not run one for minutes) and then hand it back a little at
// a time; a gateway whose clients opened a thousand streams and left
// should shrink back at once. The zero value is ready to use.
type giveBack struct {
	clk  clock.Clock // nil: the system clock
	free func()      // nil: freeMemory
	// idle, when set, lets go of what the streams share, before memory is
	// given back with no stream open.
	idle func()

	mu    sync.Mutex // guards the fields below
	open  int        // streams open now
	peak  int        // the most open since memory was last given back
	timer clock.Timer
	given int // how many times memory was given back
}

// Memory is given back giveBackDelay after the last of a burst of closes
// that brought the open streams giveBackAfter or more below their peak.
const (
	giveBackAfter = 256
	giveBackDelay = time.Second
)

func (b *giveBack) opened() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open++
	b.peak = max(b.peak, b.open)
}

func (b *giveBack) closed() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.open--
	if b.peak-b.open < giveBackAfter {
		return
	}
	if b.timer != nil {
		b.timer.Stop()
	}
	b.timer = clock.Or(b.clk).AfterFunc(giveBackDelay, b.run)
}

// run collects garbage and returns what is free to the operating system.
func (b *giveBack) run() {
	b.mu.Lock()
	if b.open == 0 && b.idle != nil {
		b.idle()
	}
	b.mu.Unlock()
	if b.free != nil {
		b.free()
	} else {
		freeMemory()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.peak = b.open
	b.given++
}

// freeMemory collects twice, then returns what is free to the operating
// system. The first collection moves what the streams lent one another
// (buffers kept in sync.Pools) into the pools' victim caches, the second
// frees it; one alone would keep it until the runtime collects again.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
