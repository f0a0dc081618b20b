// Package mcpserver serves vigil's session tools over the Model Context
// Protocol, with the official Go SDK. It is a transport: every tool comes
// from the gateway's one registry; what MCP adds is that each tool result
// also carries the caller's queued notices (as "System: " lines), since MCP
// clients commonly ignore server notifications, and each session is a
// resource a client can subscribe to.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/buildinfo"
	"github.com/vigilhq/vigil/internal/metrics"
)

// Version is reported to clients.
var Version = buildinfo.Version

// SessionURIPrefix starts every session resource's URI.
const SessionURIPrefix = "vigil://session/"

// BookmarkMetaKey names, in the _meta of a notifications/resources/updated,
// a bookmark: {"stateVersion": V}, the followed session's state version
// when it was quiet for the gateway's bookmark interval. A client that does
// not know the key reads the resource again and finds that version.
const BookmarkMetaKey = "io.github.vigilhq/bookmark"

// DeletedMetaKey names, in the _meta of a notifications/resources/updated,
// the followed session's deletion: {"stateVersion": V}, its state version
// when it was deleted. It is the subscription's last notification: the
// subscription has ended, and reading the resource finds no session. A
// session made again with the same key is followed by subscribing again.
const DeletedMetaKey = "io.github.vigilhq/deleted"

// EndedMetaKey names, in the _meta of a notifications/resources/updated,
// the end of the subscription for a reason other than its session's
// deletion, one that following again would not mend: {"stateVersion": V},
// the last state version it told of. It is the subscription's last
// notification, as a deletion's is; the session is followed again by
// subscribing again.
const EndedMetaKey = "io.github.vigilhq/ended"

// NoticesMetaKey names, in the _meta of a tool result that hands notices
// over, the notices as data: a list of {"text", "contextKey", "target",
// "data"} objects (gateway.SystemEventView), one per System: line, in the
// same order. A client that does not know the key reads the lines.
const NoticesMetaKey = "io.github.vigilhq/notices"

// New returns an MCP server acting as caller on g. Its session resources
// report changes to subscribers until ctx ends.
//
// It serves no tasks (TasksExtension): a client on stdio may speak either
// revision, and what a server declares cannot depend on it.
func New(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger) *mcp.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return newServer(g, log, func(*mcp.RequestExtra) (gateway.Caller, context.Context, bool) {
		return caller, context.Background(), true
	}, newSubscriptions(ctx, g, log, nil), nil)
}

// origin tells a server who sent a request message, and gives the context
// of what carried it (over HTTP, the request that brought the message),
// which ends when the carrier does; ok is false once the carrier has
// ended. The SDK runs handlers on contexts of its own, which neither know
// the caller nor end when a client hangs up.
type origin func(extra *mcp.RequestExtra) (c gateway.Caller, carrier context.Context, ok bool)

type callerKey struct{}

// callerOf is the caller a request handler serves, as origin told it.
func callerOf(ctx context.Context) gateway.Caller {
	return ctx.Value(callerKey{}).(gateway.Caller)
}

// newServer returns a server whose requests come from, whose session
// resources subs follows, and which serves ts's tasks unless ts is nil.
func newServer(g *gateway.Gateway, log *slog.Logger, from origin, subs *subscriptions, ts *tasks) *mcp.Server {
	// The SDK answers prompts/list whatever the server has, so the
	// capabilities say prompts, of which vigil has none: a client on
	// 2026-07-28 is told what it may ask. Logging is the SDK's default.
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Prompts: &mcp.PromptCapabilities{}}
	if ts != nil {
		caps.Extensions = map[string]any{TasksExtension: map[string]any{}}
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "vigil", Version: Version}, &mcp.ServerOptions{
		Instructions: "vigil tells you when someone else changed a session you depend on. When a tool result ends " +
			"with a \"System:\" line saying a session changed, call session_status with the changesSince number it " +
			"gives before you act on that session.",
		Logger:             sdkLogger(log),
		SubscribeHandler:   subs.subscribe,
		UnsubscribeHandler: subs.unsubscribe,
		SetCacheable:       uncacheable,
		Capabilities:       caps,
	})
	subs.add(srv)
	srv.AddSendingMiddleware(subs.onlySubscribed, subs.listedOnAck)
	for _, t := range g.Tools().List() {
		if !t.ForModels {
			continue
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema}, toolHandler(g, t, log))
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "session",
		Title:       "A vigil session",
		Description: "A session's status: its facts and state version. Subscribe to hear when its state version moves.",
		MIMEType:    "application/json",
		URITemplate: SessionURIPrefix + "{+sessionKey}", // reserved expansion: keys contain ':'
	}, readSession(g))
	if ts != nil {
		if err := ts.serve(srv); err != nil {
			// The SDK calls tasks/* its own methods: it serves the
			// extension now, and this package should use its support.
			panic(fmt.Sprintf("mcpserver: serve MCP tasks: %v", err))
		}
		// Inside fromCarrier, added next: it needs the caller.
		srv.AddReceivingMiddleware(ts.middleware)
	}
	srv.AddReceivingMiddleware(fromCarrier(g, from))
	return srv
}

