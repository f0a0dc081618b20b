package gateway_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

type decodeTarget struct {
	SessionKey   string          `json:"sessionKey"`
	ChangesSince *int64          `json:"changesSince,omitempty"`
	Watch        bool            `json:"watch,omitempty"`
	Payload      json.RawMessage `json:"payload,omitempty"`
	Labels       []string        `json:"labels,omitempty"`
}

func TestDecodeStrictRefusesInputThatOnlyLooksValid(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"invalid UTF-8 in a string field", "{\"sessionKey\": \"agent:main:\xff\"}", []string{"field sessionKey", "UTF-8"}},
		{"invalid UTF-8 inside a payload", "{\"payload\": {\"note\": \"\xc3\"}}", []string{"payload", "UTF-8"}},
		{"a lone surrogate escaped in a string field", `{"sessionKey": "agent:main:\udcff"}`, []string{"field sessionKey", "not valid Unicode", "surrogate"}},
		{"a lone surrogate escaped inside a payload", `{"payload": {"note": "a\ud800b"}}`, []string{"field payload.note", "not valid Unicode"}},
		{"an unknown escape in a string field", `{"sessionKey": "agent:main:\x41"}`, []string{"field sessionKey", "escape sequence"}},
		{"a name in another case", `{"SESSIONKEY": "agent:main:main"}`, []string{`unknown field "SESSIONKEY"`, `"sessionKey"`}},
		{"a name given twice", `{"sessionKey": "agent:main:a", "sessionKey": "agent:main:b"}`, []string{"field sessionKey", "more than once"}},
		{"a name given twice inside a payload", `{"payload": {"a": 1, "a": 2}}`, []string{"field payload.a", "more than once"}},
		{"an unknown field", `{"since": 3}`, []string{`unknown field "since"`}},
		{"a fraction for an integer", `{"changesSince": 2.5}`, []string{"field changesSince: expected an integer, got number 2.5"}},
		{"a number for a string", `{"sessionKey": 7}`, []string{"field sessionKey: expected a string, got number"}},
		{"a list for a string", `{"sessionKey": ["x"]}`, []string{"field sessionKey: expected a string, got array"}},
		{"a string for a bool", `{"watch": "yes"}`, []string{"field watch: expected true or false, got string"}},
		{"truncated", `{"sessionKey": "agent:main:main"`, []string{"truncated JSON"}},
		{"truncated string", `{"sessionKey": "agent:ma`, []string{"truncated JSON"}},
		{"malformed", `{"sessionKey": agent:main:main}`, []string{"malformed JSON at byte"}},
		{"trailing comma", `{"sessionKey": "x",}`, []string{"malformed JSON"}},
		{"an array", `[{"sessionKey": "x"}]`, []string{"must be a JSON object, not array"}},
		{"a string", `"agent:main:main"`, []string{"must be a JSON object, not string"}},
		{"trailing data", `{} {}`, []string{"after the JSON object"}},
		{"empty", "", []string{"must be a JSON object, not empty"}},
		{"only white space", " \n\t", []string{"must be a JSON object, not empty"}},
		{"null", "null", []string{"must be a JSON object, not null"}},
		{"null among white space", " null\n", []string{"must be a JSON object, not null"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var v decodeTarget
			err := gateway.DecodeStrict([]byte(c.body), &v)
			if err == nil {
				t.Fatalf("accepted %q as %+v", c.body, v)
			}
			if !errors.Is(err, gateway.ErrInvalid) {
				t.Errorf("error %v does not wrap ErrInvalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestDecodeStrictAcceptsWhatIsValid(t *testing.T) {
	var v decodeTarget
	body := `{"sessionKey": "agent:main:caf\u00e9 ✓", "changesSince": 3, "watch": true, "payload": {"a": [1, {"b": null}]}, "labels": []}`
	if err := gateway.DecodeStrict([]byte(body), &v); err != nil {
		t.Fatal(err)
	}
	if v.SessionKey != "agent:main:café ✓" || v.ChangesSince == nil || *v.ChangesSince != 3 || !v.Watch ||
		string(v.Payload) != `{"a": [1, {"b": null}]}` {
		t.Errorf("decoded %+v", v)
	}
	var empty decodeTarget
	if err := gateway.DecodeStrict([]byte(" {} "), &empty); err != nil {
		t.Errorf("the empty object: %v", err)
	}
}

// A tool whose fields are all optional still takes an object: a body that
// is empty or null is a caller's mistake (a client that lost its input, or
// serialized a missing one), answered as such rather than taken for {}.
func TestAToolGivenNothingOrNullIsRefusedEvenWhenItNeedsNoField(t *testing.T) {
	g, _ := newGateway(t)
	c := caller(t, g, person, "")
	list, _ := g.Tools().Get("sessions_list")
	for _, body := range []string{"", "null"} {
		if _, err := list.Call(ctx, c, []byte(body)); !errors.Is(err, gateway.ErrInvalid) {
			t.Errorf("sessions_list given %q: %v, want an invalid-argument error", body, err)
		}
	}
	if _, err := list.Call(ctx, c, []byte("{}")); err != nil {
		t.Errorf("sessions_list given {}: %v", err)
	}
}
