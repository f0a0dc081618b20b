package metrics

import "github.com/vigilhq/vigil/adoption"

// upstreamFamilies are the counters of the gateway's follower of adopted
// sessions' transcripts (zero when it reads none).
var upstreamFamilies = []family[adoption.Stats]{
	counter("vigil_upstream_checks_total", "Checks of adopted sessions' transcripts.",
		func(s adoption.Stats) int64 { return s.Checks }),
	counter("vigil_upstream_check_failures_total", "Checks of adopted sessions' transcripts that failed (a transcript that could not be read, "+
		"a report the store could not take); each is also logged.",
		func(s adoption.Stats) int64 { return s.Failures }),
	counter("vigil_upstream_turns_total", "Turns a person typed straight into an adopted session's agent, recorded.",
		func(s adoption.Stats) int64 { return s.Turns }),
	counter("vigil_upstream_echoes_total", "Turns found that echo one of the session's own messages sent through vigil, not recorded.",
		func(s adoption.Stats) int64 { return s.Echoes }),
	counter("vigil_upstream_missing_total", "Transcripts declared gone after three consecutive missing checks (upstream_missing).",
		func(s adoption.Stats) int64 { return s.Missing }),
	counter("vigil_upstream_blocked_lines_total", "Transcript lines longer than the scan limit, each counted once: no turn after one is read "+
		"until the limit is raised.",
		func(s adoption.Stats) int64 { return s.Blocked }),
	counter("vigil_upstream_malformed_lines_total", "Transcript lines that are not JSON objects, passed.",
		func(s adoption.Stats) int64 { return s.Malformed }),
	counter("vigil_upstream_stale_total", "Checks not applied because the link or the session changed meanwhile (checked again next time).",
		func(s adoption.Stats) int64 { return s.Stale }),
}
