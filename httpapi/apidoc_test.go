package httpapi_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/metrics"
	"github.com/vigilhq/vigil/internal/testwait"
)

var docUpdate = flag.Bool("update", false, "rewrite the responses in docs/api.md, and docs/openapi.json, with what the server answers")

const docPath = "../docs/api.md"

// The credentials docs/api.md uses.
var docTokens = []gateway.TokenConfig{
	{Token: "admin-example-token-0001", Role: gateway.RoleAdmin, ID: "root"},
	{Token: "ann-example-token-000001", Role: gateway.RoleOperator, ID: "ann"},
	{Token: "main-agent-example-token", Role: gateway.RoleAgent, Agent: "main"},
	{Token: "ops-agent-example-token1", Role: gateway.RoleAgent, Agent: "ops"},
}

// docExample is one request in docs/api.md and the response shown for it.
type docExample struct {
	line       int // of the request block, for messages
	background bool
	// statusOnly examples show an excerpt of the body; only the status
	// line is checked.
	statusOnly bool
	request    string
	response   string
	respStart  int // line index of the response block's first content line
	respEnd    int // line index of its closing fence
}

// docParse finds every http request block and the response block after it.
func docParse(t *testing.T, lines []string) []docExample {
	t.Helper()
	var out []docExample
	var pendingBackground, pendingStatusOnly bool
	for i := 0; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		if line == "<!-- background -->" {
			pendingBackground = true
			continue
		}
		if line == "<!-- status only -->" {
			pendingStatusOnly = true
			continue
		}
		if line != "```http" {
			continue
		}
		start := i + 1
		end := start
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		block := strings.Join(lines[start:end], "\n")
		i = end
		if strings.HasPrefix(block, "HTTP/1.1 ") {
			if len(out) == 0 || out[len(out)-1].response != "" {
				t.Fatalf("%s:%d: a response block without a request before it", docPath, start)
			}
			ex := &out[len(out)-1]
			ex.response, ex.respStart, ex.respEnd = block, start, end
			continue
		}
		out = append(out, docExample{line: start, request: block, background: pendingBackground, statusOnly: pendingStatusOnly})
		pendingBackground, pendingStatusOnly = false, false
	}
	for _, ex := range out {
		if ex.response == "" {
			t.Fatalf("%s:%d: request without a response block", docPath, ex.line)
		}
	}
	return out
}

