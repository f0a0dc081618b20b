package client

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/vigilhq/vigil/internal/redact"
)

// SessionHeader names the session a request acts as.
const SessionHeader = "Vigil-Session"

// maxAnswer bounds an answer read into memory: the gateway's largest (a
// page of 200 messages of at most 64 KiB each, escaped) stays well under it.
const maxAnswer = 64 << 20

// Client calls one gateway. It is safe for concurrent use; its methods
// take a context that bounds the call (and, for a stream, ends it).
type Client struct {
	base    *url.URL
	token   string
	session string
	http    *http.Client
}

// String describes the client by its gateway and acting session and
// whether it has a token, never the token itself: printing a Client (in a
// log line, say, with %v or %+v) would otherwise disclose its credential.
func (c Client) String() string {
	token := "none"
	if c.token != "" {
		token = "set"
	}
	base := ""
	if c.base != nil {
		base = c.base.Redacted()
	}
	return fmt.Sprintf("client.Client{gateway: %s, session: %q, token: %s}", base, c.session, token)
}

// GoString is String, for %#v.
func (c Client) GoString() string { return c.String() }

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as the bearer credential. A gateway without tokens
// (vigil serve on loopback) needs none: every request is its local admin.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithSession acts as the session key (the Vigil-Session header). Without
// it an operator or admin acts as a person, an agent token as its agent's
// main session.
func WithSession(key string) Option { return func(c *Client) { c.session = key } }

// WithHTTPClient sends requests with hc instead of http.DefaultClient. Its
// Timeout, if any, must be longer than the longest wait asked for (a turn
// waits up to 60 s, a send up to 300 s) and bounds streams too: prefer
// contexts. A nil hc is http.DefaultClient.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.http = cmp.Or(hc, http.DefaultClient) }
}

// New returns a client of the gateway at baseURL, such as
// http://127.0.0.1:7317 (a path, as behind a proxy, is kept). A base URL
// with a query or a fragment (an empty "?" or "#" too), and a token that
// is not printable ASCII, are refused, without being shown. So is a base
// URL not written as a URL is (a blank, a character beyond ASCII: escape
// it), rather than escaped unseen, as the other clients refuse it.
func New(baseURL string, opts ...Option) (*Client, error) {
	raw := strings.TrimSpace(baseURL)
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("vigil: base URL %q: %s", redact.URL(baseURL), redact.ParseError(raw))
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("vigil: base URL %q: want http(s)://host[:port]", redact.URL(baseURL))
	}
	if strings.ContainsAny(raw, "?#") {
		// Every request's own query would replace it: refused, not dropped,
		// since a caller who wrote ?as= there meant to act as a session. It
		// may hold a secret, so it is not shown.
		return nil, fmt.Errorf("vigil: base URL %s://%s%s: a query or fragment is not used: name the acting session on its own, not in the URL",
			u.Scheme, u.Host, u.EscapedPath())
	}
	for i := range len(raw) {
		if raw[i] <= ' ' || raw[i] > '~' {
			return nil, fmt.Errorf("vigil: base URL %q: a blank, a control character or a character beyond ASCII: write the URL percent-escaped", redact.URL(baseURL))
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	c := &Client{base: u, http: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	if !printableASCII(c.token) {
		// net/http would refuse the header on every request, which a
		// stream takes for a failed connection and retries without end.
		return nil, errors.New("vigil: the token must be printable ASCII, as a header carries it")
	}
	return c, nil
}

// printableASCII reports whether v is printable ASCII only, spaces included.
func printableASCII(v string) bool {
	for i := range len(v) {
		if v[i] < ' ' || v[i] > '~' {
			return false
		}
	}
	return true
}

// As returns a copy of c acting as the session key ("" acts as a person,
// or an agent token's main session).
func (c *Client) As(key string) *Client {
	cc := *c
	cc.session = key
	return &cc
}

// Session is the session c acts as, or "".
func (c *Client) Session() string { return c.session }

// endpoint is the URL of path (escaped, starting with a slash) and query.
func (c *Client) endpoint(path string, query url.Values) string {
	target := c.base.String() + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	return target
}

// request builds a request acting as session.
func (c *Client) request(ctx context.Context, method, target, session string, body []byte) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	if session != "" && !headerSafe(session) {
		// A header cannot carry it (net/http would refuse the request):
		// it goes as the acting parameter, and the gateway judges it.
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		target += sep + "as=" + url.QueryEscape(session)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if session != "" && headerSafe(session) {
		req.Header.Set(SessionHeader, session)
	}
	return req, nil
}

// headerSafe reports whether a header can carry v as it is: no control
// character but a tab.
func headerSafe(v string) bool {
	for i := range len(v) {
		if b := v[i]; (b < ' ' && b != '\t') || b == 0x7f {
			return false
		}
	}
	return true
}

// do sends one request and decodes a 200 answer into out; any other answer,
// a 200 that is not application/json and one holding an error object, is
// an *APIError (or *ConflictError). A json.RawMessage input is sent as it
// is, byte for byte.
func (c *Client) do(ctx context.Context, op, method, path, session string, in, out any) error {
	var body []byte
	if raw, ok := in.(json.RawMessage); ok {
		body = raw
	} else if in != nil {
		if at := notUTF8(reflect.ValueOf(in), "", 0); at != "" {
			return invalid(op, "%s is not valid UTF-8", at)
		}
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("vigil: %s: encode the input: %w", op, err)
		}
	}
	return c.send(ctx, op, method, path, session, body, out)
}

// notUTF8 names the first string in v (a field by its JSON name, an
// element by its index, a map's entry by its key) that is not valid
// UTF-8, or gives "". encoding/json would send such a string with each
// bad byte replaced by U+FFFD, so the gateway would store, or look up,
// something other than what was given instead of refusing it. Byte
// slices are left alone (a json.RawMessage goes as it is, and the gateway
// checks it). Past a depth json.Marshal reports as a cycle it gives up.
func notUTF8(v reflect.Value, at string, depth int) string {
	if depth > 1000 {
		return ""
	}
	join := func(name string) string {
		if at == "" {
			return name
		}
		return at + "." + name
	}
	switch v.Kind() {
	case reflect.String:
		if !utf8.ValidString(v.String()) {
			return cmp.Or(at, "the input")
		}
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return notUTF8(v.Elem(), at, depth+1)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if (!f.IsExported() && !f.Anonymous) || name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				name = at // an embedded struct's fields are its parent's
			} else {
				name = join(cmp.Or(name, f.Name))
			}
			if bad := notUTF8(v.Field(i), name, depth+1); bad != "" {
				return bad
			}
		}
	case reflect.Map:
		for it := v.MapRange(); it.Next(); {
			k := fmt.Sprint(it.Key()) // a string, or a number
			if it.Key().Kind() == reflect.String && !utf8.ValidString(k) {
				return fmt.Sprintf("the key %q of %s", k, cmp.Or(at, "the input"))
			}
			if bad := notUTF8(it.Value(), join(k), depth+1); bad != "" {
				return bad
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return ""
		}
		for i := range v.Len() {
			if bad := notUTF8(v.Index(i), fmt.Sprintf("%s[%d]", at, i), depth+1); bad != "" {
				return bad
			}
		}
	}
	return ""
}

