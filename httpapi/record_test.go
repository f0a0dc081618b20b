package httpapi_test

// session_record: sessions that live in another runtime use vigil for
// awareness only.

import (
	"net/http"
	"strings"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

const (
	recordCoordinator = "agent:ext:main"
	recordWorker      = "agent:ext:subagent:w1"
)

// recordSpawn has the runtime report that its coordinator spawned a worker.
func recordSpawn(t *testing.T, s *e2eServer) {
	t.Helper()
	out := e2eDo[gateway.RecordOutput](t, s, e2eRuntime, "", "session_record", map[string]any{
		"sessionKey": recordWorker, "kind": "child_spawned", "actorId": recordCoordinator, "runId": "r1",
		"dedupeKey": "child-spawned:r1", "parent": recordCoordinator})
	if !out.Recorded || out.StateVersion == 0 {
		t.Fatalf("the spawn: %+v", out)
	}
}

func TestARuntimesRecordOfAPersonsMessageNotifiesTheWatcherWhoReconcilesExactly(t *testing.T) {
	s := e2eStart(t)
	recordSpawn(t, s)
	seen := e2eVersion(t, s, recordWorker)
	out := e2eDo[gateway.RecordOutput](t, s, e2eRuntime, "", "session_record", map[string]any{
		"sessionKey": recordWorker, "kind": "human_direct_message", "actorType": "human", "actorId": "telegram:42",
		"summary": "human message via telegram", "payload": map[string]any{"channel": "telegram"}, "parent": recordCoordinator})
	if !out.Recorded || out.StateVersion <= seen {
		t.Fatalf("the person's message: %+v", out)
	}
	turn := e2eDo[gateway.TurnOutput](t, s, e2eRuntime, recordCoordinator, "session_turn",
		map[string]any{"sessionKey": recordCoordinator, "waitSeconds": 0})
	want := `Session "` + recordWorker + `" changed (other actor). Reconcile before acting: session_status sessionKey "` +
		recordWorker + `" changesSince 1.`
	if len(turn.SystemEvents) != 1 || turn.SystemEvents[0] != want {
		t.Fatalf("the coordinator's turn: %+v", turn.SystemEvents)
	}
	events := e2eEvents(t, s, recordWorker, seen)
	if len(events) != 1 || events[0].Kind != vigil.KindHumanDirectMessage || events[0].ActorType != vigil.ActorHuman ||
		events[0].ActorID != "telegram:42" || events[0].Sequence != out.Sequence {
		t.Fatalf("changesSince %d: %+v", seen, events)
	}
	// A repeat of a dedupe key records nothing.
	again := e2eDo[gateway.RecordOutput](t, s, e2eRuntime, "", "session_record", map[string]any{
		"sessionKey": recordWorker, "kind": "child_spawned", "actorId": recordCoordinator, "runId": "r1",
		"dedupeKey": "child-spawned:r1", "parent": recordCoordinator})
	if again.Recorded || !strings.Contains(again.Reason, "dedupe") {
		t.Fatalf("a repeated dedupe key: %+v", again)
	}
}

func TestSessionRecordRefusesWhatTheCredentialMayNotDoStoringNothing(t *testing.T) {
	s := e2eStart(t)
	hosted, _ := e2eStory(t, s)
	recordSpawn(t, s)
	// A session agent ops' runtime keeps, which boss reaches through its
	// allow-list.
	e2eDo[gateway.RecordOutput](t, s, e2eOps, "", "session_record", map[string]any{
		"sessionKey": "agent:ops:elsewhere", "kind": "goal_changed"})
	before := e2eSnapshot(t, s, recordWorker, "agent:main:elsewhere")
	for _, c := range []struct {
		name, token string
		in          map[string]any
		status      int
		code        string
		want        string
	}{
		{"another agent's session", e2eMain, map[string]any{"sessionKey": recordWorker, "kind": "goal_changed"},
			http.StatusForbidden, gateway.CodeForbidden, "cannot reach"},
		{"a person, without the right", e2eMain, map[string]any{"sessionKey": "agent:main:elsewhere",
			"kind": "human_direct_message", "actorType": "human", "actorId": "telegram:42"},
			http.StatusForbidden, gateway.CodeForbidden, "recordHuman"},
		{"another agent's session as the actor", e2eRuntime, map[string]any{"sessionKey": recordWorker,
			"kind": "goal_changed", "actorId": "agent:main:main"}, http.StatusForbidden, gateway.CodeForbidden, "cannot record as"},
		{"another agent's watcher", e2eRuntime, map[string]any{"sessionKey": recordWorker, "kind": "goal_changed",
			"actorId": recordCoordinator, "parent": "agent:main:main"}, http.StatusForbidden, gateway.CodeForbidden, "watcher"},
		{"an operator as a session", e2eOperator, map[string]any{"sessionKey": recordWorker, "kind": "goal_changed",
			"actorType": "agent", "actorId": recordCoordinator}, http.StatusForbidden, gateway.CodeForbidden, "person"},
		{"an unknown kind", e2eRuntime, map[string]any{"sessionKey": recordWorker, "kind": "exploded", "actorId": recordCoordinator},
			http.StatusBadRequest, gateway.CodeInvalid, `kind "exploded"`},
		{"a long summary", e2eRuntime, map[string]any{"sessionKey": recordWorker, "kind": "goal_changed",
			"actorId": recordCoordinator, "summary": strings.Repeat("x", 201)}, http.StatusBadRequest, gateway.CodeInvalid, "summary"},
		{"a payload that is not an object", e2eRuntime, map[string]any{"sessionKey": recordWorker, "kind": "goal_changed",
			"actorId": recordCoordinator, "payload": []int{1}}, http.StatusBadRequest, gateway.CodeInvalid, "payload"},
		{"a bad key", e2eRuntime, map[string]any{"sessionKey": "agent::x", "kind": "goal_changed"},
			http.StatusBadRequest, gateway.CodeInvalid, "sessionKey"},
		{"a hosted session", e2eAdmin, map[string]any{"sessionKey": hosted, "kind": "goal_changed", "actorType": "system"},
			http.StatusBadRequest, gateway.CodeInvalid, "hosted by this gateway"},
		// The system acts under no name: a name would let an agent show a
		// person or another agent's session as the one who acted.
		{"the system under a person's name", e2eMain, map[string]any{"sessionKey": "agent:main:elsewhere",
			"kind": "human_direct_message", "actorType": "system", "actorId": "telegram:42"},
			http.StatusBadRequest, gateway.CodeInvalid, "actorId"},
		{"the system under another agent's session", e2eRuntime, map[string]any{"sessionKey": recordWorker,
			"kind": "goal_changed", "actorType": "system", "actorId": "agent:main:main"},
			http.StatusBadRequest, gateway.CodeInvalid, "actorId"},
		// An agent is the runtime of its own sessions only: on another
		// agent's it records as itself.
		{"another agent's runtime", e2eBoss, map[string]any{"sessionKey": "agent:ops:elsewhere",
			"kind": "attention", "actorType": "system", "payload": map[string]any{"attention": "stuck"}},
			http.StatusForbidden, gateway.CodeForbidden, "runtime"},
		{"a human actor without who", e2eRuntime, map[string]any{"sessionKey": recordWorker, "kind": "human_direct_message",
			"actorType": "human"}, http.StatusBadRequest, gateway.CodeInvalid, "actorId is required"},
	} {
		t.Run(c.name, func(t *testing.T) {
			e2eFail(t, s, c.token, "", "session_record", c.in, c.status, c.code, c.want)
		})
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s, recordWorker, "agent:main:elsewhere"))
}

