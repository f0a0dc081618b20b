package client_test

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/vigilhq/vigil/client"
	"github.com/vigilhq/vigil/gateway"
)

// checkAPIError checks that err is the gateway's answer status with code,
// matched by errors.Is to want, and that its message says each of says.
func checkAPIError(t *testing.T, what string, err error, status int, want error, says ...string) *client.APIError {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("%s: error %v (%T), want an *APIError", what, err, err)
	}
	if ae.StatusCode != status || !errors.Is(err, want) {
		t.Fatalf("%s: %+v, want status %d and code %v", what, ae, status, want)
	}
	for _, s := range says {
		if !strings.Contains(ae.Message, s) {
			t.Errorf("%s: message %q does not say %q", what, ae.Message, s)
		}
	}
	return ae
}

func TestABadInputIsAnInvalidArgumentNamingTheField(t *testing.T) {
	gw := startGateway(t, nil)
	c := connect(t, gw, mainToken, manager)
	_, err := c.Status(bounded(t), client.StatusInput{SessionKey: manager, ChangesSince: new(int64(-1))})
	checkAPIError(t, "changesSince -1", err, http.StatusBadRequest, client.ErrInvalidArgument, "changesSince", "at least 0")
	_, err = c.Status(bounded(t), client.StatusInput{SessionKey: "agent::main"})
	checkAPIError(t, "a malformed key", err, http.StatusBadRequest, client.ErrInvalidArgument, "sessionKey", "empty part")
	var out any
	err = c.Call(bounded(t), "session_status", map[string]any{"sessionKey": manager, "since": 3}, &out)
	checkAPIError(t, "an unknown field", err, http.StatusBadRequest, client.ErrInvalidArgument, `unknown field "since"`)
}

func TestATurnWithoutASessionKeyIsRefusedBeforeAnythingIsSent(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, mainToken, "").Turn(bounded(t), client.TurnInput{})
	if !errors.Is(err, client.ErrInvalidArgument) || !strings.Contains(err.Error(), "sessionKey") {
		t.Fatalf("a turn without a key: %v", err)
	}
}

func TestAWrongTokenIsUnauthenticated(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, "not-a-real-token-at-all", "").List(bounded(t), client.ListInput{})
	checkAPIError(t, "a wrong token", err, http.StatusUnauthorized, client.ErrUnauthenticated, "bearer token")
}

func TestReachingAnotherAgentsSessionIsPermissionDenied(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, opsToken, "").Status(bounded(t), client.StatusInput{SessionKey: manager})
	checkAPIError(t, "ops reaching main", err, http.StatusForbidden, client.ErrPermissionDenied, `agent "ops"`, manager)
}

func TestAnUnknownRunOrToolIsNotFound(t *testing.T) {
	gw := startGateway(t, nil)
	c := connect(t, gw, mainToken, manager)
	_, err := c.EndRun(bounded(t), client.RunEndInput{RunID: "run-nope", Outcome: client.OutcomeCompleted})
	checkAPIError(t, "an unknown run", err, http.StatusNotFound, client.ErrNotFound)
	err = c.Call(bounded(t), "sessions_teleport", nil, nil)
	checkAPIError(t, "an unknown tool", err, http.StatusNotFound, client.ErrNotFound, "sessions_teleport")
}

func TestAStaleIfStateVersionIsAConflictCarryingTheCurrentVersion(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	must(connect(t, gw, operatorToken, "").Send(ctx, client.SendInput{SessionKey: worker, Message: "a person writes", TimeoutSeconds: new(0)}))(t)
	mgr := connect(t, gw, mainToken, manager)
	// The manager read the worker at its spawn's version, 2.
	_, err := mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "mine", IfStateVersion: new(int64(2))})
	var conflict *client.ConflictError
	if !errors.As(err, &conflict) {
		t.Fatalf("a stale write: %v (%T), want a *ConflictError", err, err)
	}
	if !conflict.Precondition || conflict.StateVersion != 3 || conflict.StatusCode != http.StatusConflict ||
		!errors.Is(err, client.ErrConflict) || !strings.Contains(conflict.Message, "changesSince 2") {
		t.Fatalf("conflict %+v (%+v)", conflict, conflict.APIError)
	}
	// Nothing was changed, and the retry with the current version passes.
	if st := must(mgr.Status(ctx, client.StatusInput{SessionKey: worker}))(t); st.Goal != nil || st.StateVersion != 3 {
		t.Fatalf("after the refusal: %+v", st)
	}
	must(mgr.Goal(ctx, client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "mine", IfStateVersion: new(conflict.StateVersion)}))(t)
}

