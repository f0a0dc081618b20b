package vigil

// AwaitQueuedWrites blocks until n writes wait behind the one committing,
// so a test can order writes into one batch without sleeping.
func (e *Engine) AwaitQueuedWrites(n int) { e.writes.awaitQueued(n) }
