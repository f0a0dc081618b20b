package mcpserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
)

// StdioTransport is MCP over r and w as newline-delimited JSON, as the
// SDK's IOTransport speaks it, holding each message to the strict rules of
// syntax the HTTP transport keeps (see checkMessage): a message that gives
// a member twice or holds invalid UTF-8 is answered with an Invalid Request
// error naming the member and never reaches the SDK, whose decoder would
// take the last of two members and replace invalid bytes. A notification
// or a response so refused has no answer and is dropped. Within a tool's
// arguments the tool refuses such input itself, as a tool result.
//
// Messages are read as the SDK reads them, one JSON value after another
// whatever lines they span, and held to its limits: a message larger than
// its limit, one followed on its line by anything but its end, or input
// that is not JSON ends the session, as the SDK would end it.
func StdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	out := &lineWriter{w: w}
	in := &frameLimit{r: r, limit: mcp.DefaultMaxLineLength}
	return &mcp.IOTransport{
		Reader: io.NopCloser(&checkedMessages{in: in, dec: json.NewDecoder(in), out: out}),
		Writer: out,
	}
}

// lineWriter writes whole messages to w one at a time: the SDK's and the
// refusals checkedMessages answers, from two goroutines.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lineWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (*lineWriter) Close() error { return nil }

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
// that keep the strict rules, and answers the others on out.
type checkedMessages struct {
	in  *frameLimit
	dec *json.Decoder // reads in
	out *lineWriter
	// pending is what of the message read last is still to be handed on.
	pending []byte
	err     error // the input's error, given once pending is empty
}

func (c *checkedMessages) Read(p []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.pending, c.err = c.next()
	}
	n := copy(p, c.pending)
	c.pending = c.pending[n:]
	return n, nil
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
	_, _ = c.out.Write(append(answer, '\n')) // a failed write ends the session at the SDK's next one
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
