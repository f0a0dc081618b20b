package dashboard_test

// Browser tests: headless Chromium, driven with chromedp, loads the
// dashboard from a live gateway and does what a person would. They need
// /usr/bin/chromium (Debian's chromium package): without it they skip, and
// under CI=true they fail instead, so CI cannot pass without running them.
//
// Screenshots go to $VIGIL_ARTIFACTS, or to vigil-dashboard-artifacts in
// the system's temporary directory.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/leaktest"
)

const chromiumPath = "/usr/bin/chromium"

// browserWait bounds each test's time in the browser; everything it waits
// for normally happens in well under a second.
const browserWait = 45 * time.Second

var browser struct {
	once   sync.Once
	ctx    context.Context
	cancel context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	leaktest.Main(m, func() {
		if browser.cancel != nil {
			browser.cancel()
		}
	})
}

// newTab opens a tab in the shared headless browser, started on first use.
func newTab(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err != nil {
		if ci := os.Getenv("CI"); ci == "true" || ci == "1" {
			t.Fatalf("%s is missing: CI must install Debian's chromium package to run the dashboard's browser tests", chromiumPath)
		}
		t.Skipf("skipping the browser test: %s is missing (apt-get install chromium); CI runs it", chromiumPath)
	}
	browser.once.Do(func() {
		dir, err := os.MkdirTemp("", "vigil-chromium-")
		if err != nil {
			browser.err = err
			return
		}
		// The flags keep a headless Chromium off the network: without them it
		// looks up hosts for updates and sync, and hangs without internet.
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(chromiumPath),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("no-first-run", true),
			chromedp.UserDataDir(dir),
			chromedp.WindowSize(1280, 800),
		)
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(alloc)
		browser.ctx = ctx
		browser.cancel = func() {
			cancelCtx()
			cancelAlloc()
			os.RemoveAll(dir)
		}
		browser.err = chromedp.Do(ctx) // starts the browser
	})
	if browser.err != nil {
		t.Fatalf("start %s: %v", chromiumPath, browser.err)
	}
	tab, cancelTab := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancelTab)
	if err := chromedp.Do(tab); err != nil { // opens the tab
		t.Fatal(err)
	}
	// Any uncaught error in the page's script fails the test, whatever the
	// test was looking at.
	var mu sync.Mutex
	var thrown []string
	exceptions := chromedp.Events(tab, runtime.ExceptionThrown)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			mu.Lock()
			thrown = append(thrown, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, e := range thrown {
			t.Errorf("uncaught error in the page: %s", e)
		}
	})
	ctx, cancel := context.WithTimeout(tab, browserWait)
	t.Cleanup(cancel)
	return ctx
}

// run runs browser steps, failing the test with what it was doing.
func run(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitFor waits until a JavaScript condition holds on the page.
func waitFor(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		t.Fatalf("waiting until %s: %v", what, err)
	}
}

