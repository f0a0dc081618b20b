package gateway

import (
	"errors"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
)

// Errors callers branch on; every error the gateway returns for a caller's
// mistake wraps one of them, with a message naming what was wrong.
var (
	ErrInvalid         = errors.New("invalid argument")
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("permission denied")
	ErrNotFound        = errors.New("not found")
	ErrConflict        = errors.New("conflict")
)

// Error codes, as transports report them.
const (
	CodeInvalid         = "invalid_argument"
	CodeUnauthenticated = "unauthenticated"
	CodeForbidden       = "permission_denied"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
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
	case errors.Is(err, vigil.ErrClosed):
		return CodeUnavailable
	}
	return CodeInternal
}
