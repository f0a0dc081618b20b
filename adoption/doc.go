// Package adoption holds the rules of adopted sessions: taking a coding
// agent's own session under awareness (Adopt: its `adopted` event and its
// link to the agent's transcript), and following that transcript on a
// cadence for turns a person typed straight into the agent (Loop, which
// reads with package upstream, and Apply, which records what a check
// found). The gateway, the sidecar that follows transcripts on another
// machine (vigil follow-upstream) and vigil sim all run these rules, so a
// turn is recorded alike whichever of them saw it.
//
// # What is recorded
//
//   - adopted (log only): actor human; summary "adopted from <catalogId>";
//     payload {catalogId, hostId}; dedupe key "adopted:<session key>", so
//     adopting again records nothing but refreshes the link.
//   - human_direct_message, one per check that found a person's turns:
//     actor human without an id; summary "human message via <catalogId>";
//     payload {turns: n} when n > 1; occurredAt the newest turn's time;
//     dedupe key "upstream:<session key>:<source>:<offset>"
//     (upstream.Result.DedupeID), recorded in the same write as the
//     marker's move past those turns.
//   - upstream_missing (notifies), after three consecutive checks that
//     found no transcript: actor system; summary "upstream missing via
//     <catalogId>"; payload {channel: <catalogId>}; dedupe key
//     "upstream-missing:<session key>:<source>:<link updatedAt>"; the link
//     is deleted in the same write.
//
// # Exactly once
//
// A check reads from the link's marker; Apply takes the report only while
// the link still has that marker and that updatedAt (else the report is
// stale and changes nothing: someone else moved it, or the session was
// adopted again), so two followers of one link never both record a turn,
// and the turns and the marker past them commit together, so a crash
// neither loses nor doubles one. The dedupe keys make a report applied
// twice (a retry after a lost answer) record once.
//
// # Echoes
//
// A person's turn whose text is one of the session's own recent messages
// sent through vigil (the last OwnTexts user messages of its transcript)
// is taken for the agent echoing that message and is not a turn. Texts
// are compared normalised (upstream.Normalize) as SHA-256 digests
// (Digest), so what a follower elsewhere is told of a session's messages
// is never their content. A message sent through vigil while a check runs
// would be missed by it, so a report says which messages it was judged
// against (Report.SeenMessage), and Apply refuses it as stale when a newer
// one came: the next check judges again.
package adoption
