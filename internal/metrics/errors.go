package metrics

import "github.com/prometheus/client_golang/prometheus"

// Where an error that failed no request happened: the values of
// vigil_errors_total's where label.
const (
	// WhereMCPDrain: handing the caller's notices over with an MCP tool
	// result; they stay queued, and a later result carries them.
	WhereMCPDrain = "mcp_drain"
	// WhereMCPFollow: reading the log for an MCP resource subscription;
	// the next change or the next read-on tries again.
	WhereMCPFollow = "mcp_follow"
)

// errorsTotal counts, for the whole process, errors dealt with without
// failing the request they belong to; each is also logged. It is kept
// here rather than in a Metrics, since it is counted where no Metrics is
// at hand (an MCP server's own goroutines); every Metrics registers it.
var errorsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vigil_errors_total",
	Help: "Errors that failed no request, each also logged, by where they happened: " +
		WhereMCPDrain + " (notices for an MCP tool result, handed over later), " +
		WhereMCPFollow + " (reading the log for an MCP subscription, read again later).",
}, []string{"where"})

func init() {
	// Every known place has a series from the start, so a rate over it is
	// defined before the first error.
	for _, w := range []string{WhereMCPDrain, WhereMCPFollow} {
		errorsTotal.WithLabelValues(w)
	}
}

// CountError counts one error at where, one of the Where constants.
func CountError(where string) { errorsTotal.WithLabelValues(where).Inc() }

func registerErrors(r prometheus.Registerer) { r.MustRegister(errorsTotal) }
