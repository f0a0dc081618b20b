// Package a2aserver serves vigil's sessions over the Agent2Agent (A2A)
// protocol, revisions 1.0 and 0.3, over the JSON-RPC binding at one
// endpoint; each request is served in the revision its A2A-Version header
// names (none is 0.3, as the specification says). Revision 0.3 is the
// official Go SDK's binding (v03.go); 1.0, for which no Go SDK is served,
// is vigil's own binding written against the specification's JSON schema
// (v10.go, strict10.go). Both are thin: the one mapping onto vigil is
// core.go. It is a transport like mcpserver: every request runs as the
// caller the HTTP layer resolved (credential and acting session) through
// the gateway's operations, so an A2A caller can do nothing its
// credential could not do over HTTP.
//
// The mapping (docs/a2a.md has it row by row):
//
//   - a task is a session: its id and its contextId are the session key;
//   - sending a message without a task is sessions_spawn (the text is the
//     child's task), with a task it is sessions_send into that session;
//   - reading a task is session_status (changesSince asks for the exact
//     delta);
//   - streams carry, as status updates with stateVersion in their
//     metadata, the notices vigil queues for the acting session about that
//     task, and the task's replies; a resubscribe given the stateVersion it
//     last saw is told when the session moved on meanwhile, and a stream
//     that fell behind says so;
//   - push-notification configs are stored with the sessions and deliver
//     the same updates as POSTs signed the Standard Webhooks way, with the
//     config's token as the secret, in the revision they were set through;
//   - cancelling is refused: vigil records sessions, it does not run them.
package a2aserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/a2a"
	"github.com/a2aproject/a2a-go/a2asrv"
	a2alog "github.com/a2aproject/a2a-go/log"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/buildinfo"
	"github.com/vigilhq/vigil/webhook"
)

// Path is where the JSON-RPC endpoint is served.
const Path = "/a2a"

// CardPath is where the public Agent Card is served: the well-known path
// of protocol revision 0.3.
const CardPath = a2asrv.WellKnownAgentCardPath

// ProtocolVersion is the A2A revision a 0.3 Agent Card states.
const ProtocolVersion = "0.3.0"

// VersionHeader is the service parameter (an HTTP header, or a query
// parameter of the same name) a client names the revision it speaks with.
const VersionHeader = "A2A-Version"

// Versions are the revisions vigil serves, newest first, as 1.0's Agent
// Card and its errors name them.
var Versions = []string{"1.0", "0.3"}

// Version is vigil's version, reported in the Agent Card.
var Version = buildinfo.Version

// MaxBodyBytes bounds a JSON-RPC request body unless Options say
// otherwise.
const MaxBodyBytes = 1 << 20

// Resolver authenticates a request and decides who acts, exactly as every
// other transport does.
type Resolver func(*http.Request) (gateway.Caller, error)

// Options configure the handler. The zero value is ready to use.
type Options struct {
	Logger *slog.Logger
	// AllowPush decides whether caller may have vigil POST to u. A push
	// config makes vigil send requests where the caller says, which no
	// other transport lets a credential do, so nil allows it to admin
	// credentials only. It is asked when a config is set and when it is
	// resumed, and sees the URL, not the address each attempt connects
	// to, which DNS may change meanwhile: a rule on addresses belongs in
	// Client's dialer.
	AllowPush func(c gateway.Caller, u *url.URL) error
	// Client POSTs push notifications; nil means webhook.NewClient: a
	// 10 s timeout, no redirects followed, an answer's headers bounded.
	Client *http.Client
	// MaxBodyBytes bounds a request body; 0 means MaxBodyBytes.
	MaxBodyBytes int64
	// Principal finds the credential a stored push config's owner names
	// (gateway.PushOwner), to resume its deliveries after a restart as
	// that credential. A config whose credential it does not find is
	// deleted when the handler starts: it would never be delivered again,
	// yet hold its place under the limits. nil resumes none and deletes
	// none.
	Principal func(owner string) (gateway.Principal, bool)
	// PushLimits bound the push configs kept; the zero value is the
	// defaults.
	PushLimits gateway.PushLimits
	// PushSweepInterval is how often running deliveries are checked
	// against the stored configs; 0 means DefaultPushSweepInterval.
	PushSweepInterval time.Duration
	// PushCounters, when set, is where the handler counts its push
	// deliveries: what was delivered, retried and given up, and how many
	// configs it follows now.
	PushCounters *PushCounters
	// Background, when set, counts the goroutines the handler starts that
	// outlive their requests: the push deliveries, the loop that resumes
	// and sweeps them, and the streams (a 0.3 stream runs on after its
	// request has returned when its client leaves). Each ends once ctx is
	// done; wait on it then, before closing the store they read.
	Background *sync.WaitGroup
	// Clock times the push deliveries' waits: between an update's
	// attempts, before following a task again, and between tries to
	// resume the stored configs. nil means real time.
	Clock clock.Clock

	// afterSend, set by tests, is called by a streaming send once its send
	// has returned, before its task is read.
	afterSend func(key string)
}

