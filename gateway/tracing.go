package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
)

// Attribute keys of a tool call's span besides the GenAI conventions'.
const (
	attrCallerRole    = attribute.Key("vigil.caller.role")
	attrCallerSession = attribute.Key("vigil.caller.session")
	attrRequestID     = attribute.Key("vigil.request_id")
)

// toolTracing starts the span of every tool call, whichever transport
// made it: a tool's call is traced here only, so transports stay thin.
// Off (the engine has no TracerProvider), it starts nothing.
type toolTracing struct {
	on     bool
	tracer trace.Tracer
}

func newToolTracing(tp trace.TracerProvider) toolTracing {
	if tp == nil {
		return toolTracing{}
	}
	return toolTracing{on: true, tracer: tp.Tracer("github.com/vigilhq/vigil/gateway")}
}

// traceTool runs call, the tool named name called by c, in the span of an
// execute_tool operation of the GenAI conventions. The conversation is the
// session the tool acted on: the one its output names, else the one its
// input names, else the caller's own. in is the tool's input, decoded or
// as JSON.
func (tt toolTracing) traceTool(ctx context.Context, name string, c Caller, in any, call func(context.Context) (any, error)) (any, error) {
	if !tt.on {
		return call(ctx)
	}
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(name),
		attrCallerRole.String(string(c.Principal.Role))}
	if s := c.Session; s != nil {
		attrs = append(attrs, semconv.GenAIAgentID(s.AgentID), attrCallerSession.String(s.String()))
	} else if c.Principal.Role == RoleAgent {
		attrs = append(attrs, semconv.GenAIAgentID(c.Principal.ID))
	}
	ctx, span := tt.tracer.Start(ctx, "execute_tool "+name, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
	defer span.End()
	out, err := call(ctx)
	if !span.IsRecording() {
		return out, err
	}
	if key := sessionOf(out); key != "" {
		span.SetAttributes(semconv.GenAIConversationID(key))
	} else if key := sessionOf(in); key != "" {
		span.SetAttributes(semconv.GenAIConversationID(key))
	} else if c.Session != nil {
		span.SetAttributes(semconv.GenAIConversationID(c.Session.String()))
	}
	if err != nil {
		// The code only: an error's text may quote what was asked. A
		// caller that went away is not the gateway's failure.
		code := Code(err)
		if ctx.Err() != nil {
			code = "cancelled"
		}
		span.SetStatus(codes.Error, "")
		span.SetAttributes(semconv.ErrorTypeKey.String(code))
		if f := (*Failure)(nil); errors.As(err, &f) {
			span.SetAttributes(attrRequestID.String(f.RequestID))
		}
	}
	return out, err
}

// sessionOf is the session a tool's input or output names in its
// sessionKey (and agentId) fields, as a conversation id: the key as
// vigil.SessionRef words it. "" when it names none, or a key or agent id
// that does not parse: an input is read before it is checked, and its
// fields may hold anything, at any length.
func sessionOf(v any) string {
	var key, agent string
	if raw, ok := v.(json.RawMessage); ok {
		var named struct {
			SessionKey string `json:"sessionKey"`
			AgentID    string `json:"agentId"`
		}
		if json.Unmarshal(raw, &named) != nil {
			return ""
		}
		key, agent = named.SessionKey, named.AgentID
	} else {
		rv := reflect.ValueOf(v)
		for rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		if rv.Kind() != reflect.Struct {
			return ""
		}
		if f := rv.FieldByName("SessionKey"); f.Kind() == reflect.String {
			key = f.String()
		}
		if f := rv.FieldByName("AgentID"); f.Kind() == reflect.String {
			agent = f.String()
		}
	}
	k, err := sessionkey.Parse(key)
	if err != nil {
		return ""
	}
	if agent == "" {
		return k.String()
	}
	if agent, err = sessionkey.ParseAgentID(agent); err != nil {
		return ""
	}
	return vigil.SessionRef{AgentID: agent, Key: k.String()}.String()
}