func TestAnIfSyncedWriteWithANoticePendingIsAConflictCarryingTheNotice(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	ctx := bounded(t)
	must(connect(t, gw, operatorToken, "").Send(ctx, client.SendInput{SessionKey: worker, Message: "a person writes", TimeoutSeconds: new(0)}))(t)
	_, err := connect(t, gw, mainToken, manager).Send(ctx, client.SendInput{SessionKey: worker, Message: "go on", TimeoutSeconds: new(0), IfSynced: true})
	var conflict *client.ConflictError
	if !errors.As(err, &conflict) || !conflict.Precondition || conflict.StateVersion != 3 || conflict.Notice != noticeText(worker, 2) {
		t.Fatalf("an unsynced write: %v (%+v)", err, conflict)
	}
}

func TestALabelInUseIsAConflictWithoutAPrecondition(t *testing.T) {
	gw := startGateway(t, nil)
	spawnWorker(t, gw, "writer")
	_, err := connect(t, gw, mainToken, manager).Spawn(bounded(t), client.SpawnInput{Task: "again", Label: "writer"})
	var conflict *client.ConflictError
	if !errors.As(err, &conflict) || conflict.Precondition || !strings.Contains(conflict.Message, "writer") {
		t.Fatalf("a label in use: %v (%+v)", err, conflict)
	}
}

func TestABodyOverTheLimitIsPayloadTooLarge(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, operatorToken, "").Send(bounded(t), client.SendInput{SessionKey: manager, Message: strings.Repeat("x", 2<<20)})
	checkAPIError(t, "a 2 MiB message", err, http.StatusRequestEntityTooLarge, client.ErrPayloadTooLarge, "larger than the limit")
}

func TestACredentialAtItsWaitLimitIsTooManyRequestsWithRetryAfter(t *testing.T) {
	gw := startGateway(t, func(tn *tuning) { tn.gateway.Limits = gateway.Limits{WaitsPerCredential: 1} })
	ctx := bounded(t)
	c := connect(t, gw, mainToken, "")
	parked := make(chan error, 1)
	go func() {
		_, err := c.Turn(ctx, client.TurnInput{SessionKey: manager, WaitSeconds: new(60)})
		parked <- err
	}()
	if err := gw.G.AwaitHeld(ctx, gateway.HoldWait, 1); err != nil { // the first turn parks
		t.Fatalf("the first turn never parked: %v", err)
	}
	_, err := c.Turn(ctx, client.TurnInput{SessionKey: manager, WaitSeconds: new(60)})
	ae := checkAPIError(t, "a second parked turn", err, http.StatusTooManyRequests, client.ErrTooManyRequests, "limit")
	if ae.RetryAfter != time.Second {
		t.Errorf("Retry-After %s, want 1s", ae.RetryAfter)
	}
	gw.G.Close() // ends the parked turn
	<-parked
}

func TestAFailingStoreIsUnavailableWithRetryAfter(t *testing.T) {
	gw := startGateway(t, nil)
	gw.Store.Close()
	_, err := connect(t, gw, operatorToken, "").Status(bounded(t), client.StatusInput{SessionKey: manager, ChangesSince: new(int64(0))})
	ae := checkAPIError(t, "a closed store", err, http.StatusServiceUnavailable, client.ErrUnavailable, "store is unavailable", "retry")
	if ae.RetryAfter != time.Second {
		t.Errorf("Retry-After %s, want 1s", ae.RetryAfter)
	}
}

