// Package client is a Go client of a vigil gateway's HTTP API (`vigil
// serve`): every session tool with typed inputs and outputs, the turn long
// poll and reply of an agent runtime, and the two event streams, which
// resume where they stopped after a dropped connection.
//
// It imports nothing of the server (no gateway, engine, store or cgo), so
// a runtime, a bridge or a test harness can use it on its own.
//
// # Who acts
//
// A Client carries a bearer token ([WithToken]) and, optionally, the
// session it acts as ([WithSession], sent as the Vigil-Session header).
// Without a session an operator or admin token acts as a person, and an
// agent token as its agent's main session. [Client.As] gives a copy acting
// as another session. [Client.Turn] and [Client.Reply] always act as the
// session whose turn or reply it is, since only that session (or an admin)
// may take them.
//
// # Errors
//
// Every error answer of the gateway is an [*APIError] carrying the HTTP
// status, the gateway's code and its message, which names the field or
// rule at fault; errors.Is matches it against [ErrInvalidArgument],
// [ErrNotFound], [ErrConflict] and the other code errors. A refused
// precondition (ifStateVersion, ifSynced) is a [*ConflictError] with the
// target's current state version and, for ifSynced, the caller's pending
// notice: reconcile with [Client.Status] and ChangesSince, then retry with
// the new version. Answers 429 and 503 carry the gateway's Retry-After, at
// most [MaxRetryAfter] (30 s), which a stream waits before reconnecting.
// A failure of the gateway's own (500, a failed store's 503) carries the
// RequestID of the log line holding its details.
// An answer that cannot be the gateway's is an [*APIError] without a
// code: a 200 whose Content-Type is not application/json (the gateway
// always sends it), as from a proxy's login page at a wrong base URL,
// names the Content-Type and the path asked, and is never a success, even
// for [Client.Health]. A 200 holding an "error" object (an error answer
// whose status was changed on the way) is the error its code says, with
// status 200, never an empty output. A request that could not be sent or whose answer
// did not arrive returns the transport's error, wrapped with what was
// asked.
//
// # Streams
//
// [Client.Events] follows the signal log and [Client.SessionEvents] one
// session, as range-over-func sequences of [Event]s. When the connection
// drops (a network error, the gateway restarting, nothing heard for the
// idle timeout), the stream reconnects with Last-Event-ID set to the last
// position it saw, so no change is missed and none is seen twice, and
// reports the reconnection as a [Resumed] event. Bookmarks of a quiet
// stream arrive as [Bookmark] events, and a position whose history was
// pruned as a [HistoryGap] event, after which the stream goes on with
// every event still retained. A session's stream whose session is deleted
// ends with a [SessionDeleted] event and is not reopened. A 200 answer
// that is not text/event-stream, or has no Content-Type, is not the
// gateway's (a proxy's page, a wrong base URL): the stream ends at once
// with an [*APIError] naming the Content-Type and the path asked, rather
// than reconnect for ever to the same page. Cancel the context to stop a
// stream.
//
// [Client.OpenEvents] and [Client.OpenSessionEvents] open a stream's first
// connection before they return, so nothing after the return is missed
// and a gateway that cannot be reached is an error at once rather than a
// retry. The Raw option gives each event with its data exactly as the
// gateway sent it ([RawEvent]); ReportDrops says at once that a
// connection dropped, or that an attempt to connect failed, as when the
// gateway refuses the stream at the credential's stream limit (429)
// ([Dropped]), before the stream tries again. An event of a known type
// whose data cannot be read ends the stream with an error naming it.
//
// # Other routes
//
// [Client.Call] reaches any tool by name and [Client.Do] any route; with a
// *json.RawMessage as the output either keeps the answer as the gateway
// sent it, and a json.RawMessage input is sent byte for byte.
package client