// waitText waits until the element sel names shows every one of want. It
// reads the element in the same step as it finds it, since the page may
// redraw a list between two steps.
func waitText(t *testing.T, ctx context.Context, sel string, want ...string) {
	t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector(%q); return !!e && %s.every(w => e.innerText.includes(w)); })()`,
		sel, jsStrings(want))
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](js,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))); err != nil {
		got, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`document.querySelector(%q)?.innerText ?? '(none)'`, sel)))
		t.Fatalf("waiting for %s to show %q: %v (it shows %q)", sel, want, err, got)
	}
}

func jsStrings(list []string) string {
	quoted := make([]string, len(list))
	for i, s := range list {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// open loads the dashboard and, when the gateway asks for tokens, signs in
// with the operator's token; it returns once the sessions view shows.
func open(t *testing.T, ctx context.Context, gw *liveGateway, hash string) {
	t.Helper()
	run(t, ctx, "load the dashboard", chromedp.Navigate(gw.URL+"/"+hash))
	if gw.tokens {
		run(t, ctx, "sign in",
			chromedp.WaitVisible(chromedp.ID("token")),
			chromedp.SendKeys(chromedp.ID("token"), operatorToken),
			chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
		)
	}
	run(t, ctx, "wait for the live stream", chromedp.WaitVisible(chromedp.CSS("#live.on")))
}

func sessionHash(key string) string {
	agent := strings.Split(key, ":")[1]
	return "#/session/" + agent + "/" + strings.ReplaceAll(key, ":", "%3A")
}

func row(key string) chromedp.CSS { return chromedp.CSS(fmt.Sprintf(`tr.session[data-key=%q]`, key)) }

func cursor(scope, watcher, target, state string) chromedp.CSS {
	return chromedp.CSS(fmt.Sprintf(`%s li.cursor%s[data-watcher=%q][data-target=%q]`, scope, state, watcher, target))
}

// personWritesFromThePage opens the session's page and sends a message
// from its form.
func personWritesFromThePage(t *testing.T, ctx context.Context, gw *liveGateway, key, message string) {
	t.Helper()
	run(t, ctx, "open the session page and write into it",
		chromedp.Navigate(gw.URL+"/"+sessionHash(key)),
		chromedp.WaitVisible(chromedp.ID("send-message")),
		chromedp.SendKeys(chromedp.ID("send-message"), message),
		chromedp.Click(chromedp.ID("send-button")),
	)
	waitFor(t, ctx, "the message shows in the transcript",
		fmt.Sprintf(`[...document.querySelectorAll('#transcript li.message.actor-human .content')].some(e => e.textContent === %q)`, message))
}

// ---- signing in ----

func TestWithTokensThePageWithoutATokenShowsOnlyTheLoginPrompt(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	before := len(gw.Requests())
	// Straight to a session page: still nothing but the prompt.
	run(t, ctx, "load a session page without a token",
		chromedp.Navigate(gw.URL+"/"+sessionHash(child)),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	hidden := eval[[]bool](t, ctx, `['view-sessions', 'view-session', 'nav', 'live', 'signout'].map(id => document.getElementById(id).hidden)`)
	if slices.Contains(hidden, false) {
		t.Errorf("besides the login prompt, views/controls shown: hidden = %v", hidden)
	}
	if body := eval[string](t, ctx, `document.body.innerText`); strings.Contains(body, "agent:") {
		t.Errorf("the page shows session data without a token:\n%s", body)
	}
	for _, r := range gw.Requests()[before:] {
		if strings.Contains(r, "/v1/") && r != "GET /v1/tools" {
			t.Errorf("the page asked for data without a token: %s (all its requests: %v)", r, gw.Requests()[before:])
		}
	}
}

func TestALoginWithAWrongTokenIsRefusedAndFetchesNothing(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	before := len(gw.Requests())
	run(t, ctx, "sign in with a wrong token",
		chromedp.Navigate(gw.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "not-the-right-token-000"),
		chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	)
	waitText(t, ctx, "#login-error", "refused")
	if stored := eval[bool](t, ctx, `sessionStorage.length === 0 && localStorage.length === 0`); !stored {
		t.Error("a refused token was stored")
	}
	for _, r := range gw.Requests()[before:] {
		if strings.Contains(r, "/v1/") && r != "GET /v1/tools" {
			t.Errorf("the page asked for data with a refused token: %s", r)
		}
	}
}

// A token pasted with a character no header can carry (a zero-width
// space, here) is refused for what it is, not as a gateway out of reach.
func TestALoginWithATokenHoldingAnInvisibleCharacterSaysWhich(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	run(t, ctx, "sign in with a token pasted along with a zero-width space",
		chromedp.Navigate(gw.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SetValue(chromedp.ID("token"), operatorToken+"\u200b"),
		chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("login-error")),
	)
	if msg := eval[string](t, ctx, `document.getElementById('login-error').textContent`); !strings.Contains(msg, "U+200B") {
		t.Errorf("the login error says %q, want it to name U+200B", msg)
	}
	if stored := eval[int](t, ctx, `sessionStorage.length`); stored != 0 {
		t.Errorf("sessionStorage holds %d entries", stored)
	}
}

// A sign-in sent twice (a double click, Enter pressed twice) signs in
// once: signed in twice, the page opened a second log stream and left the
// first one open for as long as the tab lived.
func TestASignInSentTwiceSignsInOnce(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	run(t, ctx, "sign in twice",
		chromedp.Navigate(gw.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), operatorToken),
		chromedp.Evaluate[chromedp.Void](`(() => { const f = document.getElementById('login-form'); f.requestSubmit(); f.requestSubmit(); })()`),
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
		chromedp.WaitVisible(chromedp.ID("sessions-empty")),
	)
	var probes, streams int
	for _, r := range gw.Requests() {
		switch r {
		case "GET /v1/tools":
			probes++
		case "GET /v1/events":
			streams++
		}
	}
	// One probe when the page loaded without a token, one for the sign-in.
	if probes != 2 || streams != 1 {
		t.Fatalf("token checks, log streams = %d, %d; want 2, 1 (requests: %v)", probes, streams, gw.Requests())
	}
}

func TestTheTokenIsKeptOnlyInTheTabsSessionStorage(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	open(t, ctx, gw, "")
	got := eval[[]string](t, ctx, `[sessionStorage.getItem('vigil.token') || '', String(localStorage.length), document.cookie]`)
	if !slices.Equal(got, []string{operatorToken, "0", ""}) {
		t.Fatalf("sessionStorage token, localStorage entries, cookies = %q", got)
	}
}

func TestSigningOutForgetsTheTokenAndHidesEverySession(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "sign out",
		chromedp.WaitVisible(row(child)),
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("login")),
	)
	if stored := eval[int](t, ctx, `sessionStorage.length`); stored != 0 {
		t.Errorf("sessionStorage still holds %d entries", stored)
	}
	if body := eval[string](t, ctx, `document.body.innerText`); strings.Contains(body, child) {
		t.Errorf("after signing out the page still shows %s", child)
	}
}

// An agent's token may read its agent's sessions but look at the queue of
// none it does not act as: their pages show all the rest.
func TestWithAnAgentsTokenASessionPageShowsEverythingButAQueueItMayNotSee(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	run(t, ctx, "open the child's page and sign in with the manager's token",
		chromedp.Navigate(gw.URL+"/"+sessionHash(child)),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), managerToken),
		chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
	)
	waitText(t, ctx, "#s-facts", "writer")
	waitText(t, ctx, "#transcript", "Draft the Q3 report")
	shown := eval[[]bool](t, ctx, `['queued-card', 'banner'].map(id => !document.getElementById(id).hidden)`)
	if !slices.Equal(shown, []bool{false, false}) {
		t.Errorf("on the child's page with the manager's token, shown: queue, banner = %v; want neither (banner: %q)",
			shown, eval[string](t, ctx, `document.getElementById('banner-text').textContent`))
	}
}

// The page of another agent's session, opened with an agent's token, says
// the token may not see it: no form that could only fail, and no error
// that promises to try again.
func TestWithAnAgentsTokenAnotherAgentsSessionPageSaysTheTokenMayNotSeeIt(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	opsChild := spawn(t, gw, "agent:ops:main", "Rotate the logs", "rotator")
	ctx := newTab(t)
	run(t, ctx, "open ops' child's page and sign in with the manager's token",
		chromedp.Navigate(gw.URL+"/"+sessionHash(opsChild)),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), managerToken),
		chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
	)
	waitFor(t, ctx, "the page to say something of the session",
		`document.getElementById('s-denied')?.hidden === false || !document.getElementById('banner').hidden`)
	shown := eval[[]bool](t, ctx, `['s-denied', 'banner', 'goal-form', 'send-form', 's-missing'].map(id => document.getElementById(id)?.hidden === false)`)
	if !slices.Equal(shown, []bool{true, false, false, false, false}) {
		t.Errorf("on another agent's session page, shown: denied, banner, goal form, send form, missing = %v; want only denied (banner: %q)",
			shown, eval[string](t, ctx, `document.getElementById('banner-text').textContent`))
	}
}

func TestWithoutTokensThePageOpensStraightOnTheSessions(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	run(t, ctx, "load the dashboard",
		chromedp.Navigate(gw.URL+"/"),
		chromedp.WaitVisible(row(child)),
	)
	if shown := eval[bool](t, ctx, `!document.getElementById('login').hidden || !document.getElementById('signout').hidden`); shown {
		t.Error("a gateway without tokens still shows a login prompt or a sign-out button")
	}
}

// ---- the sessions view ----

// A session a runtime keeps elsewhere and records in vigil is listed,
// graphed and shown like a hosted one, marked as hosted by that runtime,
// and its page never reads as deleted. (A spawned session's row says vigil:
// TestSessionsViewListsEachChildUnderItsParent.)
func TestASessionRecordedElsewhereIsListedAndShownAsHostedByItsRuntime(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	const thread = "agent:main:langgraph:ticket-42"
	tool[gateway.RecordOutput](t, gw, manager, "session_record", map[string]any{"sessionKey": thread, "kind": "child_spawned",
		"parent": manager, "hostedBy": "langgraph"})
	tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": thread, "kind": "goal_changed"})
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the recorded session's row", chromedp.WaitVisible(row(thread)),
		chromedp.WaitVisible(cursor("#graph", manager, thread, "")))
	if host := eval[string](t, ctx, `document.querySelector('tr.session[data-key="`+thread+`"] .badge.host.elsewhere')?.innerText ?? ''`); host != "langgraph" {
		t.Errorf("the recorded session's row says it is hosted by %q, want langgraph", host)
	}
	// The supervisor the runtime records for (its parent, which watches it)
	// is listed too, hosted by the same runtime until it acts through vigil.
	if host := eval[string](t, ctx, `document.querySelector('tr.session[data-key="`+manager+`"] .badge.host')?.innerText ?? ''`); host != "langgraph" {
		t.Errorf("the supervisor's row says it is hosted by %q, want langgraph", host)
	}
	run(t, ctx, "open the recorded session", chromedp.Navigate(gw.URL+"/"+sessionHash(thread)),
		chromedp.WaitVisible(chromedp.ID("s-elsewhere")))
	waitText(t, ctx, "#s-facts", "langgraph")
	if facts := eval[string](t, ctx, `document.getElementById('s-facts').textContent`); !strings.Contains(facts, "First recorded") ||
		strings.Contains(facts, "Incarnation") {
		t.Errorf("the recorded session's facts: %q", facts)
	}
	waitText(t, ctx, "#timeline", "goal_changed", "child_spawned")
	shown := eval[[]bool](t, ctx, `['s-missing', 'goal-form', 'send-form'].map(id => !document.getElementById(id).hidden)`)
	if !slices.Equal(shown, []bool{false, false, false}) {
		t.Errorf("on a recorded session's page, shown: missing, goal form, send form = %v; want none", shown)
	}
}

// A key holding a character that reorders or hides text shows it as its
// code point, in the list and on its page, so that it cannot pass for
// another key; a label's right-to-left text stays within the label.
func TestAKeyShowsTheCharactersThatWouldDisguiseItAsCodePoints(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	const disguised = "agent:main:x\u202enim"
	tool[gateway.RecordOutput](t, gw, manager, "session_record", map[string]any{"sessionKey": disguised, "kind": "child_spawned",
		"parent": manager, "hostedBy": "langgraph"})
	child := spawn(t, gw, manager, "Draft the Q3 report", "\u05e9\u05dc\u05d5\u05dd")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the labelled child's row", chromedp.WaitVisible(row(child)))
	const want = "agent:main:x<U+202E>nim"
	waitText(t, ctx, "#sessions-body", want)
	if bidi := eval[string](t, ctx, `getComputedStyle(document.querySelector('tr.session[data-key="`+child+`"] .label')).unicodeBidi`); bidi != "isolate" {
		t.Errorf("the label's unicode-bidi is %q, want isolate", bidi)
	}
	run(t, ctx, "open its page", chromedp.Navigate(gw.URL+"/"+sessionHash(disguised)), chromedp.WaitVisible(chromedp.ID("s-elsewhere")))
	waitText(t, ctx, "#s-title", want)
	// The tab's title and the browser's history show the key too.
	if title := eval[string](t, ctx, `document.title`); title != want+" · vigil" {
		t.Errorf("the page's title is %q, want %q", title, want+" · vigil")
	}
}

// Characters that draw nothing at all are as much a disguise as those
// that reorder: a soft hyphen, a variation selector, a tag character, a
// Hangul filler, a deprecated format character, a paragraph separator.
// "wri\u00adter" would pass for the writer.
func TestAKeyShowsEveryCharacterThatDrawsNothingAsItsCodePoint(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	const disguised = "agent:main:wri\u00ad\u2029ter\ufe0f\U000e0041\u3164\u206a"
	tool[gateway.RecordOutput](t, gw, manager, "session_record", map[string]any{"sessionKey": disguised, "kind": "child_spawned",
		"parent": manager, "hostedBy": "langgraph"})
	ctx := newTab(t)
	open(t, ctx, gw, "")
	js, err := json.Marshal(disguised)
	if err != nil {
		t.Fatal(err)
	}
	find := `[...document.querySelectorAll('tr.session')].find(r => r.dataset.key === ` + string(js) + `)`
	waitFor(t, ctx, "the disguised key's row", "!!"+find)
	const want = "agent:main:wri<U+00AD><U+2029>ter<U+FE0F><U+E0041><U+3164><U+206A>"
	if got := eval[string](t, ctx, find+`.querySelector('a.key').textContent`); got != want {
		t.Fatalf("the key shows as %q, want %q", got, want)
	}
}

// An agent's id, and the id of whoever acted, may hold the same disguises
// as a key: "ma\u00adin" would pass for main, and its global session for
// main's. They show them as code points, wherever the page names them.
func TestAnAgentOrActorIdShowsItsHiddenCharactersAsCodePoints(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	const agent, actor = "ma\u00adin", "an\u200bn"
	tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": "global", "agentId": agent,
		"kind": "goal_changed", "hostedBy": "langgraph", "actorType": "human", "actorId": actor})
	ctx := newTab(t)
	open(t, ctx, gw, "")
	const wantAgent, wantActor = "ma<U+00AD>in", "an<U+200B>n"
	waitText(t, ctx, "#sessions-body", wantAgent)
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#agent-filter option')].map(o => o.textContent)`); !slices.Contains(got, wantAgent) {
		t.Errorf("the agent filter offers %q, want %q among them", got, wantAgent)
	}
	run(t, ctx, "open the session's page", chromedp.Navigate(gw.URL+"/#/session/ma%C2%ADin/global"),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.event[data-kind="goal_changed"]`)))
	waitText(t, ctx, "#s-facts", wantAgent)
	waitText(t, ctx, "#timeline", wantActor)
}

func TestSessionsViewListsEachChildUnderItsParent(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	grandchild := spawn(t, gw, child, "Check the figures", "checker")
	sibling := spawn(t, gw, manager, "Collect the sales sheet", "collector")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the rows", chromedp.WaitVisible(row(grandchild)), chromedp.WaitVisible(row(sibling)))
	rows := eval[[]string](t, ctx, `[...document.querySelectorAll('#sessions-body tr.session')].map(r =>
		r.dataset.key + ' ' + r.querySelector('td.tree').style.getPropertyValue('--depth'))`)
	// Siblings are in key order; whichever comes first, each child follows
	// its parent, one level deeper.
	want := []string{manager + " 0", child + " 1", grandchild + " 2", sibling + " 1"}
	if sibling < child {
		want = []string{manager + " 0", sibling + " 1", child + " 1", grandchild + " 2"}
	}
	if !slices.Equal(rows, want) {
		t.Fatalf("rows (key depth) = %q, want %q", rows, want)
	}
	cells := eval[[]string](t, ctx, fmt.Sprintf(`[...document.querySelectorAll('tr.session[data-key=%q] td')].map(c => c.innerText.trim())`, child))
	if len(cells) != 8 || !strings.Contains(cells[0], "writer") || cells[1] != "main" || cells[2] != "subagent" || cells[3] != "vigil" ||
		cells[4] != manager || cells[5] != "2" {
		t.Fatalf("the child's row = %q", cells)
	}
}

func TestSessionsViewFiltersByAgent(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	opsChild := spawn(t, gw, "agent:ops:main", "Rotate the logs", "rotator")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "filter by agent ops",
		chromedp.WaitVisible(row(opsChild)),
		chromedp.WaitVisible(row(child)),
		chromedp.SetValue(chromedp.ID("agent-filter"), "ops"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('agent-filter').dispatchEvent(new Event('change'))`),
	)
	keys := eval[[]string](t, ctx, `[...document.querySelectorAll('#sessions-body tr.session')].map(r => r.dataset.key)`)
	if !slices.Equal(keys, []string{"agent:ops:main", opsChild}) {
		t.Fatalf("sessions shown for agent ops = %q", keys)
	}
	if watchers := eval[[]string](t, ctx, `[...document.querySelectorAll('#graph li.watcher')].map(w => w.dataset.watcher)`); !slices.Equal(watchers, []string{"agent:ops:main"}) {
		t.Fatalf("watchers shown for agent ops = %q", watchers)
	}
}