// TestAFailureOfTheGatewaysOwnCarriesTheRequestIdOfItsLogLine: a 503 of
// a failed store names, in its body and its header, the log line that
// holds its details; the error gives that id, so a caller can report it.
func TestAFailureOfTheGatewaysOwnCarriesTheRequestIdOfItsLogLine(t *testing.T) {
	gw := startGateway(t, nil)
	gw.Store.Close()
	_, err := connect(t, gw, operatorToken, "").Status(bounded(t), client.StatusInput{SessionKey: manager})
	ae := checkAPIError(t, "a closed store", err, http.StatusServiceUnavailable, client.ErrUnavailable)
	if ae.RequestID == "" {
		t.Fatalf("%v: no request id", err)
	}
}

func TestAnUnreachableGatewayIsATransportErrorNamingTheTool(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := client.New("http://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(bounded(t), client.ListInput{})
	var ae *client.APIError
	if err == nil || errors.As(err, &ae) || !strings.Contains(err.Error(), "sessions_list") {
		t.Fatalf("a closed port: %v, want a transport error naming sessions_list", err)
	}
}

func TestATextThatIsNotUTF8IsRefusedNamingItsFieldNotSentAltered(t *testing.T) {
	gw := startGateway(t, nil)
	worker, _ := spawnWorker(t, gw, "")
	c := connect(t, gw, operatorToken, "")
	_, err := c.Goal(bounded(t), client.GoalInput{SessionKey: worker, Action: client.GoalSet, Objective: "ship \xff it"})
	checkAPIError(t, "an objective with a stray byte", err, 0, client.ErrInvalidArgument, "objective", "not valid UTF-8")
	if st := must(c.Status(bounded(t), client.StatusInput{SessionKey: worker}))(t); st.Goal != nil {
		t.Fatalf("the goal was set to %q", st.Goal.Objective)
	}
}

func TestASessionKeyThatIsNotUTF8IsRefusedNotReadAsAnotherKey(t *testing.T) {
	gw := startGateway(t, nil)
	_, err := connect(t, gw, operatorToken, "").Status(bounded(t), client.StatusInput{SessionKey: "agent:main:\xff"})
	checkAPIError(t, "a key with a stray byte", err, 0, client.ErrInvalidArgument, "sessionKey", "not valid UTF-8")
}

func TestASessionRouteRefusesADotKeyThatAURLCannotName(t *testing.T) {
	gw := startGateway(t, nil)
	spawnWorker(t, gw, "") // the log has events a wrong route would give
	c := connect(t, gw, adminToken, "")
	for ev, err := range c.SessionEvents(bounded(t), "..", client.SessionEventsOptions{After: new(int64(0))}) {
		checkAPIError(t, `the stream of ".."`, err, 0, client.ErrInvalidArgument, `".."`)
		if ev != nil {
			t.Fatalf(`the stream of "..": %+v`, ev)
		}
		break
	}
	_, err := c.Turn(bounded(t), client.TurnInput{SessionKey: "."})
	checkAPIError(t, `the turn of "."`, err, 0, client.ErrInvalidArgument, `"."`)
}

func TestAPrintedClientNeverShowsItsToken(t *testing.T) {
	const token = "agent-token-never-printed-0001"
	c, err := client.New("http://127.0.0.1:7317", client.WithToken(token), client.WithSession("agent:main:main"))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		for _, v := range []any{c, *c} {
			if out := fmt.Sprintf(verb, v); strings.Contains(out, token) || !strings.Contains(out, "agent:main:main") {
				t.Errorf("%s of a %T printed %q: want the session, never the token", verb, v, out)
			}
		}
	}
}

// TestATokenAHeaderCannotCarryIsRefusedWhenTheClientIsMade: net/http
// refuses such a header on every request, which a stream would take for a
// failed connection and retry without end; the refusal never shows it.
func TestATokenAHeaderCannotCarryIsRefusedWhenTheClientIsMade(t *testing.T) {
	t.Parallel()
	for _, token := range []string{adminToken + "\r\nX-Forged: 1", "t\u00f6ken-0000000000", "tab\there-000000000"} {
		_, err := client.New("http://127.0.0.1:7317", client.WithToken(token))
		if err == nil {
			t.Errorf("WithToken(%q) was accepted", token)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, token) || !strings.Contains(msg, "token") {
			t.Errorf("WithToken(%q): %q, want a refusal naming the token, not showing it", token, msg)
		}
	}
}