// fromCarrier runs each request's handler as the caller that sent it, and
// ends the handler's context when the request's carrier ends: a client
// that hangs up, or whose stream breaks, cancels what it asked for at
// once, as notifications/cancelled does, so a waiting send or turn frees
// its slot and stops. It also names, in the HTTP request metrics, the tool
// each tools/call runs, so MCP's calls are counted and timed per tool as
// the HTTP API's are (under the /mcp route); only names of the registry's
// model tools become labels. A traced carrier's span is the parent of
// what the handler traces. Notifications pass untouched: no caller acts
// in them, and their carrier is answered before they are handled.
func fromCarrier(g *gateway.Gateway, from origin) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if strings.HasPrefix(method, "notifications/") {
				return next(ctx, method, req)
			}
			c, carrier, ok := from(req.GetExtra())
			if !ok {
				return nil, errCancelled
			}
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				if t, ok := g.Tools().Get(p.Name); ok && t.ForModels {
					metrics.SetTool(carrier, t.Name)
				}
			}
			ctx, cancel := context.WithCancel(context.WithValue(ctx, callerKey{}, c))
			defer cancel()
			defer context.AfterFunc(carrier, cancel)()
			if span := trace.SpanFromContext(carrier); span.SpanContext().IsValid() {
				ctx = trace.ContextWithSpan(ctx, span) // the tool's span is the request's child
			}
			return next(ctx, method, req)
		}
	}
}

// errCancelled answers a request cancelled before it was done. Nobody may
// read it (the client has gone or has given up on it), but a client that
// resumes a broken stream gets it in place of the answer.
var errCancelled = &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
	Message: "cancelled: the request was cancelled, or its connection closed, before it was done; " +
		"what it had done by then stays done",
	Data: json.RawMessage(`{"code":"cancelled"}`)}

// uncacheable marks every cacheable result (2026-07-28 lists, reads and
// server/discover) as stale at once and for the caller alone: each is what
// one credential may see now, and a session's status moves with every
// change, so no cache, shared or the client's own, may answer for vigil.
func uncacheable(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.TTLMs = 0
	c.CacheScope = "private"
}

// toolHandler runs a registry tool as the caller, then appends and
// acknowledges the caller's queued system events. A call cancelled before
// it is done hands no notices over: they stay queued for a later result.
func toolHandler(g *gateway.Gateway, t *gateway.Tool, log *slog.Logger) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller := callerOf(ctx)
		var res *mcp.CallToolResult
		if err, ok := ctx.Value(refusalKey{}).(error); ok {
			res = &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: toolError(err)}}}
		} else if res, err = callTool(ctx, t, caller, req.Params.Arguments); err != nil {
			return nil, err
		}
		handNotices(ctx, g, caller, log, res)
		return res, nil
	}
}

type refusalKey struct{}

// withRefusal has the tool handler answer err as the call's refusal, a
// tool error, without running the tool: a middleware that refuses a call
// has the SDK word the result as it words every tool result.
func withRefusal(ctx context.Context, err error) context.Context {
	return context.WithValue(ctx, refusalKey{}, err)
}

// callTool runs a registry tool as the caller and words its outcome as a
// tool result, without notices: a refusal is a result with isError. The
// error is a JSON-RPC error: errCancelled when ctx ended before the call
// was done, an internal error when its output cannot be encoded.
func callTool(ctx context.Context, t *gateway.Tool, caller gateway.Caller, args json.RawMessage) (*mcp.CallToolResult, error) {
	if args == nil {
		// MCP lets a call leave its arguments out: it gives no field.
		// An explicit null is the caller's mistake, refused as such.
		args = json.RawMessage("{}")
	}
	res := &mcp.CallToolResult{}
	out, err := t.Call(ctx, caller, args)
	if ctx.Err() != nil {
		return nil, errCancelled
	}
	if err != nil {
		res.IsError = true
		res.Content = []mcp.Content{&mcp.TextContent{Text: toolError(err)}}
		return res, nil
	}
	text, err := json.Marshal(out)
	if err != nil {
		// A result vigil cannot encode is its own fault, not the
		// caller's: a JSON-RPC internal error, never code 0.
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("internal error: encode the %s result: %v", t.Name, err)}
	}
	res.StructuredContent = out
	res.Content = []mcp.Content{&mcp.TextContent{Text: string(text)}}
	return res, nil
}

