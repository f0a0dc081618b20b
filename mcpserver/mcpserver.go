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
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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

// New returns an MCP server acting as caller on g. Its session resources
// report changes to subscribers until ctx ends.
func New(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger) *mcp.Server {
	return newServer(ctx, g, caller, log, serverOptions{})
}

// serverOptions are what a transport adds to a server.
type serverOptions struct {
	// requestContext returns the context of the HTTP request that carried
	// a message, when there is one: the SDK runs handlers on a context of
	// its own, and the request metrics are labelled through the request's.
	requestContext func(*mcp.RequestExtra) (context.Context, bool)
}

func newServer(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger, opts serverOptions) *mcp.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	subs := &subscriptions{g: g, caller: caller, log: log, ctx: ctx, follows: map[string]*follow{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "vigil", Version: Version}, &mcp.ServerOptions{
		Instructions: "vigil tells you when someone else changed a session you depend on. When a tool result ends " +
			"with a \"System:\" line saying a session changed, call session_status with the changesSince number it " +
			"gives before you act on that session.",
		Logger:             log,
		SubscribeHandler:   subs.subscribe,
		UnsubscribeHandler: subs.unsubscribe,
		SetCacheable:       uncacheable,
		// The SDK answers prompts/list whatever the server has, so the
		// capabilities say prompts, of which vigil has none: a client on
		// 2026-07-28 is told what it may ask. Logging is the SDK's default.
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Prompts: &mcp.PromptCapabilities{}},
	})
	subs.srv = srv
	for _, t := range g.Tools().List() {
		if !t.ForModels {
			continue
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema}, toolHandler(g, caller, t, log))
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "session",
		Title:       "A vigil session",
		Description: "A session's status: its facts and state version. Subscribe to hear when its state version moves.",
		MIMEType:    "application/json",
		URITemplate: SessionURIPrefix + "{+sessionKey}", // reserved expansion: keys contain ':'
	}, readSession(g, caller))
	if opts.requestContext != nil {
		srv.AddReceivingMiddleware(labelTools(g, opts.requestContext))
	}
	return srv
}

// labelTools names, in the HTTP request metrics, the tool each tools/call
// runs, so MCP's calls are counted and timed per tool as the HTTP API's
// are (under the /mcp route). Only names of the registry's model tools
// become labels: anything else stays unlabelled, as the SDK refuses it.
func labelTools(g *gateway.Gateway, requestContext func(*mcp.RequestExtra) (context.Context, bool)) mcp.Middleware {
	return func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.CallToolParamsRaw); ok && method == "tools/call" {
				if t, ok := g.Tools().Get(p.Name); ok && t.ForModels {
					if rctx, ok := requestContext(req.GetExtra()); ok {
						metrics.SetTool(rctx, t.Name)
					}
				}
			}
			return next(ctx, method, req)
		}
	}
}

// uncacheable marks every cacheable result (2026-07-28 lists, reads and
// server/discover) as stale at once and for the caller alone: each is what
// one credential may see now, and a session's status moves with every
// change, so no cache, shared or the client's own, may answer for vigil.
func uncacheable(_ context.Context, _ mcp.Request, c *mcp.Cacheable) {
	c.TTLMs = 0
	c.CacheScope = "private"
}

// toolHandler runs a registry tool as the caller, then appends and
// acknowledges the caller's queued system events.
func toolHandler(g *gateway.Gateway, caller gateway.Caller, t *gateway.Tool, log *slog.Logger) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res := &mcp.CallToolResult{}
		out, err := t.Call(ctx, caller, req.Params.Arguments)
		if err != nil {
			res.IsError = true
			res.Content = []mcp.Content{&mcp.TextContent{Text: toolError(err)}}
		} else {
			text, err := json.Marshal(out)
			if err != nil {
				// A result vigil cannot encode is its own fault, not the
				// caller's: a JSON-RPC internal error, never code 0.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
					Message: fmt.Sprintf("internal error: encode the %s result: %v", t.Name, err)}
			}
			res.StructuredContent = out
			res.Content = []mcp.Content{&mcp.TextContent{Text: string(text)}}
		}
		res.Content = append(res.Content, deliverNotices(ctx, g, caller, log)...)
		return res, nil
	}
}

// toolError words an error for the model: what was wrong, never internals.
func toolError(err error) string {
	if gateway.Code(err) == gateway.CodeInternal {
		return "internal error: the tool could not run; try again later"
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
//   - anything else: -32603 internal error, saying only what a caller can
//     act on (the store is unavailable, or an internal failure).
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
	case gateway.CodeUnavailable:
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: "unavailable: the store cannot be reached; try again", Data: data}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: toolError(err), Data: data}
}