type callerKey struct{}

// Handler returns the JSON-RPC endpoint. Streams and push deliveries end
// when ctx does. The stored push configs' deliveries resume before it
// returns (or, when the store does not answer, as soon as it does).
// Every request is resolved first: one that carries no valid credential
// is answered 401 before any method runs, one whose acting session is not
// the credential's to act as is answered 403. Its body is then read (a
// body declared or found larger than the limit is answered 413) and
// checked strictly against the types of the revision it asks for before
// any method runs: one that breaks a rule is answered with a JSON-RPC
// error naming the field, and nothing is done.
func Handler(ctx context.Context, g *gateway.Gateway, resolve Resolver, opts Options) http.Handler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.AllowPush == nil {
		opts.AllowPush = adminsOnly
	}
	if opts.Client == nil {
		opts.Client = webhook.NewClient()
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = MaxBodyBytes
	}
	opts.PushLimits = opts.PushLimits.WithDefaults()
	opts.Clock = clock.Or(opts.Clock)
	if opts.PushSweepInterval <= 0 {
		opts.PushSweepInterval = DefaultPushSweepInterval
	}
	h := &core{ctx: ctx, g: g, log: opts.Logger, opts: opts}
	h.push = newPushes(h)
	resumed := h.push.resume(ctx)
	if resumed != nil {
		h.log.Error("a2a push notifications: resume", "err", resumed)
	}
	h.push.runInBackground(ctx, resumed == nil, opts.PushSweepInterval)
	rpc03 := a2asrv.NewJSONRPCHandler(v03{h})
	rpc10 := v10{h}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := resolve(r)
		if err != nil {
			refuse(w, err)
			return
		}
		body, ok := readBody(w, r, opts.MaxBodyBytes)
		if !ok {
			return
		}
		version, err := requestedVersion(r)
		if err != nil {
			env, _ := checkRequest(body, func(string, jsontext.Value) error { return nil })
			writeError10(w, http.StatusOK, env.ID, err)
			return
		}
		if version == protocol10 {
			rpc10.serve(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)), c, body)
			return
		}
		env, bad := checkRequest(body, checkParams)
		if bad == nil {
			bad = checkID03(env.ID)
		}
		if bad != nil {
			answerError(w, http.StatusOK, env.ID, bad.code, bad.err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		// The SDK's binding writes answers without a media type; a stream
		// replaces this with its own.
		w.Header().Set("Content-Type", "application/json")
		// The binding logs through the logger its request's context
		// carries, else the process's default, which this gateway's level
		// and format do not govern.
		r = r.WithContext(a2alog.WithLogger(context.WithValue(r.Context(), callerKey{}, c), h.log))
		if env.Method != methodDeletePush03 {
			rpc03.ServeHTTP(w, r)
			return
		}
		// The SDK's binding writes nothing for a method that succeeds
		// without a result, which only deleting a push config does; JSON-RPC
		// answers every request, so its null result is written here.
		rw := &writeTracker{ResponseWriter: w}
		rpc03.ServeHTTP(rw, r)
		if !rw.wrote {
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": rawID(env.ID), "result": nil})
		}
	})
}

// methodDeletePush03 is 0.3's method that deletes a push config.
const methodDeletePush03 = "tasks/pushNotificationConfig/delete"

// writeTracker notes whether anything was written through it.
type writeTracker struct {
	http.ResponseWriter
	wrote bool
}

func (t *writeTracker) WriteHeader(status int) {
	t.wrote = true
	t.ResponseWriter.WriteHeader(status)
}

func (t *writeTracker) Write(b []byte) (int, error) {
	t.wrote = true
	return t.ResponseWriter.Write(b)
}

func (t *writeTracker) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// errVersionNotSupported is a revision vigil does not serve.
var errVersionNotSupported = errors.New("version not supported")

// requestedVersion is the revision a request asks for, by its major and
// minor numbers (a patch number does not count): its A2A-Version header,
// or else its query parameter of that name; none is 0.3.
func requestedVersion(r *http.Request) (string, error) {
	v := strings.TrimSpace(r.Header.Get(VersionHeader))
	if v == "" {
		v = strings.TrimSpace(r.URL.Query().Get(VersionHeader))
	}
	if v == "" {
		return protocol03, nil
	}
	parts := strings.Split(v, ".")
	if len(parts) >= 2 && len(parts) <= 3 {
		switch parts[0] + "." + parts[1] {
		case protocol10:
			return protocol10, nil
		case protocol03:
			return protocol03, nil
		}
	}
	return "", fmt.Errorf("vigil serves A2A %s; %s %q is not one of them: %w", strings.Join(Versions, " and "), VersionHeader,
		v, errVersionNotSupported)
}