// Two agents may each have a session with the same bare key: the
// session is the pair (agentId, key), so both are listed.
func TestSessionsViewListsEachAgentsSessionOfTheSameBareKey(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	for _, agent := range []string{"main", "ops"} {
		tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": "global", "agentId": agent,
			"kind": "goal_changed", "hostedBy": "langgraph"})
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitFor(t, ctx, "the rows of both agents' global sessions",
		`[...document.querySelectorAll('#sessions-body tr.session[data-key="global"]')].map(r => r.dataset.agent).join(' ') === 'main ops'`)
}

func TestSessionsViewShowsANewChildWithoutReloading(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the empty view", chromedp.WaitVisible(chromedp.ID("sessions-empty")))
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	run(t, ctx, "wait for the new child and its parent's cursor",
		chromedp.WaitVisible(row(child)),
		chromedp.WaitVisible(cursor("#graph", manager, child, ":not(.pending)")),
	)
	loads := gw.Count(0, "GET /")
	if loads != 1 {
		t.Errorf("the page was loaded %d times", loads)
	}
}

// A runaway chain of spawns (each child spawning the next) is listed with
// every session's name in view, on a laptop and on a phone: a row is
// indented for its depth only so far.
func TestADeepChainOfSpawnsKeepsEveryNameInView(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	const depth = 60
	parent := manager
	for i := range depth {
		parent = spawn(t, gw, parent, fmt.Sprintf("Spawn level %d", i+2), "")
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	deepest := fmt.Sprintf(`document.querySelector('tr.session[data-key="%s"] a.key').getBoundingClientRect()`, parent)
	for _, viewport := range []struct {
		name string
		set  chromedp.Action[chromedp.Void]
	}{
		{"laptop", chromedp.EmulateViewport(1280, 720)},
		{"phone", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2))},
	} {
		run(t, ctx, "a "+viewport.name+" viewport", viewport.set, chromedp.WaitVisible(row(parent)))
		got := eval[[]float64](t, ctx, `[`+deepest+`.left, document.querySelector('.table-wrap').getBoundingClientRect().right,
			document.documentElement.scrollWidth, window.innerWidth]`)
		if got[0] >= got[1] || got[2] > got[3] {
			t.Errorf("on a %s, the deepest session's name begins at %vpx, right of the list's edge at %vpx, or the page is %vpx wide in a %vpx window",
				viewport.name, got[0], got[1], got[2], got[3])
		}
	}
}

// With many sessions the list and the watch graph draw the first 500 of
// each, not thousands of rows on every change; the rest is a button away.
func TestManySessionsAreDrawnFiveHundredAtATime(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	const children = 530
	for i := range children {
		tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": fmt.Sprintf("agent:main:rt:s%04d", i),
			"kind": "child_spawned", "parent": manager, "hostedBy": "rt"})
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#sessions-count", fmt.Sprintf("(%d)", children+1))
	waitText(t, ctx, "#graph-count", fmt.Sprintf("(%d)", children))
	counts := func() []int {
		return eval[[]int](t, ctx, `[document.querySelectorAll('#sessions-body tr.session').length, document.querySelectorAll('#graph li.cursor').length]`)
	}
	if got := counts(); !slices.Equal(got, []int{500, 500}) {
		t.Fatalf("rows, cursors drawn = %v, want 500 of each", got)
	}
	run(t, ctx, "show the rest of the list and of the graph",
		chromedp.Click(chromedp.ID("sessions-more")),
		chromedp.Click(chromedp.ID("graph-more")),
		chromedp.WaitNotPresent(chromedp.ID("graph-more")),
		chromedp.WaitNotPresent(chromedp.ID("sessions-more")),
	)
	if got := counts(); !slices.Equal(got, []int{children + 1, children}) {
		t.Fatalf("after showing the rest, rows, cursors drawn = %v, want %d, %d", got, children+1, children)
	}
}

// A link to a session page whose address cannot be decoded (cut short in
// a chat, say) opens the sessions view instead of a blank page.
func TestALinkThatNamesNoSessionOpensTheSessionsView(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "#/session/main/agent%3Amain%3Asub%E0%A4")
	run(t, ctx, "wait for the sessions view", chromedp.WaitVisible(row(child)))
}

// A link naming a session under an agent that is not its key's (edited by
// hand, or put together wrongly) opens the page of the session its key
// names, rather than an error the page retries for as long as it is open.
func TestALinkNamingAKeyUnderAnotherAgentOpensTheKeysOwnPage(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "#/session/ops/"+strings.ReplaceAll(child, ":", "%3A"))
	run(t, ctx, "see the manager among the child's watchers", chromedp.WaitVisible(cursor("#watchers", manager, child, "")))
	if got := eval[[]string](t, ctx, `[location.hash, String(document.getElementById('banner').hidden)]`); !slices.Equal(got, []string{sessionHash(child), "true"}) {
		t.Errorf("address, banner hidden = %q, want %q, true (banner: %q)", got, sessionHash(child),
			eval[string](t, ctx, `document.getElementById('banner-text').textContent`))
	}
}

// A link naming no session vigil could hold (a key with an empty part)
// says so on the page, without forms, and is not read again and again.
func TestALinkNamingAnInvalidKeySaysSo(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	open(t, ctx, gw, "#/session/main/agent%3Amain%3A%3Ax")
	waitFor(t, ctx, "the page to say something of the session",
		`document.getElementById('s-invalid')?.hidden === false || !document.getElementById('banner').hidden`)
	shown := eval[[]bool](t, ctx, `['s-invalid', 'banner', 'goal-form', 'send-form'].map(id => document.getElementById(id)?.hidden === false)`)
	if !slices.Equal(shown, []bool{true, false, false, false}) {
		t.Errorf("on an invalid key's page, shown: invalid, banner, goal form, send form = %v; want only invalid (banner: %q)",
			shown, eval[string](t, ctx, `document.getElementById('banner-text').textContent`))
	}
	waitText(t, ctx, "#s-invalid", "empty part")
}

// ---- the seed's story, from the page ----

// A link spelling a session in capitals opens the page of the session the
// gateway names, with its watchers, at the address the page itself gives.
func TestALinkSpellingASessionInCapitalsShowsItsPageWithItsWatchers(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "#/session/MAIN/"+strings.ReplaceAll(strings.ToUpper(child), ":", "%3A"))
	run(t, ctx, "see the manager among the child's watchers", chromedp.WaitVisible(cursor("#watchers", manager, child, "")))
	if hash := eval[string](t, ctx, `location.hash`); hash != sessionHash(child) {
		t.Errorf("the page's address is %q, want %q", hash, sessionHash(child))
	}
}

func TestAPersonWritesIntoAChildFromTheSessionPageAsAWebMessage(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	personWritesFromThePage(t, ctx, gw, child, "Use the revised figures, not the draft.")
	h := tool[gateway.HistoryOutput](t, gw, "", "sessions_history", map[string]any{"sessionKey": child})
	last := h.Messages[len(h.Messages)-1]
	if last.Content != "Use the revised figures, not the draft." || last.ActorType != "human" || last.ActorID != operatorID || last.Channel != "web" {
		t.Fatalf("the message stored = %+v, want a human message from %s via web", last, operatorID)
	}
	waitText(t, ctx, `#timeline li.event[data-kind="human_direct_message"][data-actor-type="human"]`,
		"human", operatorID, "human message via web")
}

// A message sent from one session's page, answered once the person has
// gone on to another session's page, leaves that page's own draft alone.
func TestASendAnsweredAfterThePersonMovedOnKeepsTheNextPagesDraft(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	other := spawn(t, gw, manager, "Collect the sales sheet", "collector")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	arrived, release := gw.holdNext(t, "/v1/tools/sessions_send")
	run(t, ctx, "send into the child",
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)),
		chromedp.SendKeys(chromedp.ID("send-message"), "Use the revised figures."),
		chromedp.Click(chromedp.ID("send-button")),
	)
	select {
	case <-arrived:
	case <-ctx.Done():
		t.Fatal("the message was never sent")
	}
	run(t, ctx, "go on to the other session and start a draft there",
		chromedp.Navigate(gw.URL+"/"+sessionHash(other)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)),
		chromedp.SendKeys(chromedp.ID("send-message"), "A draft for the collector"),
	)
	release()
	// The send button stays disabled until the send's answer is handled.
	waitFor(t, ctx, "the send's answer to be handled", `!document.getElementById('send-button').disabled`)
	if draft := eval[string](t, ctx, `document.getElementById('send-message').value`); draft != "A draft for the collector" {
		t.Fatalf("the other page's draft is now %q", draft)
	}
}

func TestTheWatchGraphShowsTheManagersPendingNoticeAfterAPersonWrites(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	personWritesFromThePage(t, ctx, gw, child, "Use the revised figures.")
	run(t, ctx, "see the notice among the child's watchers",
		chromedp.WaitVisible(cursor("#watchers", manager, child, ".pending")))
	// The queue also holds the notice that the spawn created the child.
	pending := tool[gateway.PendingOutput](t, gw, manager, "session_pending", map[string]any{"sessionKey": manager})
	about := slices.DeleteFunc(pending.Events, func(e gateway.SystemEventView) bool { return e.Target != child })
	if len(about) != 1 {
		t.Fatalf("the manager's queue = %+v, want one notice about the child", pending.Events)
	}
	run(t, ctx, "see the notice in the watch graph",
		chromedp.Click(chromedp.CSS(`nav a[href="#/"]`)),
		chromedp.WaitVisible(cursor("#graph", manager, child, ".pending")),
	)
	waitText(t, ctx, string(cursor("#graph", manager, child, ".pending"))+" p.notice", about[0].Text)
}

