package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vigilhq/vigil/httpapi"
)

// conn is one keep-alive HTTP/1.1 connection to a gateway, doing as little
// work of its own per request as it can: a request is written as bytes
// built in place, and the response is parsed by net/http's reader. On two
// cores every microsecond the client spends is one the server lacks, and
// the full client (its transport's pool, goroutines and header maps) costs
// several times this.
type conn struct {
	addr string
	// gw is the index, in the addresses dialAll was given, of the
	// gateway this connection calls.
	gw   int
	c    net.Conn
	r    *bufio.Reader
	req  []byte
	body bytes.Buffer
}

// call is one request: its method and path, its bearer token and acting
// session (either may be empty), and its JSON body (nil for none).
type call struct {
	method, path, token, session string
	body                         []byte
}

// do sends one request and reads its answer: the status and the body,
// which stays valid until the next do on the same connection.
func (c *conn) do(rq *call) (int, []byte, error) {
	if c.c == nil {
		nc, err := net.Dial("tcp", c.addr)
		if err != nil {
			return 0, nil, err
		}
		c.c, c.r = nc, bufio.NewReaderSize(nc, 16<<10)
	}
	b := append(c.req[:0], rq.method...)
	b = append(b, ' ')
	b = append(b, rq.path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, c.addr...)
	if rq.token != "" {
		b = append(b, "\r\nAuthorization: Bearer "...)
		b = append(b, rq.token...)
	}
	if rq.session != "" {
		b = append(b, "\r\n"+httpapi.SessionHeader+": "...)
		b = append(b, rq.session...)
	}
	if rq.body != nil {
		b = append(b, "\r\nContent-Type: application/json\r\nContent-Length: "...)
		b = strconv.AppendInt(b, int64(len(rq.body)), 10)
	}
	b = append(b, "\r\n\r\n"...)
	b = append(b, rq.body...)
	c.req = b
	if _, err := c.c.Write(b); err != nil {
		c.close()
		return 0, nil, fmt.Errorf("%s %s: %w", rq.method, rq.path, err)
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		c.close()
		return 0, nil, fmt.Errorf("%s %s: %w", rq.method, rq.path, err)
	}
	c.body.Reset()
	_, err = c.body.ReadFrom(resp.Body)
	resp.Body.Close()
	if err != nil || resp.Close {
		c.close()
	}
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: read the answer: %w", rq.method, rq.path, err)
	}
	return resp.StatusCode, c.body.Bytes(), nil
}

// ok sends a request and fails unless it is answered 200.
func (c *conn) ok(rq *call) ([]byte, error) {
	code, body, err := c.do(rq)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %d %s", rq.method, rq.path, code, bytes.TrimSpace(body))
	}
	return body, nil
}

func (c *conn) close() {
	if c.c != nil {
		c.c.Close()
		c.c = nil
	}
}

// dialAll opens n connections (clients) to addr, spread over the
// addresses in turn.
func dialAll(addrs []string, n int) ([]*conn, error) {
	cs := make([]*conn, n)
	for i := range cs {
		cs[i] = &conn{addr: addrs[i%len(addrs)], gw: i % len(addrs)}
		if _, err := cs[i].ok(&call{method: http.MethodGet, path: "/healthz"}); err != nil {
			closeAll(cs)
			return nil, err
		}
	}
	return cs, nil
}

func closeAll(cs []*conn) {
	for _, c := range cs {
		if c != nil {
			c.close()
		}
	}
}

// phase is what one block of calls measured.
type phase struct {
	n       int64
	elapsed time.Duration
	lat     []time.Duration
}

func (p phase) rate() float64 { return float64(p.n) / p.elapsed.Seconds() }

// drive runs op on every connection in cs at once, each connection one
// client making one call after the other, for d, or, when n > 0, until n
// calls in all have been made (i runs from 0 to n-1 over all clients). It
// returns how many calls succeeded, how long the block took and each
// call's latency, and stops at the first error.
func drive(ctx context.Context, cs []*conn, d time.Duration, n int64, op func(c *conn, i int64) error) (phase, error) {
	var next atomic.Int64
	var stop atomic.Bool
	var mu sync.Mutex
	var first error
	lats := make([][]time.Duration, len(cs))
	var wg sync.WaitGroup
	start := time.Now()
	if n == 0 {
		t := time.AfterFunc(d, func() { stop.Store(true) })
		defer t.Stop()
	}
	for k, c := range cs {
		wg.Go(func() {
			lat := make([]time.Duration, 0, 1024)
			for !stop.Load() && ctx.Err() == nil {
				i := next.Add(1) - 1
				if n > 0 && i >= n {
					break
				}
				t0 := time.Now()
				if err := op(c, i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
					stop.Store(true)
					break
				}
				lat = append(lat, time.Since(t0))
			}
			lats[k] = lat
		})
	}
	wg.Wait()
	p := phase{elapsed: time.Since(start)}
	for _, l := range lats {
		p.n += int64(len(l))
		p.lat = append(p.lat, l...)
	}
	if first == nil {
		first = ctx.Err()
	}
	return p, first
}