// toolError words an error for the model: what was wrong, never internals
// (the gateway's words for a failure that is not the caller's name only a
// request id, and whether to retry).
func toolError(err error) string {
	var failure *gateway.Failure
	if gateway.Code(err) == gateway.CodeInternal && !errors.As(err, &failure) {
		return "internal error: the tool could not run"
	}
	return err.Error()
}

// rpcError turns a gateway error about the resource uri into a JSON-RPC
// error with a standard code, so clients can branch on it:
//
//   - a resource that is not a session, or no such session: the SDK's
//     resource-not-found error (-32602 invalid params, as the MCP
//     specification settles it, with the URI in its data);
//   - a malformed session key, or a session the caller may not reach:
//     -32602 invalid params, the gateway's message saying what was wrong;
//   - a caller over one of its own limits: -32600 invalid request, the
//     gateway's message naming the limit;
//   - anything else: -32603 internal error, saying only what a caller can
//     act on (the store is unavailable, the gateway is at one of its
//     limits, which the message names, or an internal failure).
//
// The data carries {"uri", "code"} with the gateway's error code, so a
// client can tell a refusal from a typo without parsing the message.
func rpcError(uri string, err error) error {
	code := gateway.Code(err)
	if code == gateway.CodeNotFound {
		return mcp.ResourceNotFoundError(uri)
	}
	data, merr := json.Marshal(map[string]string{"uri": uri, "code": code})
	if merr != nil { // cannot happen: two strings
		data = nil
	}
	switch code {
	case gateway.CodeInvalid, gateway.CodeForbidden, gateway.CodeUnauthenticated:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: err.Error(), Data: data}
	case gateway.CodeTooMany:
		// A request the server will not take now: data.code says why.
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: err.Error(), Data: data}
	case gateway.CodeUnavailable:
		msg := "unavailable: the store cannot be reached; try again"
		if failure := (*gateway.Failure)(nil); errors.As(err, &failure) {
			msg = failure.Error() // with the request id of its log line
		} else if errors.Is(err, gateway.ErrUnavailable) && !errors.Is(err, vigil.ErrStoreFailed) {
			msg = err.Error() // a gateway-wide limit, which names itself
		}
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg, Data: data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: toolError(err), Data: data}
}

// handNotices drains the caller's queue into res: the lines go into its
// content and, as data, into its _meta (NoticesMetaKey), and handing them
// over counts as the turn that consumed them, so notices are acknowledged
// (with one follow-up for interleaved changes) and never delivered twice.
func handNotices(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger, res *mcp.CallToolResult) {
	lines, views := deliverNotices(ctx, g, caller, log)
	if len(lines) == 0 {
		return
	}
	res.Content = append(res.Content, lines...)
	meta := mcp.Meta{}
	for k, v := range res.Meta {
		meta[k] = v
	}
	meta[NoticesMetaKey] = views
	res.Meta = meta
}

// deliverNotices drains the caller's queue, as handNotices hands it over:
// a line for each entry, and the entries as data.
func deliverNotices(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger) ([]mcp.Content, []gateway.SystemEventView) {
	if caller.Session == nil {
		return nil, nil
	}
	d, err := g.Engine().Drain(ctx, caller.Session.Key)
	if err != nil {
		// The notices stay queued: a later result carries them, so the
		// call itself has not failed.
		if ctx.Err() != nil {
			log.DebugContext(ctx, "mcp: the client went away before its notices were handed over", "session", caller.Session.Key, "err", err)
			return nil, nil
		}
		log.WarnContext(ctx, "mcp: hand the notices over with a tool result", "session", caller.Session.Key, "err", err)
		metrics.CountError(metrics.WhereMCPDrain)
		return nil, nil
	}
	var out []mcp.Content
	for _, e := range d.Events {
		out = append(out, &mcp.TextContent{Text: "System: " + e.Text})
	}
	// Acknowledged already: the data is read even if the client has gone,
	// and when it cannot be, the lines are handed over without it.
	views, err := g.SystemEventViews(context.WithoutCancel(ctx), caller.Session.Key, d.Events)
	if err != nil {
		log.Warn("mcp: read what the notices handed over cover", "session", caller.Session.Key, "err", err)
		metrics.CountError(metrics.WhereMCPDrain)
		return out, nil
	}
	return out, views
}

func readSession(g *gateway.Gateway) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		caller := callerOf(ctx)
		key, ok := strings.CutPrefix(req.Params.URI, SessionURIPrefix)
		if !ok {
			return nil, mcp.ResourceNotFoundError(req.Params.URI)
		}
		st, err := g.Status(ctx, caller, gateway.StatusInput{SessionKey: key})
		if err != nil {
			return nil, rpcError(req.Params.URI, err)
		}
		b, err := json.Marshal(st)
		if err != nil {
			return nil, rpcError(req.Params.URI, fmt.Errorf("encode the status of %s: %w", key, err))
		}
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
			URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
	}
}

