package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// spellingsOf are ways of writing key that name the same session, which a
// check comparing strings could miss: other case, and surrounding white
// space, ASCII and not.
func spellingsOf(key string) []string {
	return []string{
		key,
		strings.ToUpper(key),
		"  " + strings.ToUpper(key[:1]) + key[1:] + " ",
		"\u00a0" + key + "\u00a0",
	}
}

// Every spelling of another agent's session (its main one and a sub-agent
// it spawned), on every tool, as the acting session (header and ?as=),
// and on every route with a key in its path (percent-encoded once and
// twice, with dot segments) or its query, is refused and stores nothing.
func TestAnotherAgentsSessionIsRefusedHoweverItsKeyIsSpelledOnEveryRoute(t *testing.T) {
	s := e2eStart(t)
	e2eOpsWithGoal(t, s)
	child := e2eDo[gateway.SpawnOutput](t, s, e2eOps, e2eOpsMain, "sessions_spawn", map[string]any{"task": "ops work"})
	before := e2eSnapshot(t, s)
	for _, target := range []string{e2eOpsMain, child.ChildSessionKey} {
		for _, key := range spellingsOf(target) {
			for _, c := range []struct {
				tool string
				in   map[string]any
			}{
				{"session_status", map[string]any{"sessionKey": key, "changesSince": 0}},
				{"sessions_history", map[string]any{"sessionKey": key}},
				{"session_pending", map[string]any{"sessionKey": key}},
				{"session_goal", map[string]any{"sessionKey": key, "action": "set", "objective": "mine"}},
				{"sessions_send", map[string]any{"sessionKey": key, "message": "hi", "timeoutSeconds": 0}},
				{"session_delete", map[string]any{"sessionKey": key}},
				{"session_reset", map[string]any{"sessionKey": key}},
				{"session_turn", map[string]any{"sessionKey": key, "waitSeconds": 0}},
				{"session_reply", map[string]any{"sessionKey": key, "text": "as ops"}},
				{"session_compact", map[string]any{"sessionKey": key, "summary": "gone"}},
				{"session_record", map[string]any{"sessionKey": key, "kind": "compacted"}},
				// The agent's own key given with another agent's id.
				{"session_status", map[string]any{"sessionKey": key, "agentId": "main"}},
			} {
				code, body := e2eCall(t, s, e2eMain, e2eManager, c.tool, c.in)
				if code != http.StatusForbidden && code != http.StatusBadRequest {
					t.Errorf("%s on %q: %d %s, want a refusal", c.tool, key, code, body)
				}
			}
			// Acting as it, by header and by query parameter.
			for _, path := range []string{"/v1/tools/session_wait", "/v1/tools/session_wait?as=" + url.QueryEscape(key)} {
				header := key
				if strings.Contains(path, "?") {
					header = ""
				}
				code, body := e2eRequest(t, s, http.MethodPost, path, "Bearer "+e2eMain, header, []byte(`{"timeoutSeconds":0}`))
				if code != http.StatusForbidden && code != http.StatusBadRequest {
					t.Errorf("acting as %q at %s: %d %s, want a refusal", key, path, code, body)
				}
			}
		}
		for _, path := range []string{
			"/v1/sessions/" + target + "/events",
			"/v1/sessions/" + strings.ToUpper(target) + "/events",
			"/v1/sessions/" + url.PathEscape(strings.ReplaceAll(target, ":", "%3A")) + "/events?agent=ops",
			"/v1/sessions/" + strings.ReplaceAll(target, ":", "%3A") + "/events",
			"/v1/sessions/" + strings.ReplaceAll(target, ":", "%3A") + "/turn",
			"/v1/sessions/" + target + "/reply",
			"/v1/sessions/./" + target + "/events",
			"/v1/sessions/x/../" + target + "/events",
			"/v1/events?session=" + url.QueryEscape(strings.ToUpper(target)),
			"/v1/events?agent=OPS",
			"/v1/events?session=" + url.QueryEscape(target) + "&agent=main",
		} {
			method := http.MethodGet
			var body []byte
			if strings.HasSuffix(path, "/turn") || strings.HasSuffix(path, "/reply") {
				method, body = http.MethodPost, []byte(`{"waitSeconds":0,"text":"x"}`)
			}
			code, out := e2eRequest(t, s, method, path, "Bearer "+e2eMain, e2eManager, body)
			if code == http.StatusOK {
				t.Errorf("%s %s: %d %.200s, want a refusal", method, path, code, out)
			}
		}
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}