func TestABadBaseURLIsRefusedWithoutShowingItsPassword(t *testing.T) {
	t.Parallel()
	for _, base := range []string{
		"http://bob:s3cret-pw@host:99999x", // does not parse
		"ftp://bob:s3cret-pw@host",         // not http(s)
		"http://bob:s3cret-pw@/x",          // no host
		"http://bob:s3c#ret-pw@host",       // a '#' in the password ends the host early
		"bob:s3cret-pw@host:7317",          // no scheme
	} {
		_, err := client.New(base)
		if err == nil {
			t.Errorf("New(%q) was accepted", base)
			continue
		}
		if msg := err.Error(); strings.Contains(msg, "s3c") || strings.Contains(msg, "ret-pw") || !strings.Contains(msg, "base URL") {
			t.Errorf("New(%q): %q, want a refusal that does not show the password", base, msg)
		}
	}
}

// TestAnAnswerPastTheSizeLimitIsRefusedAsSuch: an answer is read into
// memory up to a bound; one past it is not a gateway's, and is refused
// saying so, never cut at the bound and decoded (which reads as a
// malformed answer, or as a well-formed one that is not what was sent).
func TestAnAnswerPastTheSizeLimitIsRefusedAsSuch(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"sessions":[]}`)
		// Blanks are JSON's own: an answer cut within them still decodes.
		blank := strings.Repeat(" ", 1<<20)
		for range 64 {
			io.WriteString(w, blank)
		}
		io.WriteString(w, `{"not":"one value"}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.List(bounded(t), client.ListInput{})
	if err == nil || !strings.Contains(err.Error(), "sessions_list") || !strings.Contains(err.Error(), "larger than 64 MiB") {
		t.Fatalf("an answer past 64 MiB: %+v, %v; want an error saying it is too large", out, err)
	}
}

// TestANameNoToolCanHaveIsRefusedBeforeAnythingIsSent: a tool's name
// goes into the route, so "." or ".." would reach another route (the
// request is redirected to /v1/ or /v1/tools/ and answered there), and a
// control character or a blank makes a URL that cannot be sent or names
// no tool: each is refused as the mistake it is.
func TestANameNoToolCanHaveIsRefusedBeforeAnythingIsSent(t *testing.T) {
	gw := startGateway(t, nil)
	rec := &recording{}
	c := connect(t, gw, adminToken, "", client.WithHTTPClient(&http.Client{Transport: rec}))
	for _, name := range []string{"", ".", "..", "session_status\n", "session status", " session_status", "session_status\xff", "sessión_status"} {
		err := c.Call(bounded(t), name, map[string]any{"sessionKey": manager}, nil)
		checkAPIError(t, fmt.Sprintf("the tool %q", name), err, 0, client.ErrInvalidArgument, "not a tool's name")
	}
	if len(rec.seen) != 0 {
		t.Fatalf("requests were sent: %+v", rec.seen)
	}
}

// TestARetryAfterPastTheLongestWaitIsTheLongestWait: a Retry-After of
// weeks (seconds, or a date far ahead) is MaxRetryAfter, so that neither a
// stream nor a caller retrying sleeps for weeks; seconds past what a
// time.Duration holds are too, never a product that wrapped around to a
// short or negative wait.
func TestARetryAfterPastTheLongestWaitIsTheLongestWait(t *testing.T) {
	t.Parallel()
	for _, after := range []string{"3000000", "Fri, 01 Jan 2100 00:00:00 GMT", "9223372037", "99999999999", "18446744073709551616"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", after)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"code":"unavailable","message":"the store is unavailable: retry"}}`)
		}))
		c, err := client.New(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.List(bounded(t), client.ListInput{})
		srv.Close()
		ae := checkAPIError(t, "Retry-After "+after, err, http.StatusServiceUnavailable, client.ErrUnavailable)
		if ae.RetryAfter != client.MaxRetryAfter {
			t.Errorf("Retry-After %s: %s, want the longest wait, %s", after, ae.RetryAfter, client.MaxRetryAfter)
		}
	}
}