// subscriptions follows, for each session URI subscribed to, the session's
// log, and tells its subscribers when its state version moves and, when it
// was quiet for the bookmark interval, where it stands. A server follows
// nothing while nobody subscribes, and each session once, whoever follows
// it: every subscriber passed the access check when it subscribed.
type subscriptions struct {
	g   *gateway.Gateway
	log *slog.Logger
	ctx context.Context // bounds every follow

	mu      sync.Mutex
	servers []*mcp.Server      // whose sessions subscribe; added before they serve
	follows map[string]*follow // by URI
	// of counts the sessions each MCP session follows: the follows it is
	// among the sessions of.
	of map[*mcp.ServerSession]int
	// turns order the subscribes and unsubscribes of each MCP session to
	// each URI (see inTurn).
	turns map[turnKey]*turn
	// listing holds, for each subscription that subscribe has made and
	// the SDK has not yet put on its own list of subscribers, a channel
	// closed once it has (see listed).
	listing map[turnKey]chan struct{}

	// background counts the follows running, and one more until ctx has
	// ended; ended is set then (under mu), and no follow starts after it,
	// so none is counted once the count may be waited on.
	background *sync.WaitGroup
	ended      bool

	// sdkHandler is the SDK's handling of requests, beneath every
	// middleware (add, sdkForget).
	sdkHandler mcp.MethodHandler

	// runFollower runs a follower for run: (*gateway.Follower).Run, or,
	// in tests, one that ends as the gateway's may.
	runFollower func(*gateway.Follower, context.Context, gateway.FollowReader) error

	// awaiting, when not nil, is called as a subscribe or unsubscribe
	// starts waiting for its turn, or a subscribe for an ending follow to
	// stop (tests).
	awaiting func()
	// subscribed, when not nil, is called as a subscribe returns without
	// error, before the SDK lists what it made (tests).
	subscribed func()
	// pruning, when not nil, is called as a follow has read which MCP
	// sessions live, before it forgets the others (tests).
	pruning func()
}

// newSubscriptions makes the subscriptions of servers living until ctx
// ends. Their follows read the store: background, when not nil, is done
// once ctx has ended and every follow has stopped.
func newSubscriptions(ctx context.Context, g *gateway.Gateway, log *slog.Logger, background *sync.WaitGroup) *subscriptions {
	if background == nil {
		background = new(sync.WaitGroup)
	}
	s := &subscriptions{g: g, log: log, ctx: ctx, follows: map[string]*follow{}, of: map[*mcp.ServerSession]int{},
		turns: map[turnKey]*turn{}, listing: map[turnKey]chan struct{}{}, background: background,
		runFollower: (*gateway.Follower).Run}
	background.Add(1)
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		s.ended = true
		s.mu.Unlock()
		background.Done()
	})
	return s
}

// add makes srv's sessions subscribers: one follower per session serves
// the subscribers of every server added. Called before any other
// receiving middleware is added to srv, it keeps the SDK's own handling
// of requests (sdkHandler).
func (s *subscriptions) add(srv *mcp.Server) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.servers = append(s.servers, srv)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		s.sdkHandler = next // the SDK's: it serves each session's own server
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			var uri string
			ss, _ := req.GetSession().(*mcp.ServerSession)
			switch p := req.GetParams().(type) {
			case *mcp.SubscribeParams:
				uri = p.URI
			case *mcp.UnsubscribeParams:
				uri = p.URI
			case *mcp.SubscriptionsListenParams:
				if p.Notifications == nil {
					return next(ctx, method, req)
				}
				// Listed as the SDK lists them (see listenListed); by
				// the listen's end, whether or not it was acknowledged.
				uris := p.Notifications.ResourceSubscriptions
				defer s.listed(ss, uris...)
				return next(context.WithValue(context.WithValue(ctx, listedLaterKey{}, true), listenKey{}, uris), method, req)
			default:
				return next(ctx, method, req)
			}
			k := turnKey{ss, uri}
			return s.inTurn(ctx, k, func() (mcp.Result, error) {
				defer s.listed(ss, uri)
				return next(context.WithValue(ctx, listedLaterKey{}, true), method, req)
			})
		}
	})
}

// turnKey names an MCP session's subscription to a URI.
type turnKey struct {
	ss  *mcp.ServerSession
	uri string
}

// turn is held by the subscribe or unsubscribe of its key being handled.
type turn struct {
	free  chan struct{} // holds a token while nobody has the turn
	users int           // the requests that have or wait for it, under subscriptions.mu
}

