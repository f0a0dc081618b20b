package pgtest

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy relays connections to the test server until it is cut: then the
// connections through it break and new ones are refused, as when the
// network to the database fails, while the server itself (which other
// tests share) runs on. URL is the test database's URL through the proxy.
//
// It can also lose the answer to a COMMIT (LoseNextCommitAnswer), as when
// the network fails after the server committed and before its answer
// came back.
type Proxy struct {
	URL string
	ln  net.Listener
	// framed is set when the server's side of each connection is read as
	// messages (the URL asks for no TLS), which LoseNextCommitAnswer
	// needs.
	framed bool

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	// loseCommit arms the proxy to lose the next COMMIT's answer; lost
	// is closed once it has, and cutAfter says whether the proxy is then
	// cut, refusing new connections too. With endAfter it passes on the
	// COMMIT's completion and loses only what follows it.
	loseCommit, cutAfter, endAfter bool
	lost                           chan struct{}
}

// NewProxy starts a proxy to the test server, cut when t ends; it skips t
// (fails it under CI=true) when no server is reachable.
func NewProxy(t testing.TB) *Proxy {
	t.Helper()
	Require(t)
	u, err := url.Parse(URL())
	if err != nil || u.Host == "" {
		t.Skipf("the test server's address is not a URL with a host: %s", Redacted(URL()))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	framed := u.Query().Get("sslmode") == "disable"
	u.Host = ln.Addr().String()
	p := &Proxy{URL: u.String(), ln: ln, framed: framed}
	go p.serve(server)
	t.Cleanup(p.Cut)
	return p
}

func (p *Proxy) serve(server string) {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", server)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			c.Close()
			s.Close()
			return
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go relay(s, c)
		if p.framed {
			go p.relayAnswers(c, s)
		} else {
			go relay(c, s)
		}
	}
}

func relay(dst, src net.Conn) {
	io.Copy(dst, src)
	dst.Close()
	src.Close()
}

// Cut breaks every connection through the proxy and refuses new ones.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return
	}
	p.cut = true
	p.ln.Close()
	for _, c := range p.conns {
		c.Close()
	}
}

// LoseNextCommitAnswer arms the proxy: the next answer of the server that
// holds a COMMIT's completion is not passed on, and that connection is
// broken instead. The server has committed by then, and the client cannot
// tell whether it did. With cut set the proxy is then cut too (Cut), so
// the client cannot reach the server to find out. The returned channel is
// closed once the answer was lost. It skips t when the proxy cannot read
// the server's messages (a URL that allows TLS).
func (p *Proxy) LoseNextCommitAnswer(t testing.TB, cut bool) <-chan struct{} {
	t.Helper()
	if !p.framed {
		t.Skip("the proxy reads the server's messages only on a URL with sslmode=disable")
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseCommit, p.cutAfter, p.endAfter, p.lost = true, cut, false, make(chan struct{})
	return p.lost
}

// EndAfterNextCommit arms the proxy: the next answer of the server that
// holds a COMMIT's completion is passed on up to that completion, and
// then, instead of the rest, the connection ends with the error a server
// sends when it shuts down (FATAL 57P01), as when the server is stopped
// while it commits. It skips t as LoseNextCommitAnswer does.
func (p *Proxy) EndAfterNextCommit(t testing.TB) {
	t.Helper()
	p.LoseNextCommitAnswer(t, false)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endAfter = true
}

// adminShutdown is the ErrorResponse of a backend ended by a server's
// shutdown.
var adminShutdown = errorResponse("FATAL", "57P01", "terminating connection due to administrator command")

func errorResponse(severity, code, message string) []byte {
	var body []byte
	for _, f := range []struct {
		field byte
		value string
	}{{'S', severity}, {'V', severity}, {'C', code}, {'M', message}} {
		body = append(append(append(body, f.field), f.value...), 0)
	}
	body = append(body, 0)
	msg := []byte{'E', 0, 0, 0, 0}
	binary.BigEndian.PutUint32(msg[1:], uint32(4+len(body)))
	return append(msg, body...)
}

// relayAnswers relays the server's messages to the client, an answer at a
// time: what the server sends up to ReadyForQuery goes out together, so
// that an answer holding a COMMIT's completion can be lost whole, as if
// the connection broke right after the client sent it. Messages the
// server sends on its own (notifications, notices, parameter changes)
// while no answer is under way go out at once.
func (p *Proxy) relayAnswers(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	r := bufio.NewReader(src)
	var answer []byte
	for {
		var head [5]byte
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return
		}
		n := int(binary.BigEndian.Uint32(head[1:])) - 4
		if n < 0 {
			return
		}
		msg := make([]byte, 5+n)
		copy(msg, head[:])
		if _, err := io.ReadFull(r, msg[5:]); err != nil {
			return
		}
		answer = append(answer, msg...)
		switch head[0] {
		case 'A', 'N', 'S':
			if len(answer) > len(msg) {
				continue // within an answer: goes out with it
			}
		case 'Z':
			if lose, endAfter := p.loses(answer); endAfter {
				end := bytes.Index(answer, commitComplete) + len(commitComplete)
				_, _ = dst.Write(append(answer[:end:end], adminShutdown...))
				return
			} else if lose {
				return
			}
		default:
			continue
		}
		if _, err := dst.Write(answer); err != nil {
			return
		}
		answer = answer[:0]
	}
}

// commitComplete is the CommandComplete message of a COMMIT.
var commitComplete = []byte("C\x00\x00\x00\x0bCOMMIT\x00")

// loses reports whether answer is the COMMIT answer the proxy is armed to
// lose, and whether only what follows the COMMIT's completion is lost,
// and disarms it then.
func (p *Proxy) loses(answer []byte) (lose, endAfter bool) {
	p.mu.Lock()
	if !p.loseCommit || !bytes.Contains(answer, commitComplete) {
		p.mu.Unlock()
		return false, false
	}
	p.loseCommit = false
	cut, endAfter := p.cutAfter, p.endAfter
	p.mu.Unlock()
	if cut {
		p.Cut()
	}
	close(p.lost)
	return true, endAfter
}