func TestTheManagersTurnThroughTheAPIClearsTheNoticeInTheWatchGraph(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	personWritesFromThePage(t, ctx, gw, child, "Use the revised figures.")
	run(t, ctx, "see the notice in the watch graph",
		chromedp.Click(chromedp.CSS(`nav a[href="#/"]`)),
		chromedp.WaitVisible(cursor("#graph", manager, child, ".pending")),
	)
	turn := takeTurn(t, gw, manager)
	if !slices.Equal(turn.Acknowledged, []string{child}) {
		t.Fatalf("the turn acknowledged %v, want %s", turn.Acknowledged, child)
	}
	run(t, ctx, "see the notice clear",
		chromedp.WaitVisible(cursor("#graph", manager, child, ":not(.pending)")),
		chromedp.WaitNotPresent(chromedp.CSS("#graph li.cursor.pending")),
	)
}

// While a notice is pending, the page re-reads the watch graph every two
// seconds, as the README says, not the whole list of sessions, which can
// run to thousands.
func TestWhileANoticeIsPendingThePageRereadsTheGraphNotTheList(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "Use the revised figures.", "timeoutSeconds": 0})
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "see the pending notice", chromedp.WaitVisible(cursor("#graph", manager, child, ".pending")))
	before := len(gw.Requests())
	// Three re-reads of the graph: by the third, what the first re-read
	// sent with it has long arrived.
	for gw.Count(before, "POST /v1/tools/sessions_graph") < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("the page did not re-read the graph three times (requests: %v)", gw.Requests()[before:])
		case <-time.After(50 * time.Millisecond):
		}
	}
	if lists := gw.Count(before, "POST /v1/tools/sessions_list"); lists != 0 {
		t.Fatalf("with a notice pending, the page re-read the sessions list %d times along with the graph", lists)
	}
}

func TestTheManagersPageShowsOnceThatAPersonDeletedItsChild(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	takeTurn(t, gw, manager) // takes the notice that the spawn created the child
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(manager))
	run(t, ctx, "see the manager's empty queue", chromedp.WaitVisible(chromedp.ID("queued-empty")))
	tool[gateway.DeleteOutput](t, gw, "", "session_delete", map[string]any{"sessionKey": child})
	waitText(t, ctx, `#queued li.queued-event.deleted[data-target="`+child+`"]`, vigil.DeletedNoticeText(child))
	takeTurn(t, gw, manager)
	run(t, ctx, "see the queue empty once the manager's turn consumed the notice",
		chromedp.WaitNotPresent(chromedp.CSS("#queued li.queued-event")))
}

// While the open page's own queue holds a notice (here, that a child was
// deleted, which no cursor shows as pending), the page re-reads the queue
// as often as it re-reads a pending notice in the graph, so that a turn
// that takes it is seen within seconds, not at the next full re-read.
func TestWhileThePagesQueueHoldsANoticeThePageRereadsItOften(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	takeTurn(t, gw, manager) // takes the notice that the spawn created the child
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(manager))
	run(t, ctx, "see the manager's empty queue", chromedp.WaitVisible(chromedp.ID("queued-empty")))
	tool[gateway.DeleteOutput](t, gw, "", "session_delete", map[string]any{"sessionKey": child})
	run(t, ctx, "see the notice of the deletion", chromedp.WaitVisible(chromedp.CSS(`#queued li.queued-event.deleted`)))
	before := len(gw.Requests())
	for gw.Count(before, "POST /v1/tools/session_pending") < 3 {
		select {
		case <-ctx.Done():
			t.Fatalf("the page re-read its queue %d times, %d of them with the whole list of sessions",
				gw.Count(before, "POST /v1/tools/session_pending"), gw.Count(before, "POST /v1/tools/sessions_list"))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if lists := gw.Count(before, "POST /v1/tools/sessions_list"); lists >= 3 {
		t.Errorf("the page re-read its queue only with the whole list of sessions (%d times)", lists)
	}
}

// A session deleted while its page is open is shown gone, and leaves the
// sessions list, as soon as its stream says so, not at the next poll
// (held off here: the tab reports itself hidden, and the poll reads
// nothing for a hidden tab).
func TestASessionPageShowsAtOnceThatItsSessionWasDeleted(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "see the child's page", chromedp.WaitVisible(chromedp.ID("s-title")), chromedp.WaitNotVisible(chromedp.ID("s-missing")))
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	tool[gateway.DeleteOutput](t, gw, "", "session_delete", map[string]any{"sessionKey": child})
	run(t, ctx, "see the page say the session does not exist", chromedp.WaitVisible(chromedp.ID("s-missing")))
	run(t, ctx, "see the list without it", chromedp.WaitNotPresent(row(child)))
}

// The page of a long session that was deleted offers none of its earlier
// messages or older changes: they went with it.
func TestADeletedLongSessionsPageOffersNothingOlder(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	personWritesMany(t, gw, child, 450)
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "see both offer more", chromedp.WaitVisible(chromedp.ID("transcript-more")), chromedp.WaitVisible(chromedp.ID("timeline-more")))
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	tool[gateway.DeleteOutput](t, gw, "", "session_delete", map[string]any{"sessionKey": child})
	run(t, ctx, "see the page say the session does not exist", chromedp.WaitVisible(chromedp.ID("s-missing")))
	if more := eval[[]string](t, ctx, `[...document.querySelectorAll('#transcript-more, #timeline-more')].map(e => e.id)`); len(more) > 0 {
		t.Errorf("the deleted session's page still offers %v", more)
	}
}

// A session deleted and created again under the same key while its page
// is open is a new session: the page shows nothing of the deleted one.
func TestASessionPageShowsNothingOfADeletedSessionOfTheSameKey(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": manager, "message": "the deleted session's message", "timeoutSeconds": 0})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(manager))
	waitText(t, ctx, "#transcript", "the deleted session's message")
	tool[gateway.DeleteOutput](t, gw, "", "session_delete", map[string]any{"sessionKey": manager})
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": manager, "message": "the new session's message", "timeoutSeconds": 0})
	waitText(t, ctx, "#transcript", "the new session's message")
	if shown := eval[string](t, ctx, `document.getElementById('transcript').innerText`); strings.Contains(shown, "the deleted session's message") {
		t.Fatalf("the page still shows the deleted session's transcript:\n%s", shown)
	}
}

// A notice queued for a watcher links to the session it is about, also
// when that is another agent's session of a bare key.
func TestAQueuedNoticeLinksToAnotherAgentsBareSession(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	// The manager (an admin acting as it) records that it started ops'
	// global session, so it watches it; then a person changes that session.
	gw.do(t, http.MethodPost, "/v1/tools/session_record", adminToken, manager, map[string]any{"sessionKey": "global", "agentId": "ops",
		"kind": "child_spawned", "parent": manager, "hostedBy": "langgraph"}, nil)
	takeTurn(t, gw, manager) // takes the notice that the session was created
	tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": "global", "agentId": "ops", "kind": "goal_changed"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(manager))
	waitFor(t, ctx, "the notice about ops' global session, linked to its page",
		`[...document.querySelectorAll('#queued li.queued-event[data-target="global"] a')].some(a => a.getAttribute('href') === '#/session/ops/global')`)
}

// A long-lived session's page draws its newest messages and changes, not
// its whole history: the rest is a button away.
func TestALongSessionsPageDrawsItsNewestMessagesAndChangesAndTheRestOnRequest(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	const sends = 230 // with the task, 231 messages; with the spawn, 232 changes
	for i := 1; i <= sends; i++ {
		tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": fmt.Sprintf("note %d", i), "timeoutSeconds": 0})
	}
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	waitText(t, ctx, "#transcript", fmt.Sprintf("note %d", sends))
	counts := func() []int {
		return eval[[]int](t, ctx, `[document.querySelectorAll('#transcript li.message').length, document.querySelectorAll('#timeline li.event').length]`)
	}
	if got := counts(); !slices.Equal(got, []int{200, 200}) {
		t.Fatalf("messages, changes drawn = %v, want the newest 200 of each", got)
	}
	if first := eval[string](t, ctx, `document.querySelector('#transcript li.message .content').textContent`); first != fmt.Sprintf("note %d", sends-199) {
		t.Errorf("the first message drawn is %q, want note %d", first, sends-199)
	}
	run(t, ctx, "show the earlier messages and the older changes",
		chromedp.Click(chromedp.ID("transcript-more")),
		chromedp.Click(chromedp.ID("timeline-more")),
		chromedp.WaitNotPresent(chromedp.ID("timeline-more")),
		chromedp.WaitNotPresent(chromedp.ID("transcript-more")),
	)
	if got := counts(); !slices.Equal(got, []int{sends + 1, sends + 2}) {
		t.Fatalf("after showing the rest, messages, changes drawn = %v, want %d, %d", got, sends+1, sends+2)
	}
	waitText(t, ctx, "#transcript li.message:first-of-type", "Draft the Q3 report")
	if more := eval[int](t, ctx, `document.querySelectorAll('#transcript-more, #timeline-more').length`); more != 0 {
		t.Errorf("with everything drawn, %d buttons still offer more", more)
	}
}

// A long session's page reads its transcript's newest page, not the whole
// transcript: each older page is read when the person asks for it.
func TestALongSessionsPageReadsOnlyItsNewestMessagesUntilAskedForMore(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	const notes = 1999 // with the task, 2,000 messages: ten pages
	personWritesMany(t, gw, child, notes)
	ctx := newTab(t)
	open(t, ctx, gw, "")
	// The idle poll reads nothing for a hidden tab: only the page opened
	// and the button pressed make it read.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, sessionHash(child)))
	waitText(t, ctx, "#transcript", fmt.Sprintf("note %d", notes))
	if n := gw.Count(before, "POST /v1/tools/sessions_history"); n > 2 {
		t.Errorf("opening a session of 2,000 messages read %d pages of its transcript, want at most 2", n)
	}
	first := func() string {
		return eval[string](t, ctx, `document.querySelector('#transcript li.message .content').textContent`)
	}
	if got := first(); got != fmt.Sprintf("note %d", notes-199) {
		t.Errorf("the first message drawn is %q, want note %d", got, notes-199)
	}
	before = len(gw.Requests())
	run(t, ctx, "show the earlier messages", chromedp.Click(chromedp.ID("transcript-more")))
	waitFor(t, ctx, "the page before drawn", `document.querySelectorAll("#transcript li.message").length === 400`)
	if got, n := first(), gw.Count(before, "POST /v1/tools/sessions_history"); got != fmt.Sprintf("note %d", notes-399) || n != 1 {
		t.Errorf("after one press, the first message drawn is %q, read with %d requests; want note %d, read with 1", got, n, notes-399)
	}
}

