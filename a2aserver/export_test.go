package a2aserver

// AfterSend has a streaming send call f with its task's key once the send
// has returned, before the task is read: a test acts there on what the
// stream must not miss.
func AfterSend(opts Options, f func(key string)) Options {
	opts.afterSend = f
	return opts
}
