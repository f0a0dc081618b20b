package httpapi

import (
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// Timeouts bound how long a client may take. Zero fields take the
// defaults.
type Timeouts struct {
	// Header bounds reading a request's headers; default 10 s.
	Header time.Duration
	// Body bounds reading a request's body; default 30 s.
	Body time.Duration
	// Write bounds writing a response, and each write of a stream or a
	// long poll's answer; default 30 s.
	Write time.Duration
	// Idle bounds a keep-alive connection between requests; default 60 s.
	Idle time.Duration
}

// Default timeouts.
const (
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	DefaultWriteTimeout  = 30 * time.Second
	DefaultIdleTimeout   = 60 * time.Second
)

func (t Timeouts) withDefaults() Timeouts {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&t.Header, DefaultHeaderTimeout)
	def(&t.Body, DefaultBodyTimeout)
	def(&t.Write, DefaultWriteTimeout)
	def(&t.Idle, DefaultIdleTimeout)
	return t
}

// NewServer returns an http.Server for h with opts' timeouts. Reading the
// body and writing the response are bounded per request by the handler
// New returns, not by the server's ReadTimeout and WriteTimeout: those
// would cut every long poll and stream, since a request's context is
// cancelled when its connection's read deadline passes.
func NewServer(h http.Handler, opts Options, log *slog.Logger) *http.Server {
	t := opts.Timeouts.withDefaults()
	srv := &http.Server{Handler: h, ReadHeaderTimeout: t.Header, IdleTimeout: t.Idle}
	if log != nil {
		srv.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	}
	return srv
}

// deadlines bounds reading the request's body and writing its response.
// Once the body is read the read deadline is lifted, so a long poll is not
// cancelled while it waits; a route that holds its response open (a
// stream, a long poll) calls holdOpen.
func (s *server) deadlines(next http.Handler) http.Handler {
	t := s.opts.Timeouts
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		now := time.Now()
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(now.Add(t.Body)) // not every connection has deadlines
			body := r.Body
			r.Body = &liftOnEOF{ReadCloser: body, rc: rc}
			// net/http closes a connection whose body was left unread
			// (a refusal before reading it) gently, answer first and a
			// pause before the close, only when it finds its own body on
			// the request; with the wrapper left there it closes at once
			// and a client still sending gets a reset instead of the answer.
			defer func() { r.Body = body }()
		}
		_ = rc.SetWriteDeadline(now.Add(t.Body + t.Write))
		next.ServeHTTP(w, r)
	})
}

// liftOnEOF lifts the read deadline once the body has been read whole.
type liftOnEOF struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *liftOnEOF) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// holdOpen lifts w's write deadline for a response that stays open (a
// stream, a long poll) and returns a writer that bounds each write on its
// own instead, so a client that stops reading is still cut off.
func (s *server) holdOpen(w http.ResponseWriter) *paced {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	return &paced{ResponseWriter: w, rc: rc, d: s.opts.Timeouts.Write}
}

// paced sets a write deadline before each write, until it is cut.
type paced struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration

	// mu orders setting the deadline with cut, so that no write moves
	// the deadline past a cut.
	mu     sync.Mutex
	cutOff bool
}

// pace bounds the next write, unless the response was cut.
func (p *paced) pace() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cutOff {
		_ = p.rc.SetWriteDeadline(time.Now().Add(p.d))
	}
}

// cut ends the response's writes at once, and every later one: a write
// blocked on a client that stopped reading fails now instead of at its
// deadline, and so does the response's end. It may be called from any
// goroutine while the handler runs.
func (p *paced) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutOff = true
	_ = p.rc.SetWriteDeadline(time.Now())
}

func (p *paced) Write(b []byte) (int, error) {
	p.pace()
	return p.ResponseWriter.Write(b)
}

func (p *paced) WriteHeader(code int) {
	p.pace()
	p.ResponseWriter.WriteHeader(code)
}

func (p *paced) Flush() {
	p.pace()
	_ = p.rc.Flush()
}

func (p *paced) Unwrap() http.ResponseWriter { return p.ResponseWriter }