// A long session's page reads its newest changes, not its whole timeline:
// each older page is read when the person asks for it.
func TestALongSessionsPageReadsOnlyItsNewestChangesUntilAskedForMore(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	const notes = 1999 // with the spawn, 2,000 changes: ten pages
	personWritesMany(t, gw, child, notes)
	head := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child}).StateVersion
	ctx := newTab(t)
	open(t, ctx, gw, "")
	// The idle poll reads nothing for a hidden tab: only the page opened
	// and the button pressed make it read.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, sessionHash(child)))
	waitFor(t, ctx, "the newest change drawn", fmt.Sprintf(`!!document.querySelector('#timeline li.event[data-sequence="%d"]')`, head))
	if n := gw.Count(before, "POST /v1/tools/session_status"); n > 2 {
		t.Errorf("opening a session of 2,000 changes made %d session_status requests, want at most 2", n)
	}
	drawn := func() []string {
		return eval[[]string](t, ctx, `[...document.querySelectorAll('#timeline li.event')].map(e => e.dataset.sequence)`)
	}
	if got := drawn(); len(got) != 200 || got[0] != fmt.Sprint(head) {
		t.Fatalf("drew %d changes starting with #%s, want the newest 200 starting with #%d", len(got), got[0], head)
	}
	before = len(gw.Requests())
	run(t, ctx, "show the older changes", chromedp.Click(chromedp.ID("timeline-more")))
	waitFor(t, ctx, "the page before drawn", `document.querySelectorAll("#timeline li.event").length === 400`)
	if n := gw.Count(before, "POST /v1/tools/session_status"); n != 1 {
		t.Errorf("one press made %d session_status requests, want 1", n)
	}
}

// A session whose few changes lie far apart, among many of other sessions,
// shows them all without reading the log between them a page at a time:
// each window read back is wider than the last that held few of them.
func TestASessionsChangesFarApartAmongOthersAreReadInAFewWideningWindows(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	other := spawn(t, gw, manager, "Check the figures", "checker")
	personWritesMany(t, gw, other, 3200) // sixteen pages of another session's changes
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "Use the revised figures.", "timeoutSeconds": 0})
	st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child, "changesSince": 0})
	var want []string
	for _, e := range slices.Backward(st.StateChanges.Events) {
		want = append(want, fmt.Sprint(e.Sequence))
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, sessionHash(child)))
	waitFor(t, ctx, "every change drawn", fmt.Sprintf(`document.querySelectorAll('#timeline li.event').length === %d`, len(want)))
	if got := eval[[]string](t, ctx, `[...document.querySelectorAll('#timeline li.event')].map(e => e.dataset.sequence)`); !slices.Equal(got, want) {
		t.Errorf("the timeline shows changes %v, want %v", got, want)
	}
	if n := eval[int](t, ctx, `document.querySelectorAll('#timeline-more').length`); n != 0 {
		t.Error("with every change drawn, the timeline still offers older ones")
	}
	statuses := gw.Count(before, "POST /v1/tools/session_status")
	// One to find the newest, then windows of 200, 400, ... 3,200
	// sequences and one reaching the start.
	if statuses > 7 {
		t.Errorf("reading a session's changes across 3,200 of others made %d session_status requests, want at most 7", statuses)
	}
}

// A session whose oldest changes retention removed says so at the end of
// its timeline, once the person has read back to the oldest change kept:
// before that, older changes still lie between the page and the gap.
func TestAPrunedSessionsTimelineSaysRetentionRemovedChangesOnceReadBackToTheOldestKept(t *testing.T) {
	t.Parallel()
	gw := startGatewayOn(t, false, vigil.Options{MaxEvents: 300})
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	personWritesMany(t, gw, child, 449) // with the spawn, 450 changes
	if _, err := gw.engine.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child, "changesSince": 0, "limit": 1})
	if !st.StateChanges.HistoryGap {
		t.Fatal("pruning down to 300 changes left no gap in the child's history")
	}
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	waitFor(t, ctx, "the newest change drawn", fmt.Sprintf(`!!document.querySelector('#timeline li.event[data-sequence="%d"]')`, st.StateVersion))
	if gaps := eval[int](t, ctx, `document.querySelectorAll('#timeline li.gap').length`); gaps != 0 {
		t.Errorf("with older changes kept but not read, the timeline tells of %d gaps, want none yet", gaps)
	}
	run(t, ctx, "read back to the oldest change kept",
		chromedp.Click(chromedp.ID("timeline-more")),
		chromedp.WaitNotPresent(chromedp.ID("timeline-more")),
	)
	waitText(t, ctx, "#timeline li:last-child", "removed by retention")
	oldest := eval[string](t, ctx, `[...document.querySelectorAll('#timeline li.event')].pop().dataset.sequence`)
	if oldest != fmt.Sprint(st.StateChanges.EarliestAvailableSequence) {
		t.Errorf("the oldest change drawn is #%s, want the oldest kept, #%d", oldest, st.StateChanges.EarliestAvailableSequence)
	}
}

// pressWhileThePageReadsOn opens a session of 450 notes and presses the
// button named while the page reads on after one more message: the press
// is answered, and drawn, before the read on is. Then it presses the
// button again and waits until the sel list draws every one of the
// session's 452 messages or changes (with the task, or with the spawn, and
// the message after the press), or more.
func pressWhileThePageReadsOn(t *testing.T, button, sel string) context.Context {
	t.Helper()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	personWritesMany(t, gw, child, 450)
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	waitText(t, ctx, "#transcript", "note 450")
	// The idle poll reads nothing for a hidden tab.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	// The read on asks for the session's status, then waits in the
	// transcript's read.
	arrived, release := gw.holdNext(t, "/v1/tools/sessions_history")
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "after the press", "timeoutSeconds": 0})
	<-arrived
	run(t, ctx, "press "+button, chromedp.Click(chromedp.ID(button)))
	waitFor(t, ctx, "the press drawn", fmt.Sprintf(`document.querySelectorAll(%q).length === 400`, sel))
	release()
	waitText(t, ctx, "#transcript", "after the press")
	run(t, ctx, "press "+button+" again", chromedp.Click(chromedp.ID(button)))
	waitFor(t, ctx, "the second press drawn", fmt.Sprintf(`document.querySelectorAll(%q).length >= 452`, sel))
	return ctx
}

func TestEarlierMessagesAskedForWhileThePageReadsOnAreEachDrawnOnce(t *testing.T) {
	t.Parallel()
	ctx := pressWhileThePageReadsOn(t, "transcript-more", "#transcript li.message")
	if twice := drawnTwice(t, ctx, "#transcript li.message", "data-id"); len(twice) > 0 {
		t.Errorf("messages %v are drawn more than once", twice)
	}
}

func TestOlderChangesAskedForWhileThePageReadsOnAreEachDrawnOnce(t *testing.T) {
	t.Parallel()
	ctx := pressWhileThePageReadsOn(t, "timeline-more", "#timeline li.event")
	if twice := drawnTwice(t, ctx, "#timeline li.event", "data-sequence"); len(twice) > 0 {
		t.Errorf("changes %v are drawn more than once", twice)
	}
}

// drawnTwice lists the values of attr that more than one item of the sel
// list has.
func drawnTwice(t *testing.T, ctx context.Context, sel, attr string) []string {
	t.Helper()
	return eval[[]string](t, ctx, fmt.Sprintf(`(() => { const seen = new Set(), twice = [];
		for (const e of document.querySelectorAll(%q)) { const v = e.getAttribute(%q); if (seen.has(v)) twice.push(v); seen.add(v); }
		return twice; })()`, sel, attr))
}

// editGoal types a new objective into the session page's goal form, once
// the agent's goal shows, without saving it.
func editGoal(t *testing.T, ctx context.Context, objective string) {
	t.Helper()
	run(t, ctx, "edit the goal",
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.event[data-kind="goal_changed"][data-actor-type="agent"]`)),
		// Cleared as typing would clear it, so the page knows it is being edited.
		chromedp.Evaluate[chromedp.Void](`(() => { const e = document.getElementById('goal-objective');
			e.value = ''; e.dispatchEvent(new Event('input', {bubbles: true})); })()`),
		chromedp.SendKeys(chromedp.ID("goal-objective"), objective),
	)
}

func TestAGoalEditFromThePageShowsInTheTimelineWithActorHuman(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	editGoal(t, ctx, "Q3 report with the revised figures")
	run(t, ctx, "save the goal", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, `#timeline li.event[data-kind="goal_changed"][data-actor-type="human"]`,
		"human", operatorID, "goal objective changed")
	st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child})
	if st.Goal == nil || st.Goal.Objective != "Q3 report with the revised figures" {
		t.Fatalf("goal stored = %+v", st.Goal)
	}
	waitText(t, ctx, "#goal-current .objective", "Q3 report with the revised figures")
}

// An objective, or a runtime's summary of a change, with a long run of
// text and no space in it (a hash, an address) wraps within its card, not
// across the column beside it and off the page's edge.
func TestALongUnbrokenObjectiveOrSummaryStaysInsideItsCard(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set",
		"objective": "Reconcile " + strings.Repeat("0123456789abcdef", 20)})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "see the objective", chromedp.WaitVisible(chromedp.CSS("#goal-current .objective")))
	got := eval[[]float64](t, ctx, `[document.querySelector('#goal-current .objective').getBoundingClientRect().right,
		document.getElementById('goal-title').closest('.card').getBoundingClientRect().right,
		document.documentElement.scrollWidth, window.innerWidth]`)
	if got[0] > got[1] || got[2] > got[3] {
		t.Fatalf("the objective ends at %vpx, its card at %vpx; the page is %vpx wide in a %vpx window", got[0], got[1], got[2], got[3])
	}
	// So does a runtime's summary of a change in the timeline.
	const thread = "agent:main:langgraph:ticket-42"
	tool[gateway.RecordOutput](t, gw, manager, "session_record", map[string]any{"sessionKey": thread, "kind": "child_spawned",
		"parent": manager, "hostedBy": "langgraph", "summary": "spawned " + strings.Repeat("0123456789abcdef", 12)})
	run(t, ctx, "open the recorded session's page", chromedp.Navigate(gw.URL+"/"+sessionHash(thread)),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.event[data-kind="child_spawned"]`)))
	got = eval[[]float64](t, ctx, `[document.querySelector('#timeline li.event .summary').getBoundingClientRect().right,
		document.getElementById('timeline').closest('.card').getBoundingClientRect().right,
		document.documentElement.scrollWidth, window.innerWidth]`)
	if got[0] > got[1] || got[2] > got[3] {
		t.Fatalf("the summary ends at %vpx, its card at %vpx; the page is %vpx wide in a %vpx window", got[0], got[1], got[2], got[3])
	}
}

func TestAGoalClearedFromThePageShowsInTheTimelineWithActorHuman(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "clear the goal",
		chromedp.WaitVisible(chromedp.CSS(`#goal-current .objective`)),
		chromedp.Click(chromedp.ID("goal-clear")),
	)
	waitText(t, ctx, `#timeline li.event[data-kind="goal_changed"][data-actor-type="human"]`, "human", operatorID, "goal cleared")
	if st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child}); st.Goal != nil {
		t.Fatalf("goal still stored: %+v", st.Goal)
	}
}