// inTurn runs do, a subscribe or an unsubscribe of k with the SDK's
// handling, once no other of k is being handled. The SDK changes its own
// list of subscribers after these subscriptions' handler has returned: a
// client's unsubscribe and subscribe of one URI handled at once (the SDK
// handles calls concurrently) could otherwise leave the SDK's list and
// these subscriptions disagreeing, a subscription held here but never
// told, since only the SDK's list says whom an update goes to. sdkForget
// takes no turn: a subscribe waiting in its turn for an ending follow
// waits for the follow's sdkForget.
func (s *subscriptions) inTurn(ctx context.Context, k turnKey, do func() (mcp.Result, error)) (mcp.Result, error) {
	s.mu.Lock()
	t := s.turns[k]
	if t == nil {
		t = &turn{free: make(chan struct{}, 1)}
		t.free <- struct{}{}
		s.turns[k] = t
	}
	t.users++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if t.users--; t.users == 0 {
			delete(s.turns, k)
		}
		s.mu.Unlock()
	}()
	select {
	case <-t.free:
	default:
		if s.awaiting != nil {
			s.awaiting()
		}
		select {
		case <-t.free:
		case <-ctx.Done():
			return nil, errCancelled
		}
	}
	defer func() { t.free <- struct{}{} }()
	return do()
}

// listed notes that the subscriptions of ss to uris that subscribe made,
// if any, are on the SDK's list: only from then on does an update of
// their URIs reach them.
func (s *subscriptions) listed(ss *mcp.ServerSession, uris ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, uri := range uris {
		k := turnKey{ss, uri}
		if ch := s.listing[k]; ch != nil {
			close(ch)
			delete(s.listing, k)
		}
	}
}

// listedLaterKey marks the context of a resources/subscribe or a
// subscriptions/listen, whose subscriptions are marked listed once the
// SDK has listed them. A resources/subscribe is listed as the SDK's
// handling of it ends.
type listedLaterKey struct{}

// listenKey marks the context of a subscriptions/listen with the URIs it
// names. The SDK subscribes to them in that order, listing each as its
// subscribe returns and before it subscribes to the next, and
// acknowledges the listen once all are listed (listenListed).
type listenKey struct{}

// listenListed marks listed, as the SDK subscribes to uri for a listen of
// ss, the URIs the listen named before it: those the SDK has listed. A
// follow ending waits for its subscriptions to be listed, and a listen's
// subscribe may wait for another follow to end, so a listen holding its
// earlier subscriptions unlisted could wait on a listen waiting on it.
func (s *subscriptions) listenListed(ctx context.Context, ss *mcp.ServerSession, uri string) {
	uris, _ := ctx.Value(listenKey{}).([]string)
	if i := slices.Index(uris, uri); i > 0 {
		s.listed(ss, uris[:i]...)
	}
}

// listingLocked is the channel closed once the subscription k, just made
// by a request of ctx, is on the SDK's list (listed).
func (s *subscriptions) listingLocked(ctx context.Context, k turnKey) chan struct{} {
	ch := make(chan struct{})
	if ctx.Value(listedLaterKey{}) == nil {
		close(ch)
		return ch
	}
	s.listing[k] = ch
	return ch
}

// sdkForgetKey marks the context of an unsubscribe made by
// sdkForget, which unsubscribe leaves to the SDK.
type sdkForgetKey struct{}

// sdkForget takes ss off the SDK's own list of uri's subscribers, as a
// client's unsubscribe would. The SDK keeps that list apart from these
// subscriptions and empties it only on an unsubscribe: without this, a
// subscription ended by its session's deletion stays on it, and an MCP
// session closed leaves an empty entry for every URI it subscribed to,
// which sessions subscribing to ever new keys would grow without bound.
// Called without mu.
func (s *subscriptions) sdkForget(ss *mcp.ServerSession, uris ...string) {
	s.mu.Lock()
	handle := s.sdkHandler
	s.mu.Unlock()
	if handle == nil {
		return
	}
	ctx := context.WithValue(context.Background(), sdkForgetKey{}, true)
	for _, uri := range uris {
		if _, err := handle(ctx, "resources/unsubscribe", &mcp.UnsubscribeRequest{Session: ss,
			Params: &mcp.UnsubscribeParams{URI: uri}}); err != nil {
			s.log.Warn("mcp: forget a subscription", "uri", uri, "err", err)
		}
	}
}

// each returns the servers whose sessions subscribe.
func (s *subscriptions) each() []*mcp.Server {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.servers
}

