package mcpserver

import (
	"context"
	"log/slog"
)

// sdkLogger is log as the MCP SDK is handed it. The SDK logs each request's
// steps (a session connected, initialized, ended) at INFO: three lines for
// every HTTP request, which are a debugging matter for vigil, so they are
// logged at DEBUG; the SDK's warnings and errors keep their level.
func sdkLogger(log *slog.Logger) *slog.Logger { return slog.New(infoAsDebug{log.Handler()}) }

type infoAsDebug struct{ slog.Handler }

func asDebug(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

func (h infoAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, asDebug(l))
}

func (h infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	r.Level = asDebug(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h infoAsDebug) WithAttrs(attrs []slog.Attr) slog.Handler {
	return infoAsDebug{h.Handler.WithAttrs(attrs)}
}

func (h infoAsDebug) WithGroup(name string) slog.Handler {
	return infoAsDebug{h.Handler.WithGroup(name)}
}
