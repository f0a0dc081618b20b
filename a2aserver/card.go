package a2aserver

import (
	"encoding/json"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
)

// BearerScheme names the card's one security scheme.
const BearerScheme = "bearer"

// Card returns vigil's Agent Card with its endpoint at base (scheme and
// host, no trailing slash).
func Card(base string) *a2a.AgentCard {
	text := []string{"text/plain"}
	return &a2a.AgentCard{
		Name: "vigil",
		Description: "Session state awareness for multi-agent systems: each task is a session; messages go into its " +
			"inbox, and whoever watches it is told once when someone else changes it, with the state version to " +
			"reconcile from.",
		URL:                base + Path,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    ProtocolVersion,
		Version:            Version,
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  text,
		DefaultOutputModes: []string{"text/plain", "application/json"},
		SecuritySchemes: a2a.NamedSecuritySchemes{BearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: "a vigil token; the Vigil-Session header names the session the caller acts as"}},
		Security: []a2a.SecurityRequirements{{BearerScheme: a2a.SecuritySchemeScopes{}}},
		Skills: []a2a.AgentSkill{
			{ID: "spawn", Name: "Spawn a child session", Tags: []string{"sessions", "spawn"},
				Description: "A message without a taskId or contextId starts a child of the acting session; its text " +
					"is the child's task, and the answer is the child's task (its id is the child's session key)."},
			{ID: "message", Name: "Write into a session", Tags: []string{"sessions", "messages"},
				Description: "A message with a taskId (a session key) goes into that session's inbox as the caller: a " +
					"person's message is recorded and tells the session's watchers."},
			{ID: "watch", Name: "Hear of others' changes", Tags: []string{"notices", "streaming"},
				Description: "Streaming or resubscribing to a task carries, as status updates with stateVersion in " +
					"their metadata, the notices queued for the acting session about that task, and the task's replies."},
			{ID: "reconcile", Name: "Read exactly what changed", Tags: []string{"state", "reconcile"},
				Description: "tasks/get with metadata.changesSince answers with the session's state version and every " +
					"change after that version, or says that history was pruned."},
		},
	}
}

// CardHandler serves the Agent Card, naming the endpoint on the host the
// request came to. The card holds no data, so it needs no credential.
func CardHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(Card(scheme + "://" + r.Host))
	})
}
