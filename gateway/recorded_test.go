package gateway_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

// Sessions a runtime keeps elsewhere and records in vigil are first-class:
// listed, graphed and acted as like hosted ones, and every view says where
// they live.

var extAgent = gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}

// recordThread records a LangGraph thread of agent ext, with its
// supervisor as its parent (so its watcher).
func recordThread(t *testing.T, g *gateway.Gateway, key string) gateway.RecordOutput {
	t.Helper()
	out, err := g.RecordElsewhere(ctx, caller(t, g, extAgent, ""), gateway.RecordInput{SessionKey: key,
		Kind: vigil.KindChildSpawned, ActorID: "agent:ext:main", Parent: "agent:ext:supervisor", HostedBy: "langgraph"})
	if err != nil || !out.Recorded {
		t.Fatalf("record %s: %+v, %v", key, out, err)
	}
	return out
}

func TestARecordedSessionIsListedAndItsStatusSaysWhoHostsIt(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g, _ := b.open(t)
			const thread = "agent:ext:langgraph:t1"
			rec := recordThread(t, g, thread)
			list, err := g.List(ctx, caller(t, g, person, ""), gateway.ListInput{AgentID: "ext"})
			if err != nil {
				t.Fatal(err)
			}
			var rows []string
			for _, r := range list.Sessions {
				rows = append(rows, fmt.Sprintf("%s %s %s %s v%d", r.SessionKey, r.Kind, r.State, r.HostedBy, r.StateVersion))
			}
			want := []string{
				thread + " other recorded langgraph v" + fmt.Sprint(rec.StateVersion),
				"agent:ext:supervisor other recorded langgraph v0",
			}
			if !slices.Equal(rows, want) {
				t.Fatalf("sessions of ext:\n%q\nwant\n%q", rows, want)
			}
			st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: thread})
			if err != nil {
				t.Fatal(err)
			}
			if !st.Exists || st.State != gateway.StateRecorded || st.HostedBy != "langgraph" || st.StateVersion != rec.StateVersion ||
				st.Kind != "other" || st.CreatedAt == 0 || st.SessionID != "" {
				t.Fatalf("status of the recorded thread = %+v", st)
			}
		})
	}
}

func TestAHostedSessionSaysVigilHostsItAndAnUnknownOneThatItIsAbsent(t *testing.T) {
	g, _ := newGateway(t)
	sp, err := g.Spawn(ctx, caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: sp.ChildSessionKey})
	if err != nil || !st.Exists || st.State != gateway.StateHosted || st.HostedBy != gateway.HostedByVigil {
		t.Fatalf("status of a hosted session = %+v, %v", st, err)
	}
	st, err = g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: "agent:main:subagent:nobody"})
	if err != nil || st.Exists || st.State != gateway.StateAbsent || st.HostedBy != "" {
		t.Fatalf("status of an unknown session = %+v, %v", st, err)
	}
}

func TestARecordedSessionsWatchesAreInTheGraph(t *testing.T) {
	g, _ := newGateway(t)
	const thread = "agent:ext:langgraph:t1"
	recordThread(t, g, thread)
	out, err := g.Graph(ctx, caller(t, g, person, ""), gateway.GraphInput{AgentID: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Cursors) != 1 || out.Cursors[0].Watcher != "agent:ext:supervisor" || out.Cursors[0].Target != thread {
		t.Fatalf("the graph of ext = %+v, want the supervisor watching the thread", out.Cursors)
	}
}

// Hosted and recorded sessions share one order and one paging: every
// session once, whatever the page size.
func TestListingPagesThroughHostedAndRecordedSessionsTogether(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			g, _ := b.open(t)
			mainAgent := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "")
			var want []string
			for i := range 3 {
				sp, err := g.Spawn(ctx, mainAgent, gateway.SpawnInput{Task: "draft"})
				if err != nil {
					t.Fatal(err)
				}
				key := fmt.Sprintf("agent:main:subagent:%s", []string{"0", "8", "zz"}[i])
				if _, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), gateway.RecordInput{SessionKey: key,
					Kind: vigil.KindGoalChanged}); err != nil {
					t.Fatal(err)
				}
				want = append(want, sp.ChildSessionKey, key)
			}
			want = append(want, "agent:main:main")
			slices.Sort(want)
			for limit := 1; limit <= len(want)+1; limit++ {
				var got []string
				cursor := ""
				for page := 0; ; page++ {
					out, err := g.List(ctx, caller(t, g, person, ""), gateway.ListInput{AgentID: "main", Cursor: cursor, Limit: &limit})
					if err != nil {
						t.Fatal(err)
					}
					for _, r := range out.Sessions {
						got = append(got, r.SessionKey)
					}
					if cursor = out.NextCursor; cursor == "" || page > len(want) {
						break
					}
				}
				if !slices.Equal(got, want) {
					t.Fatalf("pages of %d: %q, want %q", limit, got, want)
				}
			}
		})
	}
}

// Deleting a recorded session deletes what vigil keeps of it: it reads
// as absent, is listed no more, and its watchers are told once.
func TestDeletingARecordedSessionLeavesItAbsentAndTellsItsWatchers(t *testing.T) {
	g, eng := newGateway(t)
	const thread = "agent:ext:langgraph:t1"
	recordThread(t, g, thread)
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: thread}); err != nil {
		t.Fatal(err)
	}
	st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: thread})
	if err != nil || st.Exists || st.State != gateway.StateAbsent || st.StateVersion != 0 {
		t.Fatalf("status of the deleted thread = %+v, %v", st, err)
	}
	list, err := g.List(ctx, caller(t, g, person, ""), gateway.ListInput{AgentID: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(list.Sessions, func(r gateway.SessionRow) bool { return r.SessionKey == thread }) {
		t.Fatalf("the deleted thread is still listed: %+v", list.Sessions)
	}
	if p := eng.Pending("agent:ext:supervisor"); len(p) != 1 || p[0].Text != vigil.DeletedNoticeText(thread) {
		t.Fatalf("the supervisor's queue = %+v, want the deletion notice", p)
	}
	if _, err := g.Delete(ctx, caller(t, g, person, ""), gateway.SessionInput{SessionKey: thread}); !errors.Is(err, gateway.ErrNotFound) {
		t.Fatalf("deleting it again: %v, want not found", err)
	}
}

func TestARuntimesNameIsOneWordThatCannotPassForVigilOrAnAgent(t *testing.T) {
	g, _ := newGateway(t)
	for _, name := range []string{"vigil", "agent:ext", "LangGraph", "a b", "-x"} {
		_, err := g.RecordElsewhere(ctx, caller(t, g, extAgent, ""), gateway.RecordInput{SessionKey: "agent:ext:t",
			Kind: vigil.KindGoalChanged, HostedBy: name})
		if gateway.Code(err) != gateway.CodeInvalid {
			t.Errorf("hostedBy %q: %v, want invalid", name, err)
		}
	}
	st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: "agent:ext:t"})
	if err != nil || st.Exists {
		t.Fatalf("after the refused records: %+v, %v; want the session unknown", st, err)
	}
}
