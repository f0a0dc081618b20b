package vigil

// Cursor is a watcher's position on one target.
//
// LastSeen (L) is what the watcher has acknowledged, Notified (N) the frozen
// watermark of the pending notice, Material (M) the newest material event.
// The invariant L <= N <= M always holds. The cursor is synced when N == L
// and pending otherwise.
//
// The methods below are the whole cursor state machine; stores only persist
// their results.
type Cursor struct {
	Watcher   string // agent-qualified key
	Target    SessionRef
	LastSeen  int64
	Notified  int64
	Material  int64
	UpdatedAt int64 // ms since epoch, local clock
	// Ambient marks an ambient watch: an agent's main session watching
	// one of its agent's group, room or channel sessions (WatchAmbient),
	// whose notices are queued without waking it. An explicit watch of
	// the same pair (Watch) makes it an ordinary one.
	Ambient bool
}

// Pending reports whether a notice is outstanding for this cursor.
func (c Cursor) Pending() bool { return c.Notified != c.LastSeen }

// unacknowledged reports whether the watcher has not yet acknowledged the
// target's newest material event (M > L): what the sweep re-notifies and
// Stats.PendingCursors counts.
func (c Cursor) unacknowledged() bool { return c.Material > c.LastSeen }

// seeded is a cursor whose three watermarks all stand at v, an explicit
// watch.
func seeded(watcher string, target SessionRef, v, now int64) Cursor {
	return Cursor{Watcher: watcher, Target: target, LastSeen: v, Notified: v, Material: v, UpdatedAt: now}
}

// markMaterial applies a material event at sequence s: a synced cursor
// freezes its notified watermark at s; material always moves to s.
func (c Cursor) markMaterial(s, now int64) Cursor {
	if !c.Pending() {
		c.Notified = s
	}
	c.Material = s
	c.UpdatedAt = now
	return c
}

// acknowledge applies the watcher's turn consuming the notice: L := N and
// N := max(M, N). It reports whether events arrived after the frozen
// watermark, which calls for exactly one follow-up notice.
func (c Cursor) acknowledge(now int64) (Cursor, bool) {
	oldN := c.Notified
	c.LastSeen = oldN
	if c.Material > c.Notified {
		c.Notified = c.Material
	}
	c.UpdatedAt = now
	return c, c.Material > oldN
}

// recover applies the startup sweep to a cursor with M > L: N := M, so the
// re-queued notice covers everything up to the newest material event.
func (c Cursor) recover(now int64) Cursor {
	c.Notified = c.Material
	c.UpdatedAt = now
	return c
}