// Acting as a recorded session (the Vigil-Session header) is open to its
// own agent's credential only.
func TestARecordedSessionIsActedAsByItsAgentsCredentialAndNoOtherAgents(t *testing.T) {
	s := e2eStart(t)
	recordSpawn(t, s)
	turn := e2eDo[gateway.TurnOutput](t, s, e2eRuntime, recordWorker, "session_turn",
		map[string]any{"sessionKey": recordWorker, "waitSeconds": 0})
	if !turn.TimedOut {
		t.Fatalf("the recorded worker's own turn: %+v", turn)
	}
	code, body := e2eCall(t, s, e2eMain, recordWorker, "session_pending", map[string]any{"sessionKey": recordWorker})
	e2eCheckError(t, "another agent acting as the recorded worker", code, body, http.StatusForbidden, gateway.CodeForbidden, "agent:ext:subagent:w1")
	code, body = e2eCall(t, s, e2eRuntime, "agent:ext:subagent:never-recorded", "session_pending",
		map[string]any{"sessionKey": "agent:ext:subagent:never-recorded"})
	e2eCheckError(t, "acting as a session of its own vigil knows nothing of", code, body, http.StatusNotFound, gateway.CodeNotFound)
}

func TestARecordedSessionsListRowHasNoSessionID(t *testing.T) {
	s := e2eStart(t)
	recordSpawn(t, s)
	out := e2eDo[struct {
		Sessions []map[string]any `json:"sessions"`
	}](t, s, e2eAdmin, "", "sessions_list", map[string]any{"agentId": "ext"})
	for _, row := range out.Sessions {
		if row["sessionKey"] != recordWorker {
			continue
		}
		if id, has := row["sessionId"]; has || row["state"] != "recorded" {
			t.Fatalf("the recorded session's row carries sessionId %q (state %v): vigil gives it none", id, row["state"])
		}
		return
	}
	t.Fatalf("the recorded session is not listed: %v", out.Sessions)
}