// A goal cleared from a page that had not yet shown someone else's new
// goal is refused: the person meant to clear the goal they saw.
func TestAGoalClearedAfterSomeoneElseChangedItIsRefusedAndSaysSo(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	holdRetries(t, ctx)
	open(t, ctx, gw, sessionHash(child))
	waitText(t, ctx, "#goal-current .objective", "Q3 report")
	// The manager sets a new goal; the page's read of it fails, so the page
	// still shows the old one when the person clears it.
	gw.failNext("/v1/tools/session_status")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "edit", "objective": "the manager's objective"})
	waitFor(t, ctx, "the page to say the read failed",
		`!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes('Could not refresh')`)
	run(t, ctx, "clear the goal shown", chromedp.Click(chromedp.ID("goal-clear")))
	waitText(t, ctx, "#goal-error", "changed this session", "Nothing was saved")
	if st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child}); st.Goal == nil || st.Goal.Objective != "the manager's objective" {
		t.Fatalf("the goal the person never saw was cleared: %+v", st.Goal)
	}
}

func TestTheTimelineTellsHumanAgentAndSystemActorsApart(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "Use the revised figures.", "timeoutSeconds": 0})
	tool[gateway.CompactOutput](t, gw, "", "session_compact", map[string]any{"sessionKey": child})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "wait for the timeline", chromedp.WaitVisible(chromedp.CSS(`#timeline li.event[data-kind="compacted"]`)))
	got := eval[[]string](t, ctx, `[...document.querySelectorAll('#timeline li.event')].map(e =>
		e.dataset.kind + ' ' + e.querySelector('.badge.actor').textContent + ' ' + getComputedStyle(e).borderLeftColor)`)
	if len(got) != 4 {
		t.Fatalf("timeline = %q, want four events", got)
	}
	colors := map[string]string{}
	for _, e := range got {
		f := strings.SplitN(e, " ", 3)
		colors[f[1]] = f[2]
	}
	want := []string{"compacted system", "human_direct_message human", "child_spawned agent", "created agent"}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w+" ") {
			t.Fatalf("timeline (newest first) = %q, want kinds and actors %q", got, want)
		}
	}
	if colors["human"] == colors["agent"] || colors["agent"] == colors["system"] || colors["human"] == colors["system"] {
		t.Fatalf("actors share a colour: %v", colors)
	}
}

// ---- live ----

func TestWhenTheStreamResumesAfterAGapThePageSaysSoAndRefreshes(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the child", chromedp.WaitVisible(cursor("#graph", manager, child, ":not(.pending)")))
	// Cut every connection, the stream's included, and change the child
	// while the page is cut off.
	gw.srv.CloseClientConnections()
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "Use the revised figures.", "timeoutSeconds": 0})
	waitFor(t, ctx, "the page says the stream resumed",
		`!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes('resumed')`)
	run(t, ctx, "see the change made during the gap",
		chromedp.WaitVisible(chromedp.CSS("#live.on")),
		chromedp.WaitVisible(cursor("#graph", manager, child, ".pending")),
	)
}

// holdRetries makes the page's waits before it retries a failed read
// never end: a page that failed to read stays as it was until something
// else reads it again.
func holdRetries(t *testing.T, ctx context.Context) {
	t.Helper()
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		const setTimeoutOf = window.setTimeout;
		let held = 1e9; // the ids of timers that never fire
		window.setTimeout = function (fn, ms, ...rest) {
			if (ms >= 1000 && /\n\s*at refresh /.test(new Error().stack)) return held++;
			return setTimeoutOf.call(this, fn, ms, ...rest);
		};`}); err != nil {
		t.Fatal(err)
	}
}

// When the log stream comes back after the gateway was out of reach, the
// page reads what it missed then, as its banner says, not only once the
// wait before its next retry of a failed read is over (which grows to half
// a minute). The page's waits before a retry never end here, so only the
// stream's return can bring the change made meanwhile.
func TestWhenTheStreamComesBackThePageIsReadAgainWithoutWaitingForARetry(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	ctx := newTab(t)
	holdRetries(t, ctx)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the empty list", chromedp.WaitVisible(chromedp.ID("sessions-empty")))
	// The read of the list the spawn's signal asks for fails.
	gw.failNext("/v1/tools/sessions_list")
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	waitFor(t, ctx, "the page to say the read failed",
		`!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes('Could not refresh')`)
	gw.srv.CloseClientConnections()
	waitFor(t, ctx, "the page to say the stream resumed",
		`!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes('resumed')`)
	run(t, ctx, "see the child", chromedp.WaitVisible(row(child)))
}

// A log stream that the gateway (or a proxy before it) accepts and ends
// at once is opened again after longer and longer waits, not every half
// second forever, each time reloading the whole page.
func TestALogStreamThatEndsAsSoonAsItOpensIsOpenedAgainLessAndLessOften(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	gw.cutStreams()
	ctx := newTab(t)
	// Notes each wait the page asks for between two log streams.
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.streamWaits = [];
		const setTimeoutOf = window.setTimeout;
		window.setTimeout = function (fn, ms, ...rest) {
			if (/at sleep [^\n]*\n\s*at followLog /.test(new Error().stack)) window.streamWaits.push(ms);
			return setTimeoutOf.call(this, fn, ms, ...rest);
		};`}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "load the dashboard", chromedp.Navigate(gw.URL+"/"))
	waitFor(t, ctx, "the page to wait before its fourth stream", `window.streamWaits.length >= 4`)
	waits := eval[[]int](t, ctx, `window.streamWaits.slice(0, 4)`)
	for i := 1; i < len(waits); i++ {
		if waits[i] <= waits[i-1] {
			t.Fatalf("waits before each new stream = %v ms, want each longer than the last", waits)
		}
	}
}

// ---- screenshots ----

// artifactsDir is where screenshots go: $VIGIL_ARTIFACTS, or a fixed
// directory under the system's temporary directory, so they outlive the
// test for a person to look at.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("VIGIL_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "vigil-dashboard-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	buf, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	// The header alone: decoding whole images is slow under the race
	// detector.
	img, err := png.DecodeConfig(bytes.NewReader(buf))
	if err != nil {
		t.Fatalf("screenshot %s is not a PNG: %v", name, err)
	}
	if img.Width < 300 || img.Height < 300 {
		t.Fatalf("screenshot %s is only %dx%d", name, img.Width, img.Height)
	}
	path := filepath.Join(artifactsDir(t), name)
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

func setColorScheme(t *testing.T, ctx context.Context, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestScreenshotsOfTheSessionsViewAndASessionPage(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	writer := spawn(t, gw, manager, "Draft the Q3 report from the sales sheet.", "writer")
	spawn(t, gw, writer, "Check the revised figures against the ledger.", "checker")
	spawn(t, gw, manager, "Collect last quarter's sales sheet.", "collector")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": writer, "action": "set", "objective": "Q3 report, ready for review on Friday"})
	ctx := newTab(t)
	run(t, ctx, "laptop viewport", chromedp.EmulateViewport(1280, 720))
	setColorScheme(t, ctx, "light")
	open(t, ctx, gw, "")
	personWritesFromThePage(t, ctx, gw, writer, "Use the revised figures, not the draft. Finance sent them this morning.")
	run(t, ctx, "back to the sessions view",
		chromedp.WaitVisible(cursor("#watchers", manager, writer, ".pending")),
		chromedp.Click(chromedp.CSS(`nav a[href="#/"]`)),
		chromedp.WaitVisible(cursor("#graph", manager, writer, ".pending")),
	)
	screenshot(t, ctx, "sessions-view.png")
	setColorScheme(t, ctx, "dark")
	screenshot(t, ctx, "sessions-view-dark.png")
	setColorScheme(t, ctx, "light")
	run(t, ctx, "open the writer's page",
		chromedp.Navigate(gw.URL+"/"+sessionHash(writer)),
		chromedp.WaitVisible(cursor("#watchers", manager, writer, ".pending")),
		chromedp.WaitVisible(chromedp.CSS(`#timeline li.event[data-kind="human_direct_message"]`)),
	)
	screenshot(t, ctx, "session-page.png")
	run(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile, chromedp.EmulateScale(2)))
	screenshot(t, ctx, "session-page-phone.png")
	run(t, ctx, "sessions view on a phone",
		chromedp.Click(chromedp.CSS(`nav a[href="#/"]`)),
		chromedp.WaitVisible(row(writer)),
	)
	screenshot(t, ctx, "sessions-view-phone.png")
	// A phone shows the table as cards: no cell is wider than the screen.
	if wide := eval[bool](t, ctx, `document.documentElement.scrollWidth > window.innerWidth + 1`); wide {
		t.Error("the sessions view scrolls sideways on a phone")
	}
}

// ---- accessibility ----

func TestEveryControlHasAnAccessibleName(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "wait for the session page", chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)))
	unnamed := eval[[]string](t, ctx, `[...document.querySelectorAll('input, select, textarea, button')].filter(el => {
		const labelled = el.labels && [...el.labels].some(l => l.textContent.trim() !== '');
		return !labelled && !(el.getAttribute('aria-label') || '').trim() && !(el.textContent || '').trim();
	}).map(el => el.outerHTML)`)
	if len(unnamed) > 0 {
		t.Fatalf("controls without a name: %q", unnamed)
	}
}

