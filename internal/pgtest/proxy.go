package pgtest

import (
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
type Proxy struct {
	URL string
	ln  net.Listener

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
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
	u.Host = ln.Addr().String()
	p := &Proxy{URL: u.String(), ln: ln}
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
		go relay(c, s)
		go relay(s, c)
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
