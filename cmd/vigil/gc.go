package main

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// The collector's target is the process's to set only when the operator
// left GOGC alone: an operator's GOGC always wins.
func gcTunable() bool { return os.Getenv("GOGC") == "" }

// sweepGCPercent is the collector's target while the startup sweep runs.
// The sweep reads every pending cursor and queues a notice for each: the
// heap that lives on grows by a burst, and at its default target the
// collector lets the burst's garbage (the lists read) pile up to as much
// again before it runs, so a loaded gateway's peak depended on when the
// collector happened to run. At this target the peak stays near what the
// sweep holds (docs/performance.md, "What limits the figures"); collecting
// sooner costs the sweep some processor time, once, at startup.
const sweepGCPercent = 50

// sweepGC lowers the collector's target for the startup sweep, unless the
// operator set GOGC, and returns what restores it.
func sweepGC() (restore func()) {
	if !gcTunable() {
		return func() {}
	}
	old := debug.SetGCPercent(sweepGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// gcHeadroom is the least room the collector leaves, once the startup
// sweep is done, between the live heap and the heap at which it runs
// next. Most gateways live in tens of megabytes, and a send leaves about
// 10 KB of garbage: at the default target (the live heap again) the
// collector ran every few thousand sends and took 10 to 19% of the
// processor under a stream of sends (docs/performance.md). A live heap
// of gcHeadroom or more keeps the default target, so a loaded gateway's
// peak, which the memory targets bound, is what it was; a small one
// grows by at most this much.
const gcHeadroom = 64 << 20

// gcPercentFor is the target that leaves gcHeadroom above a live heap of
// live bytes, and never less than the default 100.
func gcPercentFor(live uint64) int {
	live = max(live, 1<<20) // a heap that small is a process starting
	return max(100, int((gcHeadroom*100+live-1)/live))
}

// keepGCHeadroom sets the collector's target to gcPercentFor the live
// heap after each collection, unless the operator set GOGC, and returns
// what stops it and restores the target it found. observe, when set, is
// told each target it sets.
func keepGCHeadroom(observe func(percent int)) (stop func()) {
	if !gcTunable() {
		return func() {}
	}
	k := &gcKeeper{observe: observe, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	k.restore = debug.SetGCPercent(gcPercentFor(k.live()))
	k.arm()
	return k.stop
}

// gcKeeper learns of each collection from a cleanup of an object nothing
// holds, which the runtime runs once a collection has found it
// unreachable; each cleanup arms the next.
type gcKeeper struct {
	mu      sync.Mutex // held while the target is set, so stop is final
	stopped bool
	restore int
	observe func(int)
	sample  []metrics.Sample
}

// gcMark is what a keeper's cleanup hangs on: large enough not to share
// a tiny allocation block with others, which would keep it alive.
type gcMark [32]byte

func (k *gcKeeper) arm() {
	runtime.AddCleanup(new(gcMark), (*gcKeeper).collected, k)
}

func (k *gcKeeper) live() uint64 {
	metrics.Read(k.sample)
	if k.sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return k.sample[0].Value.Uint64()
}

func (k *gcKeeper) collected() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.stopped {
		return
	}
	p := gcPercentFor(k.live())
	debug.SetGCPercent(p)
	// Armed before anyone is told: whoever is told may collect again at
	// once, and a collection before the next mark exists would go unseen.
	k.arm()
	if k.observe != nil {
		k.observe(p)
	}
}

func (k *gcKeeper) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.stopped = true
	debug.SetGCPercent(k.restore)
}
