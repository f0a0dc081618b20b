package a2aserver_test

import (
	"encoding/base64"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/webhook"
)

// pushFields are a push config's fields as a caller sets them, each as
// long as the test says; the rest are the shortest that are valid.
type pushFields struct {
	id, url, token, scheme, credentials string
}

// pushAtLimits is a valid config whose every field is as long as its
// limit allows, its URL on hook.
func pushAtLimits(hook string) pushFields {
	return pushFields{
		id:          strings.Repeat("i", gateway.MaxPushIDBytes),
		url:         hook + "/" + strings.Repeat("p", gateway.MaxPushURLBytes-len(hook)-1),
		token:       strings.Repeat("t", gateway.MaxPushTokenBytes),
		scheme:      strings.Repeat("S", gateway.MaxPushAuthSchemeBytes),
		credentials: strings.Repeat("c", gateway.MaxPushAuthCredentialsBytes),
	}
}

func (f pushFields) body10(task string) string {
	return `{"taskId":` + quote(task) + `,"id":` + quote(f.id) + `,"url":` + quote(f.url) + `,"token":` + quote(f.token) +
		`,"authentication":{"scheme":` + quote(f.scheme) + `,"credentials":` + quote(f.credentials) + `}}`
}

func (f pushFields) body03(task string) string {
	return `{"jsonrpc":"2.0","id":7,"method":"tasks/pushNotificationConfig/set","params":{"taskId":` + quote(task) +
		`,"pushNotificationConfig":{"id":` + quote(f.id) + `,"url":` + quote(f.url) + `,"token":` + quote(f.token) +
		`,"authentication":{"schemes":[` + quote(f.scheme) + `],"credentials":` + quote(f.credentials) + `}}}}`
}

func storedPushConfigs(t *testing.T, s *server) []sessions.PushConfig {
	t.Helper()
	cfgs, err := s.Store.PushConfigs(guarded(t), sessions.PushFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return cfgs
}

func TestAPushConfigWithEveryFieldAtItsLimitIsKept(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	hook, _ := receiver(t, "unused", "")
	f := pushAtLimits(hook.URL)
	as10(t, s, tokAdmin, "").must("CreateTaskPushNotificationConfig", f.body10(child), nil)
	f.id = strings.Repeat("j", gateway.MaxPushIDBytes)
	if _, a := post(t, s, tokAdmin, "", f.body03(child)); a.Error != nil {
		t.Fatalf("0.3: a config with every field at its limit: %+v", a.Error)
	}
	if n := len(storedPushConfigs(t, s)); n != 2 {
		t.Fatalf("%d configs stored, want 2", n)
	}
}

// A field one byte over its limit is refused in either revision, naming
// the field and the limit, and the config it would replace is kept as it
// was.
func TestAPushConfigFieldOverItsLimitIsRefusedNamingItAndStoresNothing(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	admin := as10(t, s, tokAdmin, "")
	hook, _ := receiver(t, "unused", "")
	ok := pushAtLimits(hook.URL)
	ok.id = "kept"
	admin.must("CreateTaskPushNotificationConfig", ok.body10(child), nil)
	before := storedPushConfigs(t, s)
	for _, c := range []struct {
		field string
		limit int
		grow  func(*pushFields)
	}{
		{"id", gateway.MaxPushIDBytes, func(f *pushFields) { f.id = strings.Repeat("i", gateway.MaxPushIDBytes+1) }},
		{"url", gateway.MaxPushURLBytes, func(f *pushFields) { f.url += "x" }},
		{"token", gateway.MaxPushTokenBytes, func(f *pushFields) { f.token += "x" }},
		{"scheme", gateway.MaxPushAuthSchemeBytes, func(f *pushFields) { f.scheme += "x" }},
		{"credentials", gateway.MaxPushAuthCredentialsBytes, func(f *pushFields) { f.credentials += "x" }},
	} {
		f := ok
		c.grow(&f)
		limit := fmt.Sprint(c.limit)
		if _, e := admin.call("CreateTaskPushNotificationConfig", f.body10(child)); e == nil || e.Code != -32602 ||
			!strings.Contains(e.Message, c.field) || !strings.Contains(e.Message, limit) {
			t.Errorf("1.0: %s one byte over its limit: %v, want -32602 naming %s and %s", c.field, e, c.field, limit)
		}
		_, a := post(t, s, tokAdmin, "", f.body03(child))
		if a.Error == nil || a.Error.Code != -32602 || !strings.Contains(a.Error.Data["error"], c.field) ||
			!strings.Contains(a.Error.Data["error"], limit) {
			t.Errorf("0.3: %s one byte over its limit: %+v, want -32602 naming %s and %s", c.field, a.Error, c.field, limit)
		}
		if after := storedPushConfigs(t, s); !reflect.DeepEqual(after, before) {
			t.Fatalf("a refused %s changed the stored configs (%d stored, %d before)", c.field, len(after), len(before))
		}
	}
}

// A receiver's answer is read for its status: one whose headers run past
// webhook.MaxResponseHeaderBytes fails the delivery rather than being held
// in memory, by every delivery at once, up to the transport's 10 MB.
func TestAPushReceiverAnsweringWithHeadersOverTheBoundFailsTheDelivery(t *testing.T) {
	t.Parallel()
	logs := make(logLines, 256)
	s := startLogging(t, filepath.Join(t.TempDir(), "vigil.db"), slog.New(slog.NewTextHandler(logs, nil)))
	ctx := guarded(t)
	bloated := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Padding", strings.Repeat("h", 2*webhook.MaxResponseHeaderBytes))
		w.WriteHeader(http.StatusBadRequest)
	}))
	defer bloated.Close()
	child := spawn10(as10(t, s, tokMain, manager))
	as10(t, s, tokAdmin, "").must("CreateTaskPushNotificationConfig", `{"taskId":`+quote(child)+`,"id":"bloated","url":`+
		quote(bloated.URL)+`,"token":"a-push-secret-of-some-length"}`, nil)
	as10(t, s, tokOperator, "").must("SendMessage", send10(child, "a person writes", ""), nil)
	for {
		select {
		case line := <-logs:
			if !strings.Contains(line, "a2a push notification not delivered") {
				continue
			}
			if !strings.Contains(line, "bloated") || !strings.Contains(line, "header") {
				t.Fatalf("the delivery is logged as %q; want it failed on the answer's headers", line)
			}
			return
		case <-ctx.Done():
			t.Fatal("no failed delivery was logged (hang guard)")
		}
	}
}