// readBody reads a request's body whole, up to limit bytes, answering a
// body that is larger (declared so, or found so) or cannot be read itself.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, bool) {
	tooLarge := func() ([]byte, bool) {
		w.Header().Set("Connection", "close") // the rest of the body is not read
		answerError(w, http.StatusRequestEntityTooLarge, nil, codeInvalidRequest,
			fmt.Errorf("the request body is larger than the limit of %d bytes", limit))
		return nil, false
	}
	if r.ContentLength > limit {
		return tooLarge()
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var over *http.MaxBytesError
	switch {
	case errors.As(err, &over):
		return tooLarge()
	case err != nil:
		answerError(w, http.StatusBadRequest, nil, codeParse, fmt.Errorf("could not read the request body: %w", err))
		return nil, false
	}
	return body, true
}

// answerError writes a JSON-RPC error response for the request with the
// given id (nil when it has none that can be echoed), with err's text in
// data.error as the SDK's binding puts it, and the gateway's code in
// data.code.
func answerError(w http.ResponseWriter, status int, id jsontext.Value, code int, err error) {
	var message string
	switch code {
	case codeParse:
		message = a2a.ErrParseError.Error()
	case codeInvalidParams:
		message = a2a.ErrInvalidParams.Error()
	case codeMethodNotFound:
		message = a2a.ErrMethodNotFound.Error()
	default:
		message = a2a.ErrInvalidRequest.Error()
	}
	data := map[string]string{"error": err.Error()}
	if errors.Is(err, gateway.ErrInvalid) {
		data["code"] = gateway.CodeInvalid
	}
	if id == nil {
		id = jsontext.Value("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id),
		"error": map[string]any{"code": code, "message": message, "data": data}})
}

// refuse answers a request that could not be resolved: the HTTP status
// says why (as on vigil's HTTP API) and the body is a JSON-RPC error, so
// either kind of client can read it.
func refuse(w http.ResponseWriter, err error) {
	status := http.StatusBadRequest
	switch gateway.Code(err) {
	case gateway.CodeUnauthenticated:
		status = http.StatusUnauthorized
		w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
	case gateway.CodeForbidden:
		status = http.StatusForbidden
	case gateway.CodeNotFound:
		status = http.StatusNotFound
	case gateway.CodeUnavailable:
		status = http.StatusServiceUnavailable
	case gateway.CodeInternal:
		status = http.StatusInternalServerError
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": nil,
		"error": map[string]any{"code": -32600, "message": err.Error(), "data": map[string]string{"code": gateway.Code(err)}}})
}

// callerOf is the caller Handler resolved; a context without one (a
// handler used outside Handler) acts as nobody and is refused.
func callerOf(ctx context.Context) (gateway.Caller, error) {
	c, ok := ctx.Value(callerKey{}).(gateway.Caller)
	if !ok {
		return gateway.Caller{}, fmt.Errorf("%w: no resolved caller", gateway.ErrUnauthenticated)
	}
	return c, nil
}

func adminsOnly(c gateway.Caller, u *url.URL) error {
	if c.Principal.Role != gateway.RoleAdmin {
		return fmt.Errorf("%w: push notifications make vigil POST to a URL of the caller's choosing, which only admin credentials may ask for",
			gateway.ErrForbidden)
	}
	return nil
}

// rpcError words a gateway error as the A2A error a client can branch on;
// the gateway's own message and code ride along in the error's data.
func rpcError(err error) error {
	if err == nil {
		return nil
	}
	var kind error
	switch gateway.Code(err) {
	case gateway.CodeNotFound:
		kind = a2a.ErrTaskNotFound
	case gateway.CodeInvalid:
		kind = a2a.ErrInvalidParams
	case gateway.CodeForbidden, gateway.CodeUnauthenticated, gateway.CodeConflict:
		kind = a2a.ErrInvalidRequest
	case gateway.CodeTooMany, gateway.CodeUnavailable:
		kind = a2a.ErrServerError
	default:
		if isA2A(err) {
			return err
		}
		// The gateway's words for a failure name only a request id.
		var failure *gateway.Failure
		if errors.As(err, &failure) {
			return fmt.Errorf("%s: %w", failure.Error(), a2a.ErrInternalError)
		}
		return fmt.Errorf("%w: the request could not be served", a2a.ErrInternalError)
	}
	// The gateway's error stays in the chain: 1.0's error details carry
	// its code, which tells a client what to do (close a stream of its
	// own, or retry later) where the protocol's kind alone does not.
	return fmt.Errorf("%w: %w", err, kind)
}

// isA2A reports whether err already is one of the protocol's errors.
func isA2A(err error) bool {
	for _, e := range []error{a2a.ErrTaskNotFound, a2a.ErrInvalidParams, a2a.ErrInvalidRequest, a2a.ErrTaskNotCancelable,
		a2a.ErrUnsupportedContentType, a2a.ErrUnsupportedOperation, a2a.ErrPushNotificationNotSupported, a2a.ErrParseError,
		a2a.ErrAuthenticatedExtendedCardNotConfigured, a2a.ErrServerError} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