// follow is one session's follower and the MCP sessions subscribed to it.
type follow struct {
	// sessions gives, for each MCP session subscribed, what gives its
	// subscription's stream back (see subscribe).
	sessions map[*mcp.ServerSession]func()
	stop     context.CancelFunc
	done     chan struct{} // closed once the follower has stopped
	// ending is set, under subscriptions.mu, once the session followed
	// has been deleted or can no longer be followed: its subscriptions
	// are ending, and a subscribe waits for done, then follows anew.
	ending bool
	// listing holds, for the sessions that subscribed and are not yet on
	// the SDK's list, the channel closed once they are: an update sent
	// before would not reach them (subscriptions.listed).
	listing map[*mcp.ServerSession]chan struct{}
}

// subscribe follows a session the caller may read, like reading it. A
// session need not exist yet to be followed. Each subscription (an MCP
// session subscribed to a URI) holds one of the caller's open streams
// (gateway.HoldStream) until it ends: its follower is shared, but without
// the hold one credential could keep a follower for each of up to
// MaxSubscriptionsPerSession sessions in every MCP session it may open.
// Subscribing again to a URI holds nothing more. Refusals, a stream limit
// among them, are JSON-RPC errors with standard codes (see rpcError). The
// session is followed once this returns, so no change after the answer
// goes unnoticed.
func (s *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) (err error) {
	if s.subscribed != nil {
		defer func() {
			if err == nil {
				s.subscribed()
			}
		}()
	}
	uri := req.Params.URI
	s.listenListed(ctx, req.Session, uri)
	if !strings.HasPrefix(uri, SessionURIPrefix) {
		return mcp.ResourceNotFoundError(uri)
	}
	ref, err := vigil.Ref("", strings.TrimPrefix(uri, SessionURIPrefix))
	if err != nil {
		return rpcError(uri, err)
	}
	if err := callerOf(ctx).Reach(ref); err != nil {
		return rpcError(uri, err)
	}
	s.mu.Lock()
	for {
		fw, ok := s.follows[uri]
		if !ok || !fw.ending {
			break
		}
		// Its session's deletion (or its end) is being told, and its
		// subscriptions end with it: this one follows anew, the session
		// made again, once that follow has gone. It is counted and holds
		// a stream only then, so that a client subscribing again as it
		// is told takes the place of the subscription ending rather than
		// be refused for it.
		s.mu.Unlock()
		if s.awaiting != nil {
			s.awaiting()
		}
		select {
		case <-fw.done:
		case <-ctx.Done():
			return errCancelled
		}
		s.mu.Lock()
	}
	defer s.mu.Unlock()
	fw, ok := s.follows[uri]
	if ok {
		if _, in := fw.sessions[req.Session]; in {
			return nil
		}
	}
	if s.of[req.Session] >= MaxSubscriptionsPerSession {
		return rpcError(uri, fmt.Errorf("%w: an MCP session follows at most %d sessions; unsubscribe from one first",
			gateway.ErrTooMany, MaxSubscriptionsPerSession))
	}
	release, err := s.g.Hold(callerOf(ctx), gateway.HoldStream)
	if err != nil {
		return rpcError(uri, err)
	}
	k := turnKey{req.Session, uri}
	if ok {
		fw.sessions[req.Session] = release
		fw.listing[req.Session] = s.listingLocked(ctx, k)
		s.of[req.Session]++
		return nil
	}
	if s.ended {
		release()
		return rpcError(uri, fmt.Errorf("%w: the gateway is shutting down", gateway.ErrUnavailable))
	}
	f, err := s.g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1})
	if err != nil {
		release()
		return rpcError(uri, fmt.Errorf("follow %s: %w", ref, err))
	}
	followCtx, stop := context.WithCancel(s.ctx)
	listed := s.listingLocked(ctx, k)
	fw = &follow{sessions: map[*mcp.ServerSession]func(){req.Session: release}, stop: stop, done: make(chan struct{}),
		listing: map[*mcp.ServerSession]chan struct{}{req.Session: listed}}
	s.follows[uri] = fw
	s.of[req.Session]++
	s.background.Add(1)
	go func() {
		defer s.background.Done()
		// What the follower hears meanwhile waits in its listener: told
		// before the SDK lists the subscription, it would reach no one.
		select {
		case <-listed:
		case <-followCtx.Done():
		}
		s.run(followCtx, uri, fw, f)
	}()
	return nil
}

// listedOnAck marks listed the subscriptions of a listen as the SDK
// acknowledges it: it does so once it has listed every one.
func (s *subscriptions) listedOnAck(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.SubscriptionsAcknowledgedParams); ok {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			s.listed(ss, p.Notifications.ResourceSubscriptions...)
		}
		return next(ctx, method, req)
	}
}