// docServer is a gateway with a manual clock and deterministic ids, so the
// examples' responses are exact.
func docServer(t *testing.T) (*httptest.Server, *clock.Manual) {
	t.Helper()
	clk := clock.NewManual(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	rng := rand.New(rand.NewPCG(7, 11))
	gw := gatewaytest.Open(t, gatewaytest.Options{Engine: vigil.Options{Clock: clk},
		Gateway: gateway.Options{NewID: func() string { return fmt.Sprintf("%016x", rng.Uint64()) }}})
	creds, err := gateway.NewCredentials(gateway.Config{Tokens: docTokens}, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.New(gw.Gateway, httpapi.Options{Credentials: creds, Metrics: metrics.New(gw.Engine),
		Context: t.Context()}))
	t.Cleanup(srv.Close)
	return srv, clk
}

// docAwaitDelivery waits until a background sessions_send's message is in
// its target's transcript. The send's wait for a reply is registered when
// that write commits, before any later write (the reply) can commit.
func docAwaitDelivery(t *testing.T, srv *httptest.Server, ex docExample, answered chan docResult) {
	t.Helper()
	_, body, _ := strings.Cut(ex.request, "\n\n")
	var send struct{ SessionKey, Message string }
	if err := json.Unmarshal([]byte(body), &send); err != nil || send.SessionKey == "" {
		t.Fatalf("%s:%d: a background request must be a sessions_send naming sessionKey", docPath, ex.line)
	}
	query, _ := json.Marshal(map[string]any{"sessionKey": send.SessionKey, "limit": 200})
	testwait.Until(t, fmt.Sprintf("%s:%d: the background message arrives", docPath, ex.line), func() bool {
		select {
		case r := <-answered: // it failed without delivering
			t.Fatalf("%s:%d: the background request was answered before delivery:\n%s", docPath, ex.line, docRender(r))
		default:
		}
		r := docDo(srv, "POST /v1/tools/sessions_history\nAuthorization: Bearer "+docTokens[0].Token+"\n\n"+string(query))
		var h gateway.HistoryOutput
		json.Unmarshal(r.body, &h)
		for _, m := range h.Messages {
			if m.Content == send.Message {
				return true
			}
		}
		return false
	})
}

type docResult struct {
	status string
	body   []byte
	err    error
}

func docDo(srv *httptest.Server, request string) docResult {
	head, body, _ := strings.Cut(request, "\n\n")
	sc := bufio.NewScanner(strings.NewReader(head))
	sc.Scan()
	parts := strings.Fields(sc.Text())
	if len(parts) < 2 {
		return docResult{err: fmt.Errorf("bad request line %q", sc.Text())}
	}
	req, err := http.NewRequest(parts[0], srv.URL+parts[1], strings.NewReader(body))
	if err != nil {
		return docResult{err: err}
	}
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return docResult{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return docResult{status: fmt.Sprintf("HTTP/1.1 %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)), body: b, err: err}
}

// docRender is the response block as docs/api.md shows it.
func docRender(r docResult) string {
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(r.body), "", "  "); err != nil {
		return r.status + "\n\n" + strings.TrimSpace(string(r.body))
	}
	return r.status + "\n\n" + b.String()
}

// docSame compares status lines exactly and bodies as JSON values.
func docSame(want string, got docResult) bool {
	wantStatus, wantBody, _ := strings.Cut(want, "\n\n")
	if strings.TrimSpace(wantStatus) != got.status {
		return false
	}
	var a, b any
	if json.Unmarshal([]byte(wantBody), &a) != nil || json.Unmarshal(got.body, &b) != nil {
		return strings.TrimSpace(wantBody) == strings.TrimSpace(string(got.body))
	}
	return reflect.DeepEqual(a, b)
}

// TestAPIDocExamplesAreTrue replays every request in docs/api.md, in order,
// against a live server and checks each response is the one shown. Run
// with -update to rewrite the shown responses from the server's.
func TestAPIDocExamplesAreTrue(t *testing.T) {
	data, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	examples := docParse(t, lines)
	if len(examples) < 10 {
		t.Fatalf("only %d examples in %s", len(examples), docPath)
	}
	srv, clk := docServer(t)
	results := make([]docResult, len(examples))
	var background []int
	waits := map[int]chan docResult{}
	for i, ex := range examples {
		clk.Advance(time.Second)
		if ex.background {
			ch := make(chan docResult, 1)
			waits[i] = ch
			go func() { ch <- docDo(srv, ex.request) }()
			background = append(background, i)
			docAwaitDelivery(t, srv, ex, ch)
			continue
		}
		results[i] = docDo(srv, ex.request)
		for _, j := range background {
			select {
			case results[j] = <-waits[j]:
			case <-time.After(30 * time.Second): // hang guard
				t.Fatalf("%s:%d: background request never answered", docPath, examples[j].line)
			}
		}
		background = nil
	}
	changed := false
	for i := len(examples) - 1; i >= 0; i-- {
		ex, got := examples[i], results[i]
		if got.err != nil {
			t.Fatalf("%s:%d: %v", docPath, ex.line, got.err)
		}
		if ex.statusOnly {
			wantStatus, _, _ := strings.Cut(ex.response, "\n\n")
			if strings.TrimSpace(wantStatus) != got.status {
				t.Errorf("%s:%d: status %q, want %q", docPath, ex.line, got.status, wantStatus)
			}
			continue
		}
		if docSame(ex.response, got) && (!*docUpdate || strings.HasSuffix(ex.response, docRender(got)[len(got.status):])) {
			continue
		}
		if *docUpdate {
			lines = append(lines[:ex.respStart], append(strings.Split(docRender(got), "\n"), lines[ex.respEnd:]...)...)
			changed = true
			continue
		}
		t.Errorf("%s:%d: the response differs from the one shown; the server answered:\n%s", docPath, ex.line, docRender(got))
	}
	if changed {
		if err := os.WriteFile(docPath, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote responses in", docPath)
	}
}
