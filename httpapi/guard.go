package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/vigilhq/vigil/gateway"
)

// guard keeps web pages out of the API: a page in the user's browser can
// neither change data (a cross-origin form or fetch) nor read it (through
// DNS rebinding, which makes a foreign name resolve to loopback). Without
// tokens every loopback request is the local admin, so this is all that
// stands between any web page and the agents' prompts.
type guard struct {
	origins *http.CrossOriginProtection
	// hosts, when not nil, are the names (beyond loopback ones) a request's
	// Host may carry; nil accepts any Host.
	hosts map[string]bool
}

func newGuard(opts Options) (*guard, error) {
	g := &guard{origins: http.NewCrossOriginProtection()}
	for _, o := range opts.TrustedOrigins {
		if err := g.origins.AddTrustedOrigin(o); err != nil {
			return nil, fmt.Errorf("trusted origin %q: %w", o, err)
		}
	}
	if opts.RestrictHosts {
		g.hosts = map[string]bool{}
		for _, h := range opts.AllowedHosts {
			g.hosts[strings.ToLower(strings.TrimSpace(h))] = true
		}
	}
	return g, nil
}

// check refuses a request with a foreign Host, and a cross-origin browser
// request to a route that reads or changes data. net/http's
// CrossOriginProtection decides what is cross-origin (Sec-Fetch-Site, or
// Origin against Host); it passes safe methods unchecked, so a read is
// checked as the write it would be.
func (g *guard) check(r *http.Request, data bool) error {
	if g.hosts != nil && !g.allowedHost(r.Host) {
		return fmt.Errorf("%w: host %q is not a name this gateway answers to (it listens on loopback; "+
			"name other hosts with --allowed-host)", gateway.ErrForbidden, r.Host)
	}
	if !data {
		return nil
	}
	req := r
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		req = r.WithContext(r.Context()) // a shallow copy, to check as a write
		req.Method = http.MethodPost
	}
	if err := g.origins.Check(req); err != nil {
		return fmt.Errorf("%w: a cross-origin request from a web page is refused (%v); "+
			"pages of other origins must be named with --trusted-origin", gateway.ErrForbidden, err)
	}
	return nil
}

// allowedHost accepts loopback addresses, localhost and its subdomains
// (which resolve to loopback and no DNS answer can claim), and the names
// configured.
func (g *guard) allowedHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return true
	}
	return g.hosts[host]
}