// onlySubscribed drops an update of a session's resource to an MCP
// session that does not follow it. The SDK keeps its own list of who
// subscribed, and has no way to take an MCP session off it but the
// client's unsubscribe: a subscription that ended because its session was
// deleted stays there, and without this would hear of the session made
// again once anyone else followed it, holding no stream and counted
// nowhere.
//
// A subscription's end (DeletedMetaKey, EndedMetaKey) goes only to the
// subscribers of a follow that is ending: the update names a URI, not the
// follow telling it, and a follow stopped as it ended (its last
// subscriber left) may have been replaced by one whose subscriptions go
// on. While a follow ends, a subscribe waits for it, so the ending follow
// of a URI is the one telling.
func (s *subscriptions) onlySubscribed(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if p, ok := req.GetParams().(*mcp.ResourceUpdatedNotificationParams); ok && method == "notifications/resources/updated" {
			ss, _ := req.GetSession().(*mcp.ServerSession)
			last := p.Meta[DeletedMetaKey] != nil || p.Meta[EndedMetaKey] != nil
			s.mu.Lock()
			fw, ok := s.follows[p.URI]
			_, in := fw.sessionsOf()[ss]
			ending := ok && fw.ending
			s.mu.Unlock()
			if !ok || !in || (last && !ending) {
				return nil, nil
			}
		}
		return next(ctx, method, req)
	}
}

// sessionsOf is fw's subscribers; none when fw is nil.
func (fw *follow) sessionsOf() map[*mcp.ServerSession]func() {
	if fw == nil {
		return nil
	}
	return fw.sessions
}

// MaxSubscriptionsPerSession bounds the sessions one MCP session follows:
// each is a follower of the log, and a session need not exist to be
// subscribed to. Each is also one of its caller's open streams, which the
// gateway's stream limits bound across MCP sessions.
const MaxSubscriptionsPerSession = 1024

// leaveLocked takes ss from the subscribers of fw, if it is one, and
// gives its subscription's stream back. Every way a subscription ends
// comes here.
func (s *subscriptions) leaveLocked(fw *follow, ss *mcp.ServerSession) {
	release, ok := fw.sessions[ss]
	if !ok {
		return
	}
	delete(fw.sessions, ss)
	delete(fw.listing, ss)
	release()
	if s.of[ss]--; s.of[ss] <= 0 {
		delete(s.of, ss)
	}
}

// forget stops following, for ss, every session it subscribed to: ss has
// been closed (its client deleted it, it idled out), and its followers
// go at once rather than at their next tick. It returns once every
// follower no other MCP session needs has stopped.
func (s *subscriptions) forget(ss *mcp.ServerSession) {
	s.mu.Lock()
	var stopped []*follow
	var uris []string
	if s.of[ss] > 0 {
		for uri, fw := range s.follows {
			if _, in := fw.sessions[ss]; in {
				uris = append(uris, uri)
				s.leaveLocked(fw, ss)
				if s.dropIfUnfollowedLocked(uri, fw) {
					stopped = append(stopped, fw)
				}
			}
		}
	}
	delete(s.of, ss)
	s.mu.Unlock()
	s.sdkForget(ss, uris...)
	for _, fw := range stopped {
		<-fw.done
	}
}

// unsubscribe stops following a session once no MCP session of this
// server follows it; it returns when the follower has stopped, so nothing
// is sent for it after the answer.
func (s *subscriptions) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	if ctx.Value(sdkForgetKey{}) != nil {
		return nil // ended here already: only the SDK's list is left
	}
	s.mu.Lock()
	fw, ok := s.follows[req.Params.URI]
	stopped := false
	if ok {
		s.leaveLocked(fw, req.Session)
		stopped = s.dropIfUnfollowedLocked(req.Params.URI, fw)
	}
	s.mu.Unlock()
	if stopped {
		<-fw.done
	}
	return nil
}

// dropIfUnfollowedLocked stops fw once no MCP session follows it, and
// reports whether it did.
func (s *subscriptions) dropIfUnfollowedLocked(uri string, fw *follow) bool {
	if len(fw.sessions) > 0 {
		return false
	}
	fw.stop()
	if s.follows[uri] == fw {
		delete(s.follows, uri)
	}
	return true
}

