package a2aserver

import (
	"encoding/json"
	"net/http"

	"github.com/a2aproject/a2a-go/a2a"
)

// BearerScheme names the card's one security scheme.
const BearerScheme = "bearer"

// The card's words, the same in both revisions' shapes.
const (
	cardName        = "vigil"
	cardDescription = "Session state awareness for multi-agent systems: each task is a session; messages go into its " +
		"inbox, and whoever watches it is told once when someone else changes it, with the state version to " +
		"reconcile from."
	bearerDescription = "a vigil token; the Vigil-Session header names the session the caller acts as"
)

var (
	inputModes  = []string{"text/plain"}
	outputModes = []string{"text/plain", "application/json"}
)

type skillWords struct{ id, name, description string }

var skills = []struct {
	skillWords
	tags []string
}{
	{skillWords{"spawn", "Spawn a child session", "A message without a taskId or contextId starts a child of the acting " +
		"session; its text is the child's task, and the answer is the child's task (its id is the child's session key)."},
		[]string{"sessions", "spawn"}},
	{skillWords{"message", "Write into a session", "A message with a taskId (a session key) goes into that session's " +
		"inbox as the caller: a person's message is recorded and tells the session's watchers."}, []string{"sessions", "messages"}},
	{skillWords{"watch", "Hear of others' changes", "Streaming or subscribing to a task carries, as status updates with " +
		"stateVersion in their metadata, the notices queued for the acting session about that task, and the task's replies."},
		[]string{"notices", "streaming"}},
	{skillWords{"reconcile", "Read exactly what changed", "Reading a task with changesSince (A2A 1.0: the " +
		HeaderChangesSince + " header; 0.3: metadata.changesSince) answers with the session's state version and every " +
		"change after that version, or says that history was pruned."}, []string{"state", "reconcile"}},
}

// interfaces10 are the card's interfaces, in the order of preference: one
// endpoint, whose revision each request names (A2A-Version).
func interfaces10(base string) []agentInterface10 {
	out := make([]agentInterface10, 0, len(Versions))
	for _, v := range Versions {
		out = append(out, agentInterface10{URL: base + Path, ProtocolBinding: string(a2a.TransportProtocolJSONRPC), ProtocolVersion: v})
	}
	return out
}

// Card returns vigil's Agent Card as revision 0.3 shapes it, with its
// endpoint at base (scheme and host, no trailing slash).
func Card(base string) *a2a.AgentCard {
	card := &a2a.AgentCard{
		Name:               cardName,
		Description:        cardDescription,
		URL:                base + Path,
		PreferredTransport: a2a.TransportProtocolJSONRPC,
		ProtocolVersion:    ProtocolVersion,
		Version:            Version,
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:  inputModes,
		DefaultOutputModes: outputModes,
		SecuritySchemes: a2a.NamedSecuritySchemes{BearerScheme: a2a.HTTPAuthSecurityScheme{Scheme: "Bearer",
			Description: bearerDescription}},
		Security: []a2a.SecurityRequirements{{BearerScheme: a2a.SecuritySchemeScopes{}}},
	}
	for _, s := range skills {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: s.id, Name: s.name, Description: s.description, Tags: s.tags})
	}
	return card
}

// The Agent Card as revision 1.0 shapes it (the schema's AgentCard).
type (
	agentCard10 struct {
		Name                 string                      `json:"name"`
		Description          string                      `json:"description"`
		SupportedInterfaces  []agentInterface10          `json:"supportedInterfaces"`
		Version              string                      `json:"version"`
		Capabilities         capabilities10              `json:"capabilities"`
		SecuritySchemes      map[string]securityScheme10 `json:"securitySchemes"`
		SecurityRequirements []securityRequirement10     `json:"securityRequirements"`
		DefaultInputModes    []string                    `json:"defaultInputModes"`
		DefaultOutputModes   []string                    `json:"defaultOutputModes"`
		Skills               []skill10                   `json:"skills"`
	}
	agentInterface10 struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	}
	capabilities10 struct {
		Streaming         bool `json:"streaming"`
		PushNotifications bool `json:"pushNotifications"`
		ExtendedAgentCard bool `json:"extendedAgentCard"`
	}
	securityScheme10 struct {
		HTTPAuthSecurityScheme httpAuthScheme10 `json:"httpAuthSecurityScheme"`
	}
	httpAuthScheme10 struct {
		Description string `json:"description"`
		Scheme      string `json:"scheme"`
	}
	securityRequirement10 struct {
		Schemes map[string]stringList10 `json:"schemes"`
	}
	stringList10 struct {
		List []string `json:"list"`
	}
	skill10 struct {
		ID          string   `json:"id"`
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Tags        []string `json:"tags"`
	}
)

// card10 is vigil's Agent Card as revision 1.0 shapes it: both revisions'
// interfaces, 1.0 first.
func card10(base string) agentCard10 {
	card := agentCard10{
		Name:                cardName,
		Description:         cardDescription,
		SupportedInterfaces: interfaces10(base),
		Version:             Version,
		Capabilities:        capabilities10{Streaming: true, PushNotifications: true},
		SecuritySchemes: map[string]securityScheme10{BearerScheme: {HTTPAuthSecurityScheme: httpAuthScheme10{
			Description: bearerDescription, Scheme: "Bearer"}}},
		SecurityRequirements: []securityRequirement10{{Schemes: map[string]stringList10{BearerScheme: {List: []string{}}}}},
		DefaultInputModes:    inputModes,
		DefaultOutputModes:   outputModes,
	}
	for _, s := range skills {
		card.Skills = append(card.Skills, skill10{ID: s.id, Name: s.name, Description: s.description, Tags: s.tags})
	}
	return card
}

// card03 is the card a 0.3 client is given: revision 0.3's card, with 1.0's
// list of interfaces besides, so a 1.0 client that reads it finds both
// (a 0.3 client ignores the member it does not know).
func card03(base string) (map[string]any, error) {
	b, err := json.Marshal(Card(base))
	if err != nil {
		return nil, err
	}
	var card map[string]any
	if err := json.Unmarshal(b, &card); err != nil {
		return nil, err
	}
	card["supportedInterfaces"] = interfaces10(base)
	return card, nil
}

// CardHandler serves the Agent Card, naming the endpoint on the host the
// request came to, in the shape of the revision the request names
// (A2A-Version; none is 0.3, and a revision vigil does not serve gets
// 1.0's card, which lists the revisions it does). The card holds no data,
// so it needs no credential.
func CardHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		base := scheme + "://" + r.Host
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Vary", VersionHeader)
		if v, err := requestedVersion(r); err == nil && v == protocol03 {
			card, err := card03(base)
			if err != nil {
				http.Error(w, "the agent card could not be encoded", http.StatusInternalServerError)
				return
			}
			_ = json.NewEncoder(w).Encode(card)
			return
		}
		_ = json.NewEncoder(w).Encode(card10(base))
	})
}