// The skip link takes the keyboard past the header to the page's content:
// on a session page, to that page's content, not to the sessions list.
func TestTheSkipLinkMovesTheFocusToTheContentOfTheSamePage(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "see the session page, then follow the skip link",
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)),
		chromedp.Focus(chromedp.CSS("a.skip")),
		chromedp.KeyEvent("\r"),
	)
	waitFor(t, ctx, "the focus to leave the skip link", `document.activeElement !== document.querySelector('a.skip')`)
	got := eval[[]string](t, ctx, `[location.hash, String(document.getElementById('view-session').hidden),
		String(document.getElementById('main').contains(document.activeElement))]`)
	if want := []string{sessionHash(child), "false", "true"}; !slices.Equal(got, want) {
		t.Fatalf("after the skip link, address, session page hidden, focus in the content = %q, want %q", got, want)
	}
}

func TestTheWatchGraphNamesLabelledSessionsAndTimesShowTheirDate(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#graph", "writer", child)
	waitFor(t, ctx, "a time with its date", `[...document.querySelectorAll('#sessions-body time')].length > 0 && `+
		`[...document.querySelectorAll('#sessions-body time')].every(e => /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/.test(e.textContent))`)
}

// A part of the page that failed to load is read again: the watch graph
// shows once the gateway answers, and the error banner goes.
func TestAPartThatFailedToLoadIsReadAgain(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	gw.failNext("/v1/tools/sessions_graph")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#graph", "writer", child)
	waitFor(t, ctx, "the error banner to go", `document.getElementById('banner').hidden`)
}

// The watch graph names a session by its label even when the graph
// arrived before the list of sessions that carries the labels.
func TestTheWatchGraphNamesLabelledSessionsThatArriveAfterIt(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	gw.failNext("/v1/tools/sessions_list") // the graph is drawn first
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#graph", "writer", child)
}

func TestAGoalSavedAfterSomeoneElseChangedTheSessionIsRefusedAndSaysSo(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	editGoal(t, ctx, "the person's objective")
	// Meanwhile the manager changes the goal behind the person's back.
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "edit", "objective": "the manager's objective"})
	// The page hears of it (its timeline shows the edit) while the form
	// keeps the person's text; saving must still be refused.
	waitText(t, ctx, "#timeline", "goal objective changed")
	run(t, ctx, "save", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, "#goal-error", "changed this session while you were editing", "Nothing was saved")
	st := tool[gateway.StatusOutput](t, gw, "", "session_status", map[string]any{"sessionKey": child})
	if st.Goal == nil || st.Goal.Objective != "the manager's objective" {
		t.Fatalf("the stale edit overwrote the goal: %+v", st.Goal)
	}
}

// A burst of changes to one session among many re-reads that session's
// row, not every page of the sessions list: with thousands of sessions,
// each change would otherwise cost a request per 200 of them.
func TestABurstOfChangesToOneSessionRereadsItsRowNotTheWholeList(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	const sessions = 450 // three pages of the list
	for i := range sessions {
		tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": fmt.Sprintf("agent:main:rt:s%04d", i),
			"kind": "child_spawned", "parent": manager, "hostedBy": "rt"})
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#sessions-count", fmt.Sprintf("(%d)", sessions+1))
	// The idle poll, which reads the whole list now and then, reads
	// nothing for a hidden tab: only the changes make the page read.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	const changed = "agent:main:rt:s0123"
	var last gateway.RecordOutput
	for range 20 {
		last = tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": changed, "kind": "goal_changed"})
	}
	waitFor(t, ctx, "the changed session's row at its last version",
		fmt.Sprintf(`document.querySelector('tr.session[data-key=%q] td[data-label=Version]')?.textContent === '%d'`, changed, last.StateVersion))
	lists := gw.Count(before, "POST /v1/tools/sessions_list")
	if lists != 0 {
		t.Errorf("20 changes to one session made the page read %d pages of the sessions list", lists)
	}
}

// A session page left while it still loads a long transcript stops
// loading it: the next page's reads do not queue behind the rest of a
// transcript no one will see.
func TestASessionPageLeftWhileLoadingReadsNoMoreOfItsTranscript(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	for i := 1; i <= 250; i++ { // with the task, two pages of transcript
		tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": fmt.Sprintf("note %d", i), "timeoutSeconds": 0})
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	// The idle poll reads nothing for a hidden tab: only the pages opened
	// make the page read.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	arrived, release := gw.holdNext(t, "/v1/tools/sessions_history")
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, sessionHash(child)))
	<-arrived
	eval[string](t, ctx, fmt.Sprintf(`location.hash = %q`, sessionHash(manager)))
	release()
	waitFor(t, ctx, "the manager's page", `document.querySelectorAll('#s-facts dd').length > 0`)
	histories := gw.Count(before, "POST /v1/tools/sessions_history")
	if histories != 2 { // the child's first page, and the manager's
		t.Errorf("the page read %d pages of transcripts, want 2: the child's first and the manager's", histories)
	}
}

// When the log stream resumes, the open session page reads what it missed
// from where it stood, not its whole transcript again: a proxy that ends
// streams every minute would otherwise have a long transcript read every
// minute.
func TestWhenTheStreamResumesTheSessionPageReadsOnlyWhatItMissed(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	const sends = 450 // with the task, three pages of transcript
	for i := 1; i <= sends; i++ {
		tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": fmt.Sprintf("note %d", i), "timeoutSeconds": 0})
	}
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	waitText(t, ctx, "#transcript", fmt.Sprintf("note %d", sends))
	// The idle poll reads nothing for a hidden tab.
	eval[bool](t, ctx, `Object.defineProperty(document, 'visibilityState', {get: () => 'hidden'}) && true`)
	before := len(gw.Requests())
	gw.srv.CloseClientConnections()
	waitFor(t, ctx, "the page says the stream resumed",
		`!document.getElementById('banner').hidden && document.getElementById('banner-text').textContent.includes('resumed')`)
	// The page's reads run one after another: once this message shows,
	// the read that the resumption asked for is done.
	tool[gateway.SendOutput](t, gw, "", "sessions_send", map[string]any{"sessionKey": child, "message": "after the cut", "timeoutSeconds": 0})
	waitText(t, ctx, "#transcript", "after the cut")
	histories := gw.Count(before, "POST /v1/tools/sessions_history")
	if histories > 2 {
		t.Errorf("after the stream resumed the page read %d pages of the transcript, want at most 2 (the resumption's, the new message's)", histories)
	}
}

// A session created among many takes its place in the list, in the list's
// order, from its own row's read.
func TestASessionCreatedAmongManyTakesItsPlaceInTheList(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, false)
	const sessions = 450
	for i := range sessions {
		tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": fmt.Sprintf("agent:main:rt:s%04d", 2*i),
			"kind": "child_spawned", "parent": manager, "hostedBy": "rt"})
	}
	ctx := newTab(t)
	open(t, ctx, gw, "")
	waitText(t, ctx, "#sessions-count", fmt.Sprintf("(%d)", sessions+1))
	tool[gateway.RecordOutput](t, gw, "", "session_record", map[string]any{"sessionKey": "agent:main:rt:s0101",
		"kind": "child_spawned", "parent": manager, "hostedBy": "rt"})
	waitText(t, ctx, "#sessions-count", fmt.Sprintf("(%d)", sessions+2))
	if next := eval[string](t, ctx, `document.querySelector('tr.session[data-key="agent:main:rt:s0100"]').nextElementSibling.dataset.key`); next != "agent:main:rt:s0101" {
		t.Errorf("the row after agent:main:rt:s0100 is %q, want the new agent:main:rt:s0101", next)
	}
}

// A goal refused because someone changed the session keeps the person's
// text in the form: saving it again, now that the page has shown them the
// other change, saves it.
func TestAGoalRefusedForAConflictIsSavedWhenSavedAgain(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	editGoal(t, ctx, "the person's objective")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "edit", "objective": "the manager's objective"})
	waitText(t, ctx, "#timeline", "goal objective changed")
	// The timeline drawn now is drawn again once the refused save has read
	// the session again.
	run(t, ctx, "mark the timeline drawn", chromedp.Evaluate[chromedp.Void](
		`document.querySelectorAll('#timeline li').forEach(e => e.dataset.drawn = 'before')`))
	run(t, ctx, "save", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, "#goal-error", "Nothing was saved")
	waitFor(t, ctx, "the page to read the session again", `!document.querySelector('#timeline li[data-drawn]')`)
	run(t, ctx, "save again", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, "#goal-current .objective", "the person's objective")
}

// A message sent from the keyboard leaves the focus on the form it was
// sent from, so the next message can be written without finding the form
// again.
func TestAMessageSentFromTheKeyboardKeepsTheFocusInTheForm(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "write a message and press Send with the keyboard",
		chromedp.WaitVisible(chromedp.ID("send-message")),
		chromedp.SendKeys(chromedp.ID("send-message"), "Use the revised figures."),
		chromedp.Focus(chromedp.ID("send-button")),
		chromedp.KeyEvent("\r"),
	)
	waitText(t, ctx, "#transcript", "Use the revised figures.")
	waitFor(t, ctx, "the send button to be enabled again", `!document.getElementById('send-button').disabled`)
	if got := eval[string](t, ctx, `document.activeElement.id`); got != "send-button" && got != "send-message" {
		t.Fatalf("after sending, the focus is on %q, not in the send form", got)
	}
}

