package gateway

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// Errors callers branch on; every error the gateway returns for a caller's
// mistake wraps one of them, with a message naming what was wrong.
var (
	ErrInvalid         = errors.New("invalid argument")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("permission denied")
	ErrNotFound        = errors.New("not found")
	ErrConflict        = sessions.ErrConflict
	// ErrTooMany is a caller over one of its own limits.
	ErrTooMany = errors.New("too many requests")
	// ErrUnavailable is a gateway that cannot serve the request now (its
	// store failed, or it is at a gateway-wide limit); nothing was changed
	// and the request may be retried, except after a *Failure with
	// OutcomeUnknown set.
	ErrUnavailable = errors.New("unavailable")
	// errInternal is a failure that is neither the caller's nor the
	// store's: a bug, which retrying does not mend.
	errInternal = errors.New("internal error")
)

// Error codes, as transports report them.
const (
	CodeInvalid         = "invalid_argument"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "permission_denied"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeTooMany         = "too_many_requests"
	CodeUnavailable     = "unavailable"
	CodeInternal        = "internal"
)

// Code classifies an error for a transport.
func Code(err error) string {
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, vigil.ErrBadRequest), errors.Is(err, sessionkey.ErrInvalid),
		errors.Is(err, vigil.ErrSelfWatch), errors.Is(err, vigil.ErrWatcherNotQualified):
		return CodeInvalid
	case errors.Is(err, ErrUnauthenticated):
		return CodeUnauthenticated
	case errors.Is(err, ErrForbidden):
		return CodeForbidden
	case errors.Is(err, ErrNotFound):
		return CodeNotFound
	case errors.Is(err, ErrConflict):
		return CodeConflict
	case errors.Is(err, ErrTooMany):
		return CodeTooMany
	case errors.Is(err, ErrUnavailable), errors.Is(err, vigil.ErrClosed), errors.Is(err, vigil.ErrStoreFailed):
		return CodeUnavailable
	}
	return CodeInternal
}

// Failure is an error that is not the caller's, as a caller is told it:
// whether the store failed (the request may be retried, unless the store
// failed while committing and the outcome is unknown) or something else
// did (a bug: retrying will not help), and the request id under which the
// gateway logged the details. Its message never holds those details: a
// store's error may name the database, its user, host and port.
type Failure struct {
	// RequestID names the log line with the details.
	RequestID string
	// Store is set when the store failed; otherwise it is an internal
	// error.
	Store bool
	// OutcomeUnknown is set when the store failed while committing, so
	// that the change may have been made (vigil.ErrOutcomeUnknown).
	OutcomeUnknown bool
	err            error
}

func (f *Failure) Error() string {
	if f.OutcomeUnknown {
		return "unavailable: the store failed while committing, and whether the change was made is unknown; " +
			"check with session_status changesSince before repeating it (request id " + f.RequestID + ")"
	}
	if f.Store {
		return "unavailable: the store is unavailable, nothing was changed; retry later (request id " + f.RequestID + ")"
	}
	return "internal error: the gateway failed to serve the request; its log has the details under request id " + f.RequestID
}

// Unwrap gives the kind (ErrUnavailable or an internal error) and the
// failure itself, for errors.Is; only Error is for the caller.
func (f *Failure) Unwrap() []error {
	if f.Store {
		return []error{ErrUnavailable, f.err}
	}
	return []error{errInternal, f.err}
}

// Public returns err as a caller may be told it, and is the one place that
// decides so for every transport. An error of the caller's own (its Code
// is anything but unavailable or internal), or a gateway-wide limit, is
// returned as it is. A failure of the store (vigil.ErrStoreFailed), or any
// other error (internal: a bug), is logged in full under a new request id
// and returned as a *Failure that names only that id and whether to retry.
// A *Failure is returned as it is.
func (g *Gateway) Public(err error) error { return g.publicIn(context.Background(), err) }

// publicIn is Public for a request whose context the log line carries
// (with its trace, when it has one).
func (g *Gateway) publicIn(ctx context.Context, err error) error {
	var f *Failure
	if err == nil || errors.As(err, &f) {
		return err
	}
	store := errors.Is(err, vigil.ErrStoreFailed)
	if code := Code(err); code != CodeInternal && !(code == CodeUnavailable && store) {
		return err
	}
	f = &Failure{RequestID: "req-" + randomID(), Store: store, OutcomeUnknown: errors.Is(err, vigil.ErrOutcomeUnknown), err: err}
	if store {
		g.log.WarnContext(ctx, "request failed: the store failed", "requestId", f.RequestID, "err", err)
	} else {
		g.log.ErrorContext(ctx, "request failed: internal error", "requestId", f.RequestID, "err", err)
	}
	return f
}

// public replaces *err by what Public makes of it, unless the caller went
// away (then nobody is told, and nothing is logged as a failure). The
// operations a transport calls defer it.
//
// It also ends a panic in the operation as an internal error, logged
// with its stack under the request id the caller is given: a bug in one
// request must not take the gateway down, which a panic on a goroutine no
// server recovers (MCP's handlers run on the SDK's) would.
func (g *Gateway) public(ctx context.Context, err *error) {
	if v := recover(); v != nil {
		*err = g.publicIn(context.WithoutCancel(ctx), fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
		return
	}
	if *err != nil && ctx.Err() == nil {
		g.conflictData(ctx, *err)
		*err = g.publicIn(ctx, *err)
	}
}
