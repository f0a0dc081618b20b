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
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// Version is reported to clients.
const Version = "0.1.0"

// SessionURIPrefix starts every session resource's URI.
const SessionURIPrefix = "vigil://session/"

// New returns an MCP server acting as caller on g. Its session resources
// report changes to subscribers until ctx ends.
func New(ctx context.Context, g *gateway.Gateway, caller gateway.Caller, log *slog.Logger) *mcp.Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	subs := &subscriptions{caller: caller, uris: map[string]int{}}
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
	for _, t := range g.Tools().List() {
		if !t.ForModels {
			continue
		}
		srv.AddTool(&mcp.Tool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema,
			OutputSchema: t.OutputSchema}, toolHandler(g, caller, t))
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{
		Name:        "session",
		Title:       "A vigil session",
		Description: "A session's status: its facts and state version. Subscribe to hear when its state version moves.",
		MIMEType:    "application/json",
		URITemplate: SessionURIPrefix + "{+sessionKey}", // reserved expansion: keys contain ':'
	}, readSession(g, caller))
	go subs.notify(ctx, g, srv)
	return srv
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
func toolHandler(g *gateway.Gateway, caller gateway.Caller, t *gateway.Tool) mcp.ToolHandler {
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
		res.Content = append(res.Content, deliverNotices(ctx, g, caller)...)
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
func deliverNotices(ctx context.Context, g *gateway.Gateway, caller gateway.Caller) []mcp.Content {
	if caller.Session == nil {
		return nil
	}
	d, err := g.Engine().Drain(ctx, caller.Session.Key)
	if err != nil {
		return nil // the events were put back; the next result carries them
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

// subscriptions counts subscribers per session URI, so only sessions
// someone follows cost a notification.
type subscriptions struct {
	caller gateway.Caller
	mu     sync.Mutex
	uris   map[string]int
}

// subscribe follows a session the caller may read, like reading it. A
// session need not exist yet to be followed. Refusals are JSON-RPC errors
// with standard codes (see rpcError).
func (s *subscriptions) subscribe(_ context.Context, req *mcp.SubscribeRequest) error {
	if !strings.HasPrefix(req.Params.URI, SessionURIPrefix) {
		return mcp.ResourceNotFoundError(req.Params.URI)
	}
	ref, err := vigil.Ref("", strings.TrimPrefix(req.Params.URI, SessionURIPrefix))
	if err != nil {
		return rpcError(req.Params.URI, err)
	}
	if err := s.caller.Reach(ref); err != nil {
		return rpcError(req.Params.URI, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.uris[req.Params.URI]++
	return nil
}

func (s *subscriptions) unsubscribe(_ context.Context, req *mcp.UnsubscribeRequest) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.uris[req.Params.URI]--; s.uris[req.Params.URI] <= 0 {
		delete(s.uris, req.Params.URI)
	}
	return nil
}

func (s *subscriptions) followed(uri string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.uris[uri] > 0
}

func (s *subscriptions) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.uris))
	for u := range s.uris {
		out = append(out, u)
	}
	return out
}

// notify tells subscribers when a session's state version moves: each
// appended event moves its session's version.
func (s *subscriptions) notify(ctx context.Context, g *gateway.Gateway, srv *mcp.Server) {
	updated := func(key string) {
		if uri := SessionURIPrefix + key; s.followed(uri) {
			srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		}
	}
	eng := g.Engine()
	after, _ := eng.LogHorizon(ctx) // on failure, from the start: more hints, none lost
	// A nudge can be missed (another process's announcement lost with its
	// connection): read on now and then regardless.
	tick := time.NewTicker(readOnInterval)
	defer tick.Stop()
	for {
		l := g.Hub().ListenLog(256)
		for open := true; open; {
			select {
			case e, ok := <-l.C:
				switch {
				case !ok:
					open = false // fell behind: assume everything followed moved
					for _, uri := range s.all() {
						srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
					}
				case e.Sequence == 0:
					// A nudge: another process appended; the store has the
					// events in order. A failed read is retried at the next.
					after, _ = readOn(ctx, eng, after, updated)
				default:
					after = max(after, e.Sequence)
					updated(e.SessionKey)
				}
			case <-tick.C:
				after, _ = readOn(ctx, eng, after, updated)
			case <-ctx.Done():
				l.Close()
				return
			}
		}
	}
}

// readOnInterval is how often the notify loop reads the log without a
// nudge.
const readOnInterval = 15 * time.Second

// readOn calls updated with the session of every event after `after`, and
// returns the position it read up to (also when a read fails).
func readOn(ctx context.Context, eng *vigil.Engine, after int64, updated func(key string)) (int64, error) {
	for {
		page, err := eng.Log(ctx, after, 500)
		if err != nil {
			return after, err
		}
		for _, e := range page.Events {
			updated(e.SessionKey)
			after = e.Sequence
		}
		if len(page.Events) < 500 {
			return after, nil
		}
	}
}