// Signing out forgets the agent chosen in the filter too: whoever signs in
// next sees every session their token reaches, and not the name of an
// agent only the last token could see.
func TestSigningOutForgetsTheAgentFilter(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	spawn(t, gw, manager, "Draft the Q3 report", "writer")
	opsChild := spawn(t, gw, "agent:ops:main", "Rotate the logs", "rotator")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "filter by agent ops, then sign out and in with the main agent's token",
		chromedp.WaitVisible(row(opsChild)),
		chromedp.SetValue(chromedp.ID("agent-filter"), "ops"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById('agent-filter').dispatchEvent(new Event('change'))`),
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("login")),
		chromedp.SendKeys(chromedp.ID("token"), managerToken),
		chromedp.Click(chromedp.CSS("#login-form button[type=submit]")),
	)
	waitFor(t, ctx, "the list to load", `!!document.querySelector('#agent-filter option[value="main"]')`)
	got := eval[[]string](t, ctx, `[document.getElementById('agent-filter').value,
		...[...document.querySelectorAll('#agent-filter option')].map(o => o.value)]`)
	if want := []string{"", "", "main"}; !slices.Equal(got, want) {
		t.Fatalf("agent filter chosen, then offered = %q, want %q", got, want)
	}
}

// A goal whose objective and status are saved in two writes, the second
// of which failed, is saved whole when saved again: the first write was
// the person's own, no change behind their back.
func TestAGoalHalfSavedIsSavedWholeWhenSavedAgain(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	editGoal(t, ctx, "Q3 report with the revised figures")
	run(t, ctx, "pause the goal", chromedp.Evaluate[chromedp.Void](`(() => { const e = document.getElementById('goal-status');
		e.value = 'paused'; e.dispatchEvent(new Event('input', {bubbles: true})); })()`))
	// The objective is written; the status write after it fails.
	arrived, release := gw.holdNext(t, "/v1/tools/session_goal")
	run(t, ctx, "save", chromedp.Click(chromedp.ID("goal-save")))
	<-arrived
	gw.failNext("/v1/tools/session_goal")
	release()
	waitText(t, ctx, "#goal-error", "the disk blipped")
	run(t, ctx, "save again", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, "#goal-current", "paused", "Q3 report with the revised figures")
	if text := eval[string](t, ctx, `document.getElementById('goal-error').hidden ? '' : document.getElementById('goal-error').textContent`); text != "" {
		t.Fatalf("saving again says %q", text)
	}
}

// Ctrl+Enter pressed again while a message is being sent does not send it
// a second time.
func TestAMessageSubmittedTwiceFromTheKeyboardIsSentOnce(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	arrived, release := gw.holdNext(t, "/v1/tools/sessions_send")
	run(t, ctx, "write a message and send it with Ctrl+Enter",
		chromedp.WaitVisible(chromedp.ID("send-message")),
		chromedp.SendKeys(chromedp.ID("send-message"), "Use the revised figures."),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	<-arrived
	run(t, ctx, "press Ctrl+Enter again while it is sent", chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	release()
	waitText(t, ctx, "#transcript", "Use the revised figures.")
	waitFor(t, ctx, "the form to be emptied", `document.getElementById('send-message').value === ''`)
	sends := gw.Count(0, "POST /v1/tools/sessions_send")
	if sends != 1 {
		t.Fatalf("the message was sent %d times", sends)
	}
}

// A goal cleared from the keyboard leaves the focus in the goal form,
// though the Clear goal button, with no goal left to clear, is disabled.
func TestAGoalClearedFromTheKeyboardKeepsTheFocusInTheGoalForm(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "press Clear goal with the keyboard",
		chromedp.WaitVisible(chromedp.CSS(`#goal-current .objective`)),
		chromedp.Focus(chromedp.ID("goal-clear")),
		chromedp.KeyEvent("\r"),
	)
	waitFor(t, ctx, "the page to show no goal", `document.getElementById('goal-clear').disabled && !document.querySelector('#goal-current .objective')`)
	if in := eval[bool](t, ctx, `document.getElementById('goal-form').contains(document.activeElement)`); !in {
		t.Fatalf("after clearing the goal, the focus is on %q, not in the goal form", eval[string](t, ctx, `document.activeElement.tagName`))
	}
}

// Signing out while a message is being sent shows nothing of the session
// it was sent to: the send was cut off by the person's own sign-out.
func TestSigningOutWhileAMessageIsSentShowsNothingOfIt(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	arrived, _ := gw.holdNext(t, "/v1/tools/sessions_send")
	run(t, ctx, "write a message and send it",
		chromedp.WaitVisible(chromedp.ID("send-message")),
		chromedp.SendKeys(chromedp.ID("send-message"), "Use the revised figures."),
		chromedp.Click(chromedp.ID("send-button")),
	)
	<-arrived
	run(t, ctx, "sign out while it is sent", chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("login")))
	// The aborted send is settled once its button is enabled again.
	waitFor(t, ctx, "the send to end", `!document.getElementById('send-button').disabled`)
	if body := eval[string](t, ctx, `document.body.innerText`); strings.Contains(body, child) {
		t.Fatalf("after signing out the page shows %s: %q", child, body)
	}
}

// When the log stream resumes after changes it missed were pruned, the
// page keeps saying so once it follows the log afresh: the stream opened
// again after the gap is no interruption to tell of instead.
func TestAfterAHistoryGapThePageKeepsSayingChangesWerePruned(t *testing.T) {
	t.Parallel()
	gw := startGatewayOn(t, false, vigil.Options{MaxEvents: 300})
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, "")
	run(t, ctx, "wait for the child", chromedp.WaitVisible(row(child)))
	// The stream is cut, and while the page waits to resume it more
	// changes are made than retention keeps.
	arrived, release := gw.holdNext(t, "/v1/events")
	gw.srv.CloseClientConnections()
	<-arrived
	personWritesMany(t, gw, child, 400)
	if _, err := gw.engine.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	release()
	// The page is told of the gap and, its stream ended by it, begins the
	// log afresh.
	waitText(t, ctx, "#banner-text", "pruned")
	run(t, ctx, "wait for the stream begun afresh", chromedp.WaitVisible(chromedp.CSS("#live.on")))
	if text := eval[string](t, ctx, `document.getElementById('banner-text').textContent`); !strings.Contains(text, "pruned") {
		t.Fatalf("once the stream is begun afresh, the banner says %q", text)
	}
}

// A goal save that fails once the person has gone on to another session's
// page is told of in the banner, naming its session, and not as an error
// of the goal the page now shows.
func TestAGoalSaveFailedAfterThePersonMovedOnIsToldOfTheSessionItWasFor(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	other := spawn(t, gw, manager, "Collect the sales sheet", "collector")
	tool[gateway.GoalOutput](t, gw, manager, "session_goal", map[string]any{"sessionKey": child, "action": "set", "objective": "Q3 report"})
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	editGoal(t, ctx, "Q3 report with the revised figures")
	gw.failNext("/v1/tools/session_goal")
	arrived, release := gw.holdNext(t, "/v1/tools/session_goal")
	run(t, ctx, "save the goal", chromedp.Click(chromedp.ID("goal-save")))
	<-arrived
	run(t, ctx, "go on to the other session",
		chromedp.Navigate(gw.URL+"/"+sessionHash(other)),
		chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)),
	)
	release()
	waitText(t, ctx, "#banner-text", child, "the disk blipped")
	if shown := eval[bool](t, ctx, `!document.getElementById('goal-error').hidden`); shown {
		t.Fatalf("the other session's page shows a goal error: %q", eval[string](t, ctx, `document.getElementById('goal-error').textContent`))
	}
}

// A read that succeeds after failing takes down the banner of its failure,
// not one shown since about something else: here, that a message sent
// from a page the person has left was not sent.
func TestARefreshThatRecoversLeavesALaterBannerUp(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	other := spawn(t, gw, manager, "Collect the sales sheet", "collector")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "see the child's page", chromedp.WaitVisible(chromedp.CSS(`#transcript li.message`)))
	// A read of the watch graph fails, and its retry waits.
	gw.failNext("/v1/tools/sessions_graph")
	third := spawn(t, gw, manager, "Check the totals", "checker")
	waitText(t, ctx, "#banner-text", "Could not refresh")
	retried, releaseRetry := gw.holdNext(t, "/v1/tools/sessions_graph")
	<-retried
	// Meanwhile a message sent from the child's page fails once the person
	// has gone on to another session.
	gw.failNext("/v1/tools/sessions_send")
	sent, releaseSend := gw.holdNext(t, "/v1/tools/sessions_send")
	run(t, ctx, "send into the child", chromedp.SendKeys(chromedp.ID("send-message"), "Use the revised figures."),
		chromedp.Click(chromedp.ID("send-button")))
	<-sent
	run(t, ctx, "go on to the other session", chromedp.Navigate(gw.URL+"/"+sessionHash(other)))
	waitText(t, ctx, "#s-title", other)
	releaseSend()
	waitText(t, ctx, "#banner-text", "was not sent")
	releaseRetry()
	waitFor(t, ctx, "the retried read to be drawn",
		fmt.Sprintf(`!!document.querySelector('#graph li.cursor[data-target=%q]') && !!document.querySelector('#sessions-body tr.session[data-key=%q]')`, third, third))
	if text := eval[string](t, ctx, `document.getElementById('banner').hidden ? '(hidden)' : document.getElementById('banner-text').textContent`); !strings.Contains(text, "was not sent") {
		t.Fatalf("once the read recovered, the banner shows %q", text)
	}
}

// A message pasted longer than the gateway takes is refused whole, saying
// why, rather than cut short without a word and sent.
func TestAMessageTooLongIsRefusedNotCutShort(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "put the cursor in the message", chromedp.WaitVisible(chromedp.ID("send-message")), chromedp.Focus(chromedp.ID("send-message")))
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: strings.Repeat("a", gateway.MaxMessageBytes+10)}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "send it", chromedp.Click(chromedp.ID("send-button")))
	waitText(t, ctx, "#send-error", "bytes, more than")
	if n := eval[int](t, ctx, `document.getElementById('send-message').value.length`); n != gateway.MaxMessageBytes+10 {
		t.Fatalf("the form holds %d characters of the %d pasted", n, gateway.MaxMessageBytes+10)
	}
}

// An objective pasted longer than the gateway takes is refused whole,
// saying why, rather than cut short without a word and saved.
func TestAnObjectiveTooLongIsRefusedNotCutShort(t *testing.T) {
	t.Parallel()
	gw := startGateway(t, true)
	child := spawn(t, gw, manager, "Draft the Q3 report", "writer")
	ctx := newTab(t)
	open(t, ctx, gw, sessionHash(child))
	run(t, ctx, "put the cursor in the objective", chromedp.WaitVisible(chromedp.ID("goal-objective")), chromedp.Focus(chromedp.ID("goal-objective")))
	if _, err := chromedp.Call(ctx, input.InsertText, input.InsertTextParams{Text: strings.Repeat("a", gateway.MaxObjectiveBytes+10)}); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, "save it", chromedp.Click(chromedp.ID("goal-save")))
	waitText(t, ctx, "#goal-error", "bytes, more than")
}
