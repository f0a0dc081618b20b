package client

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The gateway's error codes, one per kind of refusal; errors.Is matches an
// [*APIError] against them by its code.
var (
	ErrInvalidArgument  = errors.New("invalid_argument")   // 400: the message names the field or rule
	ErrUnauthenticated  = errors.New("unauthenticated")    // 401: missing or wrong token
	ErrPermissionDenied = errors.New("permission_denied")  // 403
	ErrNotFound         = errors.New("not_found")          // 404: no such session, run or tool
	ErrMethodNotAllowed = errors.New("method_not_allowed") // 405: the route takes another method (Do)
	ErrRequestTimeout   = errors.New("request_timeout")    // 408
	ErrConflict         = errors.New("conflict")           // 409: see ConflictError
	ErrPayloadTooLarge  = errors.New("payload_too_large")  // 413
	ErrTooManyRequests  = errors.New("too_many_requests")  // 429: this credential's limit; see APIError.RetryAfter
	ErrInternal         = errors.New("internal")           // 500
	ErrUnavailable      = errors.New("unavailable")        // 503: safe to retry (see APIError.RetryAfter), unless the message says the outcome is unknown
)

var codeErrors = map[string]error{}

func init() {
	for _, e := range []error{ErrInvalidArgument, ErrUnauthenticated, ErrPermissionDenied, ErrNotFound, ErrMethodNotAllowed,
		ErrRequestTimeout, ErrConflict, ErrPayloadTooLarge, ErrTooManyRequests, ErrInternal, ErrUnavailable} {
		codeErrors[e.Error()] = e
	}
}

// APIError is an error answer of the gateway. A refused request changed
// nothing stored.
type APIError struct {
	// StatusCode is the HTTP status, Code the gateway's code for it
	// (invalid_argument, not_found, ...; empty when the answer was not the
	// gateway's JSON, as from a proxy), Message what the gateway said
	// ("HTTP 404: not_found" when it gave a code without a message).
	StatusCode int
	Code       string
	Message    string
	// RetryAfter is the wait the gateway asked for before trying again
	// (answers 429 and 503), at most MaxRetryAfter, or 0.
	RetryAfter time.Duration
	// RequestID names the gateway's log line holding the details of a
	// failure of its own (500, and a failed store's 503), or is "".
	RequestID string
	// Op is what was asked: the tool's name, or the route.
	Op string
}

func (e *APIError) Error() string {
	return fmt.Sprintf("vigil: %s: %s", e.Op, e.Message)
}

// Is matches the code errors (ErrNotFound, ...) by the error's code.
func (e *APIError) Is(target error) bool {
	return e.Code != "" && codeErrors[e.Code] == target
}

// ConflictError is a 409 answer: a precondition (ifStateVersion,
// ifSynced) was refused, or a label or compaction was already taken.
// Nothing was changed.
type ConflictError struct {
	*APIError
	// Precondition is true when a precondition was refused; StateVersion
	// is then the target's state version at the refusal. Reconcile with
	// Status (ChangesSince the version you acted on), decide again, and
	// retry with IfStateVersion set to StateVersion.
	Precondition bool
	StateVersion int64
	// Notice is, for ifSynced, the caller's pending notice about the
	// target (empty when none is queued), and NoticeData that notice as
	// data.
	Notice     string
	NoticeData *NoticeData
}

// Unwrap gives the *APIError, so errors.As and errors.Is see it.
func (e *ConflictError) Unwrap() error { return e.APIError }

// errorBody is the shape of every error answer.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code         string      `json:"code"`
	Message      string      `json:"message"`
	StateVersion *int64      `json:"stateVersion,omitempty"`
	Notice       string      `json:"notice,omitempty"`
	NoticeData   *NoticeData `json:"noticeData,omitempty"`
	RequestID    string      `json:"requestId,omitempty"`
}

// requestIDHeader carries, as the body's requestId does, the id of the
// gateway's log line of a failure of its own.
const requestIDHeader = "Vigil-Request-Id"

