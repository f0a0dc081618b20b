package mcpserver

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
)

// DefaultFinishTimeout is how long, once its input has ended, a stdio
// server goes on with the requests it had read before it cancels them.
const DefaultFinishTimeout = 30 * time.Second

// StdioOptions configure StdioTransportWith. The zero value is ready to use.
type StdioOptions struct {
	// FinishTimeout bounds how long, once the input has ended, the
	// requests read before its end may take to be answered; 0 means
	// DefaultFinishTimeout, less than 0 cancels them at once.
	FinishTimeout time.Duration
	// Clock times FinishTimeout; nil means the system clock.
	Clock clock.Clock
}

// StdioTransport is StdioTransportWith with the zero StdioOptions.
func StdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	return StdioTransportWith(r, w, StdioOptions{})
}

// StdioTransportWith is MCP over r and w as newline-delimited JSON, as
// the SDK's IOTransport speaks it, holding each message to the strict
// rules of syntax the HTTP transport keeps (see checkMessage): a message
// that gives a member twice or holds invalid UTF-8 is answered with an
// Invalid Request error naming the member and never reaches the SDK,
// whose decoder would take the last of two members and replace invalid
// bytes. A notification or a response so refused has no answer and is
// dropped. Within a tool's arguments the tool refuses such input itself,
// as a tool result.
//
// Messages are read as the SDK reads them, one JSON value after another
// whatever lines they span, and held to its limits: a message larger than
// its limit, one followed on its line by anything but its end, or input
// that is not JSON ends the session, as the SDK would end it.
//
// The end of the input ends the session only once every request read
// before it has been answered (a client that pipes its requests in and
// closes its end reads every answer), once an answer cannot be written,
// or once opts.FinishTimeout has passed: the SDK then cancels the
// requests still running, unanswered.
func StdioTransportWith(r io.Reader, w io.Writer, opts StdioOptions) mcp.Transport {
	finish := cmp.Or(opts.FinishTimeout, DefaultFinishTimeout)
	due := newAnswersDue(finish, clock.Or(opts.Clock))
	out := &lineWriter{w: w, due: due}
	in := &frameLimit{r: r, limit: mcp.DefaultMaxLineLength}
	return &mcp.IOTransport{
		Reader: &checkedMessages{in: in, dec: json.NewDecoder(in), out: out, due: due, closed: make(chan struct{})},
		Writer: out,
	}
}

// lineWriter writes whole messages to w one at a time: the SDK's and the
// refusals checkedMessages answers, from two goroutines. It tells due of
// the SDK's answers.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	due *answersDue
}

func (l *lineWriter) Write(p []byte) (int, error) {
	n, err := l.write(p)
	l.due.written(p, err)
	return n, err
}

// write writes p, telling due nothing: for the refusals, which answer no
// request the SDK was handed.
func (l *lineWriter) write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lineWriter) Close() error { return nil }

// answersDue counts the requests handed to the SDK and not yet answered,
// so that the end of the input waits for their answers.
type answersDue struct {
	finish time.Duration
	clock  clock.Clock

	mu      sync.Mutex         // guards what follows; taken alone, never with lineWriter.mu
	due     map[jsonrpc.ID]int // by request id, how many are unanswered
	ended   bool               // the input has ended
	settled chan struct{}      // closed once the end of the input may be handed on
	done    bool               // settled is closed

	// finishing, when not nil, is called once the input has ended and
	// FinishTimeout runs (tests).
	finishing func()
}

func newAnswersDue(finish time.Duration, c clock.Clock) *answersDue {
	return &answersDue{finish: finish, clock: c, due: map[jsonrpc.ID]int{}, settled: make(chan struct{})}
}

// settleLocked lets the end of the input be handed on.
func (a *answersDue) settleLocked() {
	if !a.done {
		a.done = true
		close(a.settled)
	}
}

// read notes a message handed to the SDK: a request (alone or in a batch)
// is due an answer, and one its client cancels is due none.
func (a *answersDue) read(msg []byte) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, m := range messages(msg) {
		req, ok := m.(*jsonrpc.Request)
		switch {
		case !ok:
		case req.IsCall():
			a.due[req.ID]++
		case req.Method == "notifications/cancelled":
			var p struct {
				RequestID any `json:"requestId"`
			}
			if json.Unmarshal(req.Params, &p) == nil {
				if id, err := jsonrpc.MakeID(p.RequestID); err == nil {
					a.answeredLocked(id)
				}
			}
		}
	}
}

// written notes what the SDK wrote: the answers in it are no longer due.
// Once a write has failed no answer reaches the client, and none is waited
// for.
func (a *answersDue) written(p []byte, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.settleLocked()
		return
	}
	for _, m := range messages(p) {
		if resp, ok := m.(*jsonrpc.Response); ok {
			a.answeredLocked(resp.ID)
		}
	}
}

