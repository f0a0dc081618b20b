package mcpserver

import (
	"bufio"
	"bytes"
	"encoding/json"
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
// so refused has no answer and is dropped. Within a tool's arguments the
// tool refuses such input itself, as a tool result.
//
// A line longer than the SDK's limit on a message goes on unchecked, for
// the SDK to refuse as it refuses every such line.
func StdioTransport(r io.Reader, w io.Writer) mcp.Transport {
	out := &lineWriter{w: w}
	return &mcp.IOTransport{
		Reader: io.NopCloser(&checkedLines{in: bufio.NewReaderSize(r, 64<<10), out: out}),
		Writer: out,
	}
}

// lineWriter writes whole messages to w one at a time: the SDK's and the
// refusals checkedLines answers, from two goroutines.
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

// checkedLines hands on the lines of in that keep the strict rules, and
// answers the others on out.
type checkedLines struct {
	in  *bufio.Reader
	out *lineWriter
	// line holds the line being read; pending is what of it is still to
	// be handed on.
	line, pending []byte
	// passing is set while the rest of a line too long to check goes on.
	passing bool
	err     error // the input's error, given once pending is empty
}

func (c *checkedLines) Read(p []byte) (int, error) {
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

// next reads the next line, or the next part of a line too long to check,
// and returns what of it goes on to the SDK (nothing for a refused line).
func (c *checkedLines) next() ([]byte, error) {
	if c.passing {
		chunk, err := c.in.ReadSlice('\n')
		c.passing = err == bufio.ErrBufferFull
		if c.passing {
			err = nil
		}
		c.line = append(c.line[:0], chunk...)
		return c.line, err
	}
	c.line = c.line[:0]
	for {
		chunk, err := c.in.ReadSlice('\n')
		c.line = append(c.line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(c.line) > mcp.DefaultMaxLineLength {
				c.passing = true
				return c.line, nil
			}
			continue
		}
		if c.refuse(c.line) {
			return nil, err
		}
		return c.line, err
	}
}

// refuse answers a message that breaks the strict rules, and reports
// whether it did. Input that is not JSON at all is the SDK's to answer.
func (c *checkedLines) refuse(line []byte) bool {
	msg := bytes.TrimSpace(line)
	if len(msg) == 0 || !json.Valid(msg) {
		return false
	}
	err := gateway.CheckJSON(msg, "/params/arguments")
	if err == nil {
		return false
	}
	id, ok := requestID(msg)
	if !ok {
		return true // a notification: JSON-RPC gives it no answer
	}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32600, "message": err.Error(), "data": map[string]string{"code": gateway.Code(err)}}})
	_, _ = c.out.Write(append(answer, '\n')) // a failed write ends the session at the SDK's next one
	return true
}

// requestID is the id of msg, a JSON-RPC request to be answered: null for
// a batch or an id given twice, and ok false for a notification.
func requestID(msg []byte) (id json.RawMessage, ok bool) {
	null := json.RawMessage("null")
	dec := json.NewDecoder(bytes.NewReader(msg))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return null, true
	}
	found := 0
	for dec.More() {
		name, err := dec.Token()
		if err != nil {
			return null, true
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return null, true
		}
		if name == "id" {
			id, found = value, found+1
		}
	}
	switch found {
	case 0:
		return nil, false
	case 1:
		return id, true
	}
	return null, true
}