// deliverNotices drains the caller's queue: the lines go into the result,
// and handing them over counts as the turn that consumed them, so notices
// are acknowledged (with one follow-up for interleaved changes) and never
// delivered twice.
func deliverNotices(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger) []mcp.Content {
	if caller.Session == nil {
		return nil
	}
	d, err := g.Engine().Drain(ctx, caller.Session.Key)
	if err != nil {
		// The notices stay queued: a later result carries them, so the
		// call itself has not failed.
		if ctx.Err() != nil {
			log.Debug("mcp: the client went away before its notices were handed over", "session", caller.Session.Key, "err", err)
			return nil
		}
		log.Warn("mcp: hand the notices over with a tool result", "session", caller.Session.Key, "err", err)
		metrics.CountError(metrics.WhereMCPDrain)
		return nil
	}
	var out []mcp.Content
	for _, e := range d.Events {
		out = append(out, &mcp.TextContent{Text: "System: " + e.Text})
	}
	return out
}

func readSession(g *gateway.Gateway, caller gateway.Caller) mcp.ResourceHandler {
	return func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
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
// nothing while nobody subscribes.
type subscriptions struct {
	g      *gateway.Gateway
	caller gateway.Caller
	log    *slog.Logger
	ctx    context.Context // bounds every follow
	srv    *mcp.Server     // set by newServer before it serves

	mu      sync.Mutex
	follows map[string]*follow // by URI
}

// follow is one session's follower and the MCP sessions subscribed to it.
type follow struct {
	sessions map[*mcp.ServerSession]bool
	stop     context.CancelFunc
	done     chan struct{} // closed once the follower has stopped
}

// subscribe follows a session the caller may read, like reading it. A
// session need not exist yet to be followed. Refusals are JSON-RPC errors
// with standard codes (see rpcError). The session is followed once this
// returns, so no change after the answer goes unnoticed.
func (s *subscriptions) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if !strings.HasPrefix(uri, SessionURIPrefix) {
		return mcp.ResourceNotFoundError(uri)
	}
	ref, err := vigil.Ref("", strings.TrimPrefix(uri, SessionURIPrefix))
	if err != nil {
		return rpcError(uri, err)
	}
	if err := s.caller.Reach(ref); err != nil {
		return rpcError(uri, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fw, ok := s.follows[uri]; ok {
		fw.sessions[req.Session] = true
		return nil
	}
	f, err := s.g.Follow(ctx, gateway.FollowOptions{Session: &ref, After: -1})
	if err != nil {
		return rpcError(uri, fmt.Errorf("follow %s: %w", ref, err))
	}
	followCtx, stop := context.WithCancel(s.ctx)
	fw := &follow{sessions: map[*mcp.ServerSession]bool{req.Session: true}, stop: stop, done: make(chan struct{})}
	s.follows[uri] = fw
	go s.run(followCtx, uri, fw, f)
	return nil
}

// unsubscribe stops following a session once no MCP session of this
// server follows it; it returns when the follower has stopped, so nothing
// is sent for it after the answer.
func (s *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	fw, ok := s.follows[req.Params.URI]
	stopped := false
	if ok {
		delete(fw.sessions, req.Session)
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
	live := map[*mcp.ServerSession]bool{}
	for ss := range s.srv.Sessions() {
		live[ss] = true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for ss := range fw.sessions {
		if !live[ss] {
			delete(fw.sessions, ss)
		}
	}
	s.dropIfUnfollowedLocked(uri, fw)
}

// run tells uri's subscribers what f hears until ctx ends: an update for
// each change (a batch read at once is one update), a bookmark for each
// quiet interval. A failed read is logged and counted, and tried again at
// the next change or tick; a pruned position is an update too, since the
// session moved.
func (s *subscriptions) run(ctx context.Context, uri string, fw *follow, f *gateway.Follower) {
	defer close(fw.done)
	defer f.Close()
	updated := func(meta mcp.Meta) {
		// The SDK logs a notification it could not send; it returns no error.
		s.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri, Meta: meta})
	}
	err := f.Run(ctx, gateway.FollowReader{
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
	})
	if ctx.Err() == nil {
		s.log.Error("mcp: a subscribed session is no longer followed", "uri", uri, "err", err)
	}
}