func (a *answersDue) answeredLocked(id jsonrpc.ID) {
	if a.due[id] > 1 {
		a.due[id]--
		return
	}
	delete(a.due, id)
	if a.ended && len(a.due) == 0 {
		a.settleLocked()
	}
}

// end notes the end of the input and waits until it may be handed on:
// nothing is due, an answer could not be written, the finish timeout has
// passed, or closed is closed.
func (a *answersDue) end(closed <-chan struct{}) {
	a.mu.Lock()
	a.ended = true
	if len(a.due) == 0 || a.finish < 0 {
		a.settleLocked()
	}
	a.mu.Unlock()
	select {
	case <-a.settled:
		return
	default:
	}
	t := a.clock.AfterFunc(a.finish, func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.settleLocked()
	})
	defer t.Stop()
	if a.finishing != nil {
		a.finishing()
	}
	select {
	case <-a.settled:
	case <-closed:
	}
}

// messages decodes msg, one message or a batch, skipping what is no
// message.
func messages(msg []byte) []jsonrpc.Message {
	b := bytes.TrimSpace(msg)
	var raws []json.RawMessage
	if len(b) > 0 && b[0] == '[' {
		if json.Unmarshal(b, &raws) != nil {
			return nil
		}
	} else {
		raws = []json.RawMessage{b}
	}
	var out []jsonrpc.Message
	for _, raw := range raws {
		if m, err := jsonrpc.DecodeMessage(raw); err == nil {
			out = append(out, m)
		}
	}
	return out
}

// frameLimit fails a read once the message being read has taken limit
// bytes of r since reset, as the SDK bounds what its decoder buffers.
type frameLimit struct {
	r            io.Reader
	limit, count int
}

func (f *frameLimit) Read(p []byte) (int, error) {
	if f.count >= f.limit {
		return 0, fmt.Errorf("read a message: larger than %d bytes", f.limit)
	}
	p = p[:min(len(p), f.limit-f.count)]
	n, err := f.r.Read(p)
	f.count += n
	return n, err
}

func (f *frameLimit) reset() { f.count = 0 }

// checkedMessages hands on, each on a line of its own, the messages of in
// that keep the strict rules, and answers the others on out. It hands the
// end of in on only once due allows.
type checkedMessages struct {
	in  *frameLimit
	dec *json.Decoder // reads in
	out *lineWriter
	due *answersDue
	// pending is what of the message read last is still to be handed on.
	pending []byte
	err     error // the input's error, given once pending is empty

	closeOnce sync.Once
	closed    chan struct{} // closed by Close: the session is over
}

func (c *checkedMessages) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			c.due.end(c.closed)
			return 0, c.err
		}
		c.pending, c.err = c.next()
		if len(c.pending) > 0 {
			c.due.read(c.pending)
		}
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// Close ends a wait for the answers due: the SDK has closed the session.
func (c *checkedMessages) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return nil
}

// next reads the next message and returns it with its line's end, or
// nothing for a refused one.
func (c *checkedMessages) next() ([]byte, error) {
	var msg json.RawMessage
	if err := c.dec.Decode(&msg); err != nil {
		return nil, err
	}
	c.in.reset()
	var after [1]byte
	if n, _ := c.dec.Buffered().Read(after[:]); n > 0 && after[0] != '\n' && after[0] != '\r' {
		return nil, errors.New("read a message: followed on its line by more than its end")
	}
	if c.refuse(msg) {
		return nil, nil
	}
	return append(msg, '\n'), nil
}

// refuse answers a message that breaks the strict rules, and reports
// whether it did.
func (c *checkedMessages) refuse(msg []byte) bool {
	err := gateway.CheckJSON(msg, "/params/arguments")
	if err == nil {
		return false
	}
	id, ok := requestID(msg)
	if !ok {
		return true // a notification or a response: JSON-RPC gives it no answer
	}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32600, "message": err.Error(), "data": map[string]string{"code": gateway.Code(err)}}})
	_, _ = c.out.write(append(answer, '\n')) // a failed write ends the session at the SDK's next one
	return true
}

// requestID is the id of msg, a JSON-RPC request to be answered: null for
// a batch or an id given twice, and ok false for a notification or a
// response (a result or an error, to a request of the server's): a client
// would take an answer to its response for the answer to its own request
// of that id.
func requestID(msg []byte) (id json.RawMessage, ok bool) {
	null := json.RawMessage("null")
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return null, true
	}
	found := 0
	method, response := false, false
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return null, true
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return null, true
		}
		switch name {
		case "id":
			id, found = value, found+1
		case "method":
			method = true
		case "result", "error":
			response = true
		}
	}
	switch {
	case found == 0 || (response && !method):
		return nil, false
	case found == 1:
		return id, true
	}
	return null, true
}