// send is do with the body already encoded (nil for none).
func (c *Client) send(ctx context.Context, op, method, path, session string, body []byte, out any) error {
	req, err := c.request(ctx, method, c.endpoint(path, nil), session, body)
	if err != nil {
		return fmt.Errorf("vigil: %s: %w", op, err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("vigil: %s: %w", op, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	if err != nil {
		return fmt.Errorf("vigil: %s: read the answer: %w", op, err)
	}
	if len(data) > maxAnswer {
		// Cut at the bound, it would read as malformed, or as another
		// answer (JSON allows blanks after a value).
		return fmt.Errorf("vigil: %s: the answer is larger than %d MiB: what answers is not a vigil gateway", op, maxAnswer>>20)
	}
	if resp.StatusCode != http.StatusOK {
		return errorFrom(op, resp, data)
	}
	if err := notTheGateways(op, req, resp, "application/json"); err != nil {
		return err
	}
	if err := errorIn(op, resp, data); err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("vigil: %s: the answer is not the expected JSON: %w", op, err)
	}
	return nil
}

// Call calls any tool by name with in (any value that encodes to the
// tool's input object; a json.RawMessage is sent as it is) and decodes
// its output into out (nil to drop it; a *json.RawMessage keeps it as the
// gateway sent it). The typed methods are this for each tool.
func (c *Client) Call(ctx context.Context, tool string, in, out any) error {
	if !toolName(tool) {
		return invalid(cmp.Or(tool, "call"), "tool name %q is not a tool's name", tool)
	}
	if in == nil {
		in = struct{}{}
	}
	return c.do(ctx, tool, http.MethodPost, "/v1/tools/"+tool, c.session, in, out)
}

// toolName reports whether name can be a tool's name in a route: printable
// ASCII without a blank or a character a URL gives a meaning to, and not
// a dot segment, which a URL resolves away into another route.
func toolName(name string) bool {
	if name == "" || name == "." || name == ".." {
		return false
	}
	for i := range len(name) {
		if b := name[i]; b <= ' ' || b >= 0x7f || strings.IndexByte("/?#%", b) >= 0 {
			return false
		}
	}
	return true
}

func call[Out any](ctx context.Context, c *Client, tool string, in any) (*Out, error) {
	out := new(Out)
	if err := c.Call(ctx, tool, in, out); err != nil {
		return nil, err
	}
	return out, nil
}

// sessionPath is a session's route: /v1/sessions/{key}/<verb>.
func sessionPath(op, key, verb string) (string, error) {
	if strings.TrimSpace(key) == "" {
		return "", invalid(op, "sessionKey is required")
	}
	if key == "." || key == ".." {
		// A URL resolves such a segment away (the gateway redirects to the
		// route it names), so the request would reach another route.
		return "", invalid(op, "session key %q cannot name a session's route: it is not agent-qualified", key)
	}
	return "/v1/sessions/" + url.PathEscape(key) + "/" + verb, nil
}

// Do sends one request to a route of the gateway's HTTP API (path such
// as "/v1/tools" or "/v1/sessions/KEY/turn", escaped, starting with a
// slash) acting as the client's session, with in encoded as its JSON body
// (nil sends none), and decodes a 200 answer into out (nil drops it). It
// is for what the typed methods do not cover, such as a session's turn
// whose answer is kept exactly as the gateway sent it (a *json.RawMessage
// as out), on the routes that answer JSON. Any other answer, and a 200
// that is not application/json, is an [*APIError], as for the typed
// methods.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	if !strings.HasPrefix(path, "/") {
		return invalid(path, "path %q must start with a slash", path)
	}
	return c.do(ctx, method+" "+path, method, path, c.session, in, out)
}

// Health reports whether the gateway is up (GET /healthz).
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, "healthz", http.MethodGet, "/healthz", "", nil, nil)
}

// Tools lists every tool of the gateway with its input and output JSON
// schemas (GET /v1/tools).
func (c *Client) Tools(ctx context.Context) ([]ToolInfo, error) {
	var out struct {
		Tools []ToolInfo `json:"tools"`
	}
	if err := c.do(ctx, "list tools", http.MethodGet, "/v1/tools", c.session, nil, &out); err != nil {
		return nil, err
	}
	return out.Tools, nil
}