// TestAnAnswerThatIsNotTheGatewaysIsShownCutAtACharacter: a proxy's error
// page is shown cut short, and the cut falls between characters, so the
// message stays valid UTF-8 (a log or a JSON encoder would otherwise
// mangle it).
func TestAnAnswerThatIsNotTheGatewaysIsShownCutAtACharacter(t *testing.T) {
	t.Parallel()
	page := "<p>" + strings.Repeat("é", 300) + "</p>" // the 200th byte is inside an é
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusBadGateway)
		io.WriteString(w, page)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.List(bounded(t), client.ListInput{})
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusBadGateway || ae.Code != "" {
		t.Fatalf("a proxy's error page: %v, want an *APIError of status 502 without a code", err)
	}
	if !utf8.ValidString(ae.Message) || !strings.HasPrefix(ae.Message, "HTTP 502: <p>éé") || !strings.HasSuffix(ae.Message, "é…") {
		t.Fatalf("the page shown as %q, want it cut between characters", ae.Message)
	}
}

// TestAnActingSessionAHeaderCannotCarryIsRefusedByTheGatewayNamingIt: a
// key with a control character cannot go in the Vigil-Session header, so
// it goes as the ?as= parameter, as the Python and TypeScript clients
// send it, and the gateway refuses it as the invalid key it is, instead
// of the call failing inside net/http over a header the caller never set.
func TestAnActingSessionAHeaderCannotCarryIsRefusedByTheGatewayNamingIt(t *testing.T) {
	gw := startGateway(t, nil)
	const bad = "agent:main:main\r\nX-Injected: 1"
	_, err := connect(t, gw, adminToken, bad).List(bounded(t), client.ListInput{})
	checkAPIError(t, "acting as a key with CR LF", err, http.StatusBadRequest, client.ErrInvalidArgument, "session key")
	_, err = connect(t, gw, adminToken, "").Turn(bounded(t), client.TurnInput{SessionKey: bad, WaitSeconds: new(0)})
	checkAPIError(t, "the turn of a key with CR LF", err, http.StatusBadRequest, client.ErrInvalidArgument, "session key")
	st := pull(t, connect(t, gw, adminToken, bad).Events(bounded(t), client.EventsOptions{}))
	_, err, _ = st.next()
	checkAPIError(t, "the log stream acting as a key with CR LF", err, http.StatusBadRequest, client.ErrInvalidArgument, "session key")
}

// pageServer answers every request 200 with body and the Content-Type
// contentType ("" sends none).
func pageServer(t *testing.T, contentType, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if contentType == "" {
			w.Header()["Content-Type"] = nil // net/http would guess one
		} else {
			w.Header().Set("Content-Type", contentType)
		}
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestACallAnsweredWithAPageIsAnErrorNamingItsContentType: a 200 that is
// not JSON (a proxy's login page at a wrong base URL) is not the gateway's:
// it is an error naming the Content-Type it came with and the path asked,
// never the token or the password, and never a success, even where no
// output is read (Health).
func TestACallAnsweredWithAPageIsAnErrorNamingItsContentType(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"text/html; charset=utf-8", ""} {
		srv := pageServer(t, ct, `<html><body>Sign in</body></html>`)
		base := strings.Replace(srv.URL, "http://", "http://user:hunter2@", 1) + "/vigil"
		c, err := client.New(base, client.WithToken("s3cret-token"))
		if err != nil {
			t.Fatal(err)
		}
		want := `Content-Type "` + ct + `"`
		if ct == "" {
			want = "no Content-Type"
		}
		_, err = c.List(bounded(t), client.ListInput{})
		checkNotTheGateways(t, err, want, "/vigil/v1/tools/sessions_list", "not application/json")
		checkNotTheGateways(t, c.Health(bounded(t)), want, "/vigil/healthz", "not application/json")
	}
}

// checkNotTheGateways checks that err is an *APIError of a 200 without a
// code whose message says each of says and shows neither the token nor
// the password of the tests that check it.
func checkNotTheGateways(t *testing.T, err error, says ...string) {
	t.Helper()
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.StatusCode != http.StatusOK || ae.Code != "" {
		t.Fatalf("error %v (%T), want an *APIError of status 200 without a code", err, err)
	}
	for _, s := range says {
		if !strings.Contains(ae.Message, s) {
			t.Errorf("message %q does not say %q", ae.Message, s)
		}
	}
	for _, secret := range []string{"s3cret-token", "hunter2"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("%v shows %q", err, secret)
		}
	}
}