// pruneEnded forgets the MCP sessions of fw that have ended without
// unsubscribing (the SDK forgets their subscriptions), and stops fw when
// none is left.
func (s *subscriptions) pruneEnded(uri string, fw *follow) {
	// Its subscribers are read before the sessions that live: one that
	// subscribes meanwhile, connected just now as a listen's is, may be
	// missing from the live ones, and is not judged. A subscriber missing
	// from them has ended: an MCP session never lives again.
	s.mu.Lock()
	subscribers := slices.Collect(maps.Keys(fw.sessions))
	s.mu.Unlock()
	live := map[*mcp.ServerSession]bool{}
	for _, srv := range s.each() {
		for ss := range srv.Sessions() {
			live[ss] = true
		}
	}
	if s.pruning != nil {
		s.pruning()
	}
	s.mu.Lock()
	var ended []*mcp.ServerSession
	for _, ss := range subscribers {
		if _, in := fw.sessions[ss]; in && !live[ss] {
			s.leaveLocked(fw, ss)
			ended = append(ended, ss)
		}
	}
	s.dropIfUnfollowedLocked(uri, fw)
	s.mu.Unlock()
	for _, ss := range ended {
		s.sdkForget(ss, uri)
	}
}

// run tells uri's subscribers what f hears until ctx ends: an update for
// each change (a batch read at once is one update), a bookmark for each
// quiet interval. A failed read is logged and counted, and tried again at
// the next change or tick; a pruned position is an update too, since the
// session moved.
//
// However it stops, a follow gives back what its subscriptions still
// hold and is dropped: once ctx ends (the server ending) a subscription
// holds no stream, though it joined the follow as it stopped.
//
// A follow that ends while ctx lives ends its subscriptions: its
// session's deletion is told under DeletedMetaKey, any other end (the
// follower handles a failed read and a pruned position itself, so none
// is expected) under EndedMetaKey. A follow left in s.follows would keep
// its subscribers' streams and tell them nothing more, and a subscribe
// would join it.
func (s *subscriptions) run(ctx context.Context, uri string, fw *follow, f *gateway.Follower) {
	defer close(fw.done)
	// Before done: a subscribe waiting for fw to stop then follows anew.
	defer s.leaveAll(uri, fw)
	defer f.Close()
	updated := func(meta mcp.Meta) {
		// The SDK logs a notification it could not send; it returns no
		// error. A server none of whose sessions subscribe sends nothing.
		for _, srv := range s.each() {
			srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: meta})
		}
	}
	reader := gateway.FollowReader{
		Events: func([]vigil.Event) error { updated(nil); return nil },
		Bookmark: func(v int64) error {
			updated(mcp.Meta{BookmarkMetaKey: map[string]any{"stateVersion": v}})
			return nil
		},
		Tick: func() error { s.pruneEnded(uri, fw); return nil },
		ReadError: func(err error) error {
			s.log.Warn("mcp: follow a subscribed session", "uri", uri, "err", err)
			metrics.CountError(metrics.WhereMCPFollow)
			return nil
		},
		Gap: func(*gateway.HistoryGapError) error { updated(nil); return nil },
	}
	err := s.runFollower(f, ctx, reader)
	var deleted *gateway.SessionDeletedError
	switch {
	case errors.As(err, &deleted):
		// The last word on it: its subscriptions end, and give their
		// streams back.
		s.endAll(uri, fw, updated, mcp.Meta{DeletedMetaKey: map[string]any{"stateVersion": deleted.Version}})
	case ctx.Err() != nil:
		// Unsubscribed, or the server is ending.
	default:
		s.log.Error("mcp: a subscribed session is no longer followed", "uri", uri, "err", err)
		metrics.CountError(metrics.WhereMCPFollow)
		s.endAll(uri, fw, updated, mcp.Meta{EndedMetaKey: map[string]any{"stateVersion": f.Position()}})
	}
}

// endAll ends every subscription of fw, following uri, telling them last
// through updated with meta: its session was deleted, or it cannot be
// followed any more; and takes them off the SDK's list (run gives back
// what they hold as fw stops). A subscribe meanwhile waits for fw to
// stop; one after it follows anew.
func (s *subscriptions) endAll(uri string, fw *follow, updated func(mcp.Meta), meta mcp.Meta) {
	s.mu.Lock()
	fw.ending = true
	ending := slices.Collect(maps.Keys(fw.sessions))
	unlisted := slices.Collect(maps.Values(fw.listing))
	s.mu.Unlock()
	// A subscription joined as the follow ended hears its end only once
	// the SDK lists it: as its subscribe is answered, or as its listen is
	// acknowledged.
	for _, ch := range unlisted {
		select {
		case <-ch:
		case <-s.ctx.Done():
		}
	}
	updated(meta)
	// While fw is ending, a subscribe to uri waits for it to stop: the
	// SDK is told first, so it cannot forget a subscription made anew.
	for _, ss := range ending {
		s.sdkForget(ss, uri)
	}
}

// leaveAll ends every subscription fw still has, and drops fw: it has
// stopped.
func (s *subscriptions) leaveAll(uri string, fw *follow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range fw.sessions {
		s.leaveLocked(fw, ss)
	}
	s.dropIfUnfollowedLocked(uri, fw)
}