// errorFrom turns an answer that is not 200 into an *APIError or a
// *ConflictError.
func errorFrom(op string, resp *http.Response, body []byte) error {
	// The header too, as it outlives a body a proxy put in place of the
	// gateway's.
	e := &APIError{Op: op, StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After")),
		RequestID: resp.Header.Get(requestIDHeader)}
	var b errorBody
	if json.Unmarshal(body, &b) != nil || b.Error.Code == "" {
		e.Message = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, cmp.Or(shown(body), http.StatusText(resp.StatusCode)))
		return e
	}
	// A code without its message is still the gateway's refusal: the code
	// is kept, and the message says at least what was answered.
	e.Code = b.Error.Code
	e.RequestID = cmp.Or(b.Error.RequestID, e.RequestID)
	e.Message = cmp.Or(b.Error.Message, fmt.Sprintf("HTTP %d: %s", resp.StatusCode, b.Error.Code))
	if resp.StatusCode == http.StatusConflict {
		c := &ConflictError{APIError: e, Notice: b.Error.Notice, NoticeData: b.Error.NoticeData}
		if b.Error.StateVersion != nil {
			c.Precondition, c.StateVersion = true, *b.Error.StateVersion
		}
		return c
	}
	return e
}

// notTheGateways is the error of a 200 answer whose Content-Type is not
// want, or nil. The gateway sends application/json on every answer of its
// API and text/event-stream on its streams, never without a Content-Type:
// another one is a page from something answering in its place (a wrong
// base URL, a proxy's login page, a load balancer's health page). It
// names the Content-Type and the path asked, never the query or the
// base URL's user and password.
func notTheGateways(op string, req *http.Request, resp *http.Response, want string) error {
	got := resp.Header.Get("Content-Type")
	media, _, err := mime.ParseMediaType(got)
	if err == nil && media == want {
		return nil
	}
	what := "no Content-Type"
	if got != "" {
		what = fmt.Sprintf("Content-Type %q", got)
	}
	return &APIError{Op: op, StatusCode: resp.StatusCode, RetryAfter: retryAfter(resp.Header.Get("Retry-After")),
		Message: fmt.Sprintf("HTTP %d with %s from %s, not %s: what answers is not a vigil gateway (is the base URL right?)",
			resp.StatusCode, what, req.URL.EscapedPath(), want)}
}

// errorIn is the error a 200 answer says it is, or nil. No output of the
// gateway has an "error" object (sessions_send's "error" is a text): an
// answer holding one is an error answer whose status was changed on the
// way, and decoding it as the output would give an empty success. It is
// the error its code says, or, without a code, an error showing it.
func errorIn(op string, resp *http.Response, body []byte) error {
	if !bytes.Contains(body, []byte(`"error"`)) {
		return nil // the usual case, without decoding the answer twice
	}
	var b struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Error) == 0 || b.Error[0] != '{' {
		return nil
	}
	err := errorFrom(op, resp, body)
	if ae, ok := err.(*APIError); ok && ae.Code == "" {
		ae.Message = fmt.Sprintf("HTTP %d holding an error, not an output: %s", resp.StatusCode, shown(body))
	}
	return err
}

// shown is an answer's body as an error shows it: cut short, between
// characters, so the message stays UTF-8 whatever the page was.
func shown(body []byte) string {
	text := strings.ToValidUTF8(strings.TrimSpace(string(body)), "\uFFFD")
	if len(text) > 200 {
		cut := 200
		for cut > 0 && !utf8.RuneStart(text[cut]) {
			cut--
		}
		text = text[:cut] + "…"
	}
	return text
}

// MaxRetryAfter is the longest wait an [APIError.RetryAfter] says: a
// Retry-After asking for more (weeks, or a date far ahead, from a proxy
// or a clock set wrong) would have a stream, or a caller retrying, sleep
// for as long. The gateway itself asks for a second.
const MaxRetryAfter = 30 * time.Second

// retryAfter reads a Retry-After header, seconds or an HTTP date, as a
// wait of at most MaxRetryAfter.
func retryAfter(v string) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if digits(v) {
		// More seconds than a Duration holds are the longest wait, not a
		// product that wrapped around.
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return min(max(0, time.Until(t)), MaxRetryAfter)
	}
	return 0
}

// digits reports whether v is a non-empty run of ASCII digits, as
// Retry-After's delay-seconds form is.
func digits(v string) bool {
	for i := range len(v) {
		if v[i] < '0' || v[i] > '9' {
			return false
		}
	}
	return v != ""
}

// invalid is a mistake the client catches before sending anything.
func invalid(op, format string, args ...any) error {
	return &APIError{Op: op, StatusCode: 0, Code: ErrInvalidArgument.Error(), Message: fmt.Sprintf(format, args...)}
}
