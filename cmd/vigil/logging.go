package main

import (
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vigilhq/vigil/internal/telemetry"
)

// logFlags are the flags that say what a long-running command logs, and
// how, to standard error.
type logFlags struct {
	level, format string
}

// addLogFlags adds --log-level (starting at level) and, with formats,
// --log-format to cmd.
func addLogFlags(cmd *cobra.Command, level string, formats bool) *logFlags {
	f := &logFlags{format: "text"}
	cmd.Flags().StringVar(&f.level, "log-level", level, "the least level logged: debug, info, warn or error")
	_ = cmd.RegisterFlagCompletionFunc("log-level", cliWords("debug", "info", "warn", "error"))
	if formats {
		cmd.Flags().StringVar(&f.format, "log-format", "text", "log format: text or json")
		_ = cmd.RegisterFlagCompletionFunc("log-format", cliWords("text", "json"))
	}
	return f
}

// logger is the logger the flags ask for, writing to w; a value it does
// not know is a usage error. A line logged inside a traced request carries
// its trace_id and span_id.
func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil || strings.ContainsAny(f.level, "+-") {
		return nil, cliUsagef("--log-level %q: use debug, info, warn or error", f.level)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch f.format {
	case "text":
		return slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return nil, cliUsagef("--log-format %q: use text or json", f.format)
}