// A push URL with a port but no hostname would have vigil connect to the
// machine it runs on: it is refused in either revision, naming the url,
// as a webhook's is, and nothing is stored.
func TestAPushConfigWhoseURLHasNoHostnameIsRefusedNamingTheURL(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	f := pushFields{id: "local", url: "http://:8080/hook", token: "a-push-secret-of-some-length", scheme: "Bearer", credentials: "c"}
	if _, e := as10(t, s, tokAdmin, "").call("CreateTaskPushNotificationConfig", f.body10(child)); e == nil || e.Code != -32602 ||
		!strings.Contains(e.Message, "url") || !strings.Contains(e.Message, "host") {
		t.Errorf("1.0: a URL without a hostname: %v, want -32602 naming the url and its host", e)
	}
	if _, a := post(t, s, tokAdmin, "", f.body03(child)); a.Error == nil || a.Error.Code != -32602 ||
		!strings.Contains(a.Error.Data["error"], "url") || !strings.Contains(a.Error.Data["error"], "host") {
		t.Errorf("0.3: a URL without a hostname: %+v, want -32602 naming the url and its host", a.Error)
	}
	if cfgs := storedPushConfigs(t, s); len(cfgs) != 0 {
		t.Fatalf("%d configs stored, want none", len(cfgs))
	}
}

// A push token is a signing secret as a webhook's is: a "whsec_" secret
// must encode a key of at least webhook.MinStandardKeyLen bytes, though
// its text is longer than webhook.MinSecretLen. It is refused in either
// revision, naming the token, and nothing is stored.
func TestAPushTokenThatEncodesAShortKeyIsRefusedAsAWebhookSecretIs(t *testing.T) {
	s := start(t)
	child := spawn10(as10(t, s, tokMain, manager))
	short := webhook.StandardSecretPrefix + base64.StdEncoding.EncodeToString([]byte("nine-byte"))
	f := pushFields{id: "weak", url: "http://127.0.0.1:1/hook", token: short, scheme: "Bearer", credentials: "c"}
	if _, e := as10(t, s, tokAdmin, "").call("CreateTaskPushNotificationConfig", f.body10(child)); e == nil || e.Code != -32602 ||
		!strings.Contains(e.Message, "token") {
		t.Errorf("1.0: a whsec_ token of a 9-byte key: %v, want -32602 naming the token", e)
	}
	if _, a := post(t, s, tokAdmin, "", f.body03(child)); a.Error == nil || a.Error.Code != -32602 ||
		!strings.Contains(a.Error.Data["error"], "token") {
		t.Errorf("0.3: a whsec_ token of a 9-byte key: %+v, want -32602 naming the token", a.Error)
	}
	if cfgs := storedPushConfigs(t, s); len(cfgs) != 0 {
		t.Fatalf("%d configs stored, want none", len(cfgs))
	}
}
