package gateway

import (
	"errors"

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
	// and the request may be retried.
	ErrUnavailable = errors.New("unavailable")
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
	case errors.Is(err, ErrUnavailable), errors.Is(err, vigil.ErrClosed):
		return CodeUnavailable
	}
	return CodeInternal
}