// TestAnErrorAnsweredWith200IsTheErrorItSays: an error body whose status
// was changed to 200 on the way is the error it says, never decoded into
// an empty output and taken for a success; one without a code is an error
// showing it.
func TestAnErrorAnsweredWith200IsTheErrorItSays(t *testing.T) {
	t.Parallel()
	srv := pageServer(t, "application/json", `{"error":{"code":"not_found","message":"no session agent:ops:main"}}`)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.Status(bounded(t), client.StatusInput{SessionKey: "agent:ops:main"})
	if out != nil {
		t.Fatalf("an error answered with 200 gave the output %+v", out)
	}
	checkAPIError(t, "not_found answered with 200", err, http.StatusOK, client.ErrNotFound, "no session agent:ops:main")

	srv = pageServer(t, "application/json", `{"error":{"reason":"upstream rejected"}}`)
	if c, err = client.New(srv.URL); err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(bounded(t), client.StatusInput{SessionKey: "agent:ops:main"})
	checkNotTheGateways(t, err, "holding an error", "upstream rejected")
}

// TestASendThatFailedIsAnOutputNotAnErrorAnswer: sessions_send says a
// delivery that failed in its output's "error" text; that is the tool's
// output, not an error answer.
func TestASendThatFailedIsAnOutputNotAnErrorAnswer(t *testing.T) {
	t.Parallel()
	srv := pageServer(t, "application/json", `{"status":"error","sessionKey":"agent:ops:main","error":"the agent is down"}`)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	out := must(c.Send(bounded(t), client.SendInput{SessionKey: "agent:ops:main", Message: "hi"}))(t)
	if out.Status != "error" || out.Error != "the agent is down" {
		t.Fatalf("the send's output %+v, want its status and error text", out)
	}
}

// TestAnErrorWithACodeButNoMessageKeepsItsCodeAndNamesTheStatus: an error
// body of the gateway's shape without its message is still the error its
// code says, and its message names the status and the code, never empty.
func TestAnErrorWithACodeButNoMessageKeepsItsCodeAndNamesTheStatus(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":{"code":"not_found"}}`)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Status(bounded(t), client.StatusInput{SessionKey: "agent:ops:main"})
	checkAPIError(t, "a code without a message", err, http.StatusNotFound, client.ErrNotFound, "HTTP 404: not_found")
}

// A base URL's query or fragment would be dropped from every request: a
// caller who meant ?as= to act as a session would act as another,
// unwarned.
func TestABaseURLWithAQueryOrFragmentIsRefusedNotDropped(t *testing.T) {
	t.Parallel()
	for _, base := range []string{
		"http://127.0.0.1:7317/?as=agent:main:main",
		"http://127.0.0.1:7317?token=s3cret-pw",
		"http://127.0.0.1:7317/#top",
	} {
		_, err := client.New(base)
		if err == nil {
			t.Errorf("New(%q) was accepted", base)
			continue
		}
		if msg := err.Error(); !strings.Contains(msg, "query or fragment") || strings.Contains(msg, "s3cret") {
			t.Errorf("New(%q): %q, want a refusal naming the query or fragment, showing neither", base, msg)
		}
	}
}

// A base URL is used as written: what a URL cannot carry as it is (a
// blank, a character beyond ASCII, an empty "#") is refused rather than
// escaped or dropped unseen, as the TypeScript and Python clients refuse
// it.
func TestABaseURLNotWrittenAsAURLIsRefused(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"http://127.0.0.1:1/#", "http://127.0.0.1:1/a b", "http://127.0.0.1:1/é", "http://127.0.0.1:1/a%zz"} {
		if _, err := client.New(base); err == nil || !strings.Contains(err.Error(), "base URL") {
			t.Errorf("New(%q): %v, want a refusal naming the base URL", base, err)
		}
	}
	if _, err := client.New("http://127.0.0.1:1/a%20b/"); err != nil {
		t.Errorf("a path percent-escaped: %v", err)
	}
}
