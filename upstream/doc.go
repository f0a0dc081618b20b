// Package upstream follows the transcript a coding agent keeps on disk, so
// that a turn a person typed straight into that agent, not through vigil,
// can be noticed.
//
// # Use
//
// Adopting a session links it to its transcript: [Follower.Start] returns
// a [Marker] at the transcript's current end, which the caller stores with
// the link. On its cadence the caller runs [Follower.Check] with the stored
// marker and the session's recent messages sent through vigil; the
// [Result] holds the person's turns found after the marker, the marker to
// store next, and whether the file was missing. A [MissingCounter] turns
// missing checks into the one declaration the reference makes after three
// in a row. The package keeps no state between calls and imports nothing
// of vigil's but its clock; storing markers, choosing which links to check
// and recording events is the caller's.
//
// # Formats
//
// [Claude] (Claude Code's session files) and [Codex] (Codex's rollout
// files) are registered; [Register] adds others and [Lookup] refuses an
// unknown name with [ErrUnknownFormat]. Each format's classifier says,
// row by row, whether a row is a person's turn or something else (the
// model's output, a tool result, text the harness injects, a sub-agent's
// row, bookkeeping); the comments on each format list what they tell
// apart and how. A turn without text (an image alone) is not reported.
//
// The reference also follows OpenCode and Pi sessions; this package does
// not, yet. OpenCode keeps sessions in a database, not an append-only
// file, and its v1 tables do not record who wrote a message (the
// reference's documentation says so and reports only what cannot be
// mistaken, missing some turns by design): it needs a reader of another
// kind than a byte offset in a file. Pi's v3 session files are
// append-only JSONL and would fit a Format, but an older file is rewritten
// in place when Pi migrates it to v3, which a follower would take for a
// replaced transcript; the reference adopts such sessions without a link
// until they are migrated, and a Pi format here needs that check at Start.
//
// # Guarantees
//
// Bounded reads. A check reads at most the scan limit (Follower.MaxScan,
// 1 MiB unless set) of bytes after the marker, plus at most 8 KiB before
// it to compare fingerprints; Start reads at most one byte more than
// that. Only bytes present when the check began are read: what is
// appended meanwhile waits for the next check.
//
// No skipped bytes. The marker moves only past complete lines, each of
// which was classified; a last line without its line break (a file growing
// while it is read) is left for a later check. A line longer than the scan
// limit is never skipped: the check reports it in Result.Blocked (an error
// wrapping [ErrLineTooLong]) and stays before it, every check, until the
// limit is raised; it may hold a turn. A complete line that is not a JSON
// object of valid UTF-8 is counted in Result.MalformedLines, the first
// [MalformedListed] of a check listed in Result.Malformed (with offset,
// length and what is wrong, wrapping [ErrMalformed]), and the marker moves
// past it: a transcript is only ever appended to, so a complete line can
// never become readable, and stopping at it would stop the following for
// good, losing every later turn, where passing it loses at most that line,
// which the caller can surface. Blank lines hold nothing and are passed.
// A string escaping half of a surrogate pair (\ud83d alone, which
// JavaScript writes for text cut inside an emoji) is valid JSON of valid
// UTF-8: it is read, the half as U+FFFD.
//
// Truncation and replacement. A marker carries fingerprints of the first
// and the last 4 KiB before its offset. A check compares them with the
// file (after reading, so a change during the read is caught too): a file
// shorter than the offset was truncated, different bytes mean another
// file took the path or the file was rewritten. Identity is by content,
// not by inode: a file rewritten atomically with the same bytes before the
// marker continues where it was, and a new file that reuses an inode
// number is not taken for the old one. On truncation or replacement the
// check says so (Result.Restarted) and classifies nothing; the marker it
// returns sends the next check to the beginning of the file. The new
// content was never classified, so starting anywhere else would skip
// bytes; echoes of the session's own messages are still dropped there.
// The marker's Generation, and with it its Source, changes, so dedupe keys
// built from the new offsets never collide with the old ones.
//
// Echoes. A person's turn whose text, normalised ([Normalize]: trimmed,
// runs of white space made one space), equals one of the session's own
// recent messages passed to Check is taken for the agent echoing what
// vigil sent: it is counted in Result.Echoes, not reported, and the marker
// still moves past it. A person typing the very text vigil sent recently
// is therefore missed, as in the reference.
//
// At most once. Every row is classified by the check whose window holds
// it; a check from a marker never reports a row before that marker. So,
// given a persisted marker, no turn before it is reported again. To be
// safe against a crash between recording the turns and persisting the
// marker, record them under the dedupe key
// `upstream:<session>:<Result.DedupeID>` (the reference's key) first: a
// repeated check from the same marker over the same bytes yields the same
// key and records nothing twice. A repeat that also reads bytes appended
// after the crash has another key; storing the event and the marker in one
// transaction closes that gap.
//
// Missing. A check that finds no regular file at the path reports
// Result.Missing without reading; the marker stays. [MissingCounter]
// declares the source gone on the third consecutive missing check of a
// link, a present check starting the count again.
//
// Bad input. An unknown format, a marker that is not valid
// ([Marker.Validate], [ParseMarker]), a path that is not absolute, is
// not valid UTF-8 (a marker, kept as JSON, could not hold it) or lies
// outside Follower.Roots ([ErrOutsideRoots]) is refused with an error and
// nothing is read. No line, however malformed or long, makes a classifier
// panic (FuzzClassify).
package upstream
