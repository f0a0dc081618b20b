package gateway_test

// Creation, the kinds the reference added and ambient group watches, as
// the gateway records them (SPEC 9).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/clock"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

// gatewayWithWakes is gatewayWith, its wakes sent on wakes.
func gatewayWithWakes(t *testing.T, opts gateway.Options, wakes chan<- string) *gateway.Gateway {
	t.Helper()
	return gatewaytest.Open(t, gatewaytest.Options{Gateway: opts,
		Engine: vigil.Options{Clock: opts.Clock, OnWake: func(w string) { wakes <- w }}}).Gateway
}

func TestASpawnRecordsItsCreationBeforeTheSpawnAndTellsTheChildsAgentsMainSession(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	admin := gateway.Principal{Role: gateway.RoleAdmin, ID: "root"}
	sp, err := g.Spawn(ctx, caller(t, g, admin, "agent:main:main"), gateway.SpawnInput{Task: "draft", Label: "writer <1>"})
	if err != nil {
		t.Fatal(err)
	}
	st, err := g.Status(ctx, caller(t, g, person, ""), gateway.StatusInput{SessionKey: sp.ChildSessionKey, ChangesSince: new(int64)})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range st.StateChanges.Events {
		kinds = append(kinds, string(e.Kind)+" by "+string(e.ActorType)+" "+e.ActorID)
	}
	if want := []string{"created by agent agent:main:main", "child_spawned by agent agent:main:main"}; !slices.Equal(kinds, want) {
		t.Fatalf("events = %q, want %q", kinds, want)
	}
	want := spawnNotice(sp.ChildSessionKey, "agent:main:main", "writer <1>")
	if !strings.Contains(want, `"title":"writer &lt;1&gt;"`) {
		t.Fatalf("the notice does not show the label as its title: %s", want)
	}
	if got := pendingTexts(t, g, "agent:main:main"); !slices.Equal(got, []string{want}) {
		t.Fatalf("main's queue = %q, want %q", got, want)
	}
	// A child of another agent tells that agent's main session.
	other, err := g.Spawn(ctx, caller(t, g, admin, "agent:main:main"), gateway.SpawnInput{Task: "help", AgentID: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	if got := pendingTexts(t, g, "agent:ops:main"); !slices.Equal(got, []string{spawnNotice(other.ChildSessionKey, "agent:main:main", "")}) {
		t.Fatalf("ops' main queue = %q", got)
	}
}

func pendingTexts(t *testing.T, g *gateway.Gateway, key string) []string {
	t.Helper()
	out, err := g.Pending(ctx, caller(t, g, person, ""), gateway.PendingInput{SessionKey: key})
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, e := range out.Events {
		texts = append(texts, e.Text)
	}
	return texts
}

func TestCreationNoticesCanBeTurnedOffForAGateway(t *testing.T) {
	g := gatewayWith(t, gateway.Options{NoCreationNotices: true})
	sp, err := g.Spawn(ctx, caller(t, g, mainAgent, ""), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	if got := pendingTexts(t, g, "agent:main:main"); len(got) != 0 {
		t.Fatalf("main's queue = %q, want nothing", got)
	}
	if v, _ := g.Engine().Version(ctx, vigil.MustRef(sp.ChildSessionKey)); v != 2 {
		t.Fatalf("version = %d, want 2: created is still recorded", v)
	}
}

func TestAParkedTurnIsNotEndedByACreationNoticeAndTheNextTurnTakesIt(t *testing.T) {
	clk := clock.NewManual(time.Now())
	g := gatewayWith(t, gateway.Options{BookmarkInterval: 30 * time.Second, Clock: clk})
	manager := caller(t, g, mainAgent, "")
	turned := make(chan gateway.TurnOutput, 1)
	go func() {
		long := gateway.MaxTurnWait
		out, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &long})
		if err != nil {
			t.Error(err)
		}
		turned <- out
	}()
	hang, cancel := context.WithTimeout(ctx, 20*time.Second) // a hang guard, not a timing
	defer cancel()
	if err := g.AwaitHeld(hang, gateway.HoldWait, 1); err != nil {
		t.Fatal(err)
	}
	sp, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(30 * time.Second) // only the bookmark interval ends the wait
	var out gateway.TurnOutput
	select {
	case out = <-turned:
	case <-time.After(20 * time.Second):
		t.Fatal("the turn did not end on the gateway's clock")
	}
	if !out.TimedOut || len(out.SystemEvents) != 0 {
		t.Fatalf("parked turn = %+v; want it timed out, not woken by the creation notice", out)
	}
	zero := 0
	next, err := g.Turn(ctx, manager, gateway.TurnInput{SessionKey: "agent:main:main", WaitSeconds: &zero})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{spawnNotice(sp.ChildSessionKey, "agent:main:main", "")}; !slices.Equal(next.SystemEvents, want) ||
		len(next.Acknowledged) != 0 {
		t.Fatalf("next turn = %+v; want the creation notice, acknowledging nothing", next)
	}
}

func TestSessionRecordOfCreatedTellsTheAgentsMainSessionOnce(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	in := gateway.RecordInput{SessionKey: "agent:main:dashboard:plan", Kind: vigil.KindCreated, DedupeKey: "created:plan"}
	for range 2 {
		if _, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), in); err != nil {
			t.Fatal(err)
		}
	}
	want := vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef("agent:main:dashboard:plan"),
		Creator: &vigil.Creator{Type: vigil.ActorHuman, ID: "ann"}})
	if got := pendingTexts(t, g, "agent:main:main"); !slices.Equal(got, []string{want}) {
		t.Fatalf("main's queue = %q, want %q", got, want)
	}
}

func TestSessionRecordOfCreatedSaysHowTheSessionCameToBeInItsNotice(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	in := gateway.RecordInput{SessionKey: "agent:main:telegram:direct:42", Kind: vigil.KindCreated,
		Creation: &gateway.RecordedCreation{Via: "channel", Label: "Ann's questions", CreatorLabel: "Ann", CreatorSource: "telegram"}}
	if _, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), in); err != nil {
		t.Fatal(err)
	}
	want := vigil.CreationNoticeText(vigil.Creation{Session: vigil.MustRef(in.SessionKey), Via: "channel", Label: "Ann's questions",
		Creator: &vigil.Creator{Type: vigil.ActorHuman, ID: "ann", Label: "Ann", Source: "telegram"}})
	if got := pendingTexts(t, g, "agent:main:main"); !slices.Equal(got, []string{want}) {
		t.Fatalf("main's queue = %q, want %q", got, want)
	}
}

func TestSessionRecordOfCreatedAnnouncesNoDraftIncognitoCronOrInternalSession(t *testing.T) {
	for name, creation := range map[string]gateway.RecordedCreation{
		"a draft":              {Draft: true},
		"an incognito session": {Incognito: true},
		"created by cron":      {Via: "cron"},
		"created internally":   {Via: "internal"},
	} {
		t.Run(name, func(t *testing.T) {
			g := gatewayWith(t, gateway.Options{})
			out, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), gateway.RecordInput{SessionKey: "agent:main:dashboard:plan",
				Kind: vigil.KindCreated, Creation: &creation})
			if err != nil || !out.Recorded {
				t.Fatalf("record = %+v, %v", out, err)
			}
			if got := pendingTexts(t, g, "agent:main:main"); len(got) != 0 {
				t.Fatalf("main's queue = %q, want nothing", got)
			}
		})
	}
}

func TestSessionRecordRefusesACreationThatIsNotACreatedsOrDoesNotFitANotice(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	key := "agent:main:dashboard:plan"
	for _, tt := range []struct {
		in   gateway.RecordInput
		want string
	}{
		{gateway.RecordInput{Kind: vigil.KindGoalChanged, Creation: &gateway.RecordedCreation{Via: "operator"}},
			"creation goes with kind created only, not goal_changed"},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{Via: "Cron Job"}},
			`creation.via must be one lowercase word`},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{Label: "two\nlines"}},
			"creation.label must be one line"},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{Label: "two\u2028lines"}},
			"creation.label must be one line"},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{CreatorLabel: "next\u0085line"}},
			"creation.creatorLabel must be one line"},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{CreatorLabel: strings.Repeat("a", 129)}},
			"creation.creatorLabel is 129 bytes, more than 128"},
		{gateway.RecordInput{Kind: vigil.KindCreated, Creation: &gateway.RecordedCreation{CreatorSource: "\xff"}},
			"creation.creatorSource is not valid UTF-8"},
	} {
		tt.in.SessionKey = key
		_, err := g.RecordElsewhere(ctx, caller(t, g, person, ""), tt.in)
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("record %+v: %v, want invalid naming %q", tt.in, err, tt.want)
		}
	}
	if v, _ := g.Engine().Version(ctx, vigil.MustRef(key)); v != 0 {
		t.Fatalf("version = %d after refused records", v)
	}
	if got := pendingTexts(t, g, "agent:main:main"); len(got) != 0 {
		t.Fatalf("main's queue = %q after refused records", got)
	}
}

func TestSessionRecordRefusesTheNewKindsWithTheWrongActorOrASummaryThatDoesNotFit(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}, "")
	key := "agent:ext:claude:t1"
	for _, tt := range []struct {
		in   gateway.RecordInput
		want string
	}{
		{gateway.RecordInput{Kind: vigil.KindAdopted}, "kind adopted takes actor type human, not agent"},
		{gateway.RecordInput{Kind: vigil.KindUpstreamMissing, ActorType: vigil.ActorHuman, ActorID: "ann"},
			"kind upstream_missing takes actor type system, not human"},
		{gateway.RecordInput{Kind: vigil.KindGoalChanged, Summary: strings.Repeat("x", 201)}, "201 characters, more than 200"},
		{gateway.RecordInput{Kind: vigil.KindGoalChanged, Summary: "two\nlines"}, "summary must be one line"},
		{gateway.RecordInput{Kind: "archived"}, "upstream_missing, session_reset or attention"},
	} {
		tt.in.SessionKey = key
		_, err := g.RecordElsewhere(ctx, runtime, tt.in)
		if !errors.Is(err, gateway.ErrInvalid) && gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("record %+v: %v, want invalid naming %q", tt.in, err, tt.want)
		}
	}
	if v, _ := g.Engine().Version(ctx, vigil.MustRef(key)); v != 0 {
		t.Fatalf("version = %d after refused records", v)
	}
	out, err := g.RecordElsewhere(ctx, runtime, gateway.RecordInput{SessionKey: key, Kind: vigil.KindAdopted,
		ActorType: vigil.ActorHuman, ActorID: "ann", Summary: "adopted from claude-cli",
		Payload: []byte(`{"catalogId":"claude-cli","hostId":"gateway:local"}`)})
	if err != nil || !out.Recorded {
		t.Fatalf("adopted by a person = %+v, %v", out, err)
	}
}

func TestAPersonsMessageInAGroupSessionMakesTheAgentsMainSessionAQuietWatcherOfIt(t *testing.T) {
	var woken []string
	wakes := make(chan string, 10)
	g := gatewayWithWakes(t, gateway.Options{}, wakes)
	runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}, "")
	group := "agent:ext:telegram:group:-100123"
	msg := gateway.RecordInput{SessionKey: group, Kind: vigil.KindHumanDirectMessage, ActorType: vigil.ActorHuman,
		ActorID: "telegram:42", Summary: "human message via telegram"}
	first, err := g.RecordElsewhere(ctx, runtime, msg)
	if err != nil || first.Recorded {
		t.Fatalf("first message = %+v, %v; want it unrecorded, nobody watched yet", first, err)
	}
	c, ok, err := g.Engine().Cursor(ctx, "agent:ext:main", vigil.MustRef(group))
	if err != nil || !ok || !c.Ambient || c.LastSeen != 0 {
		t.Fatalf("main's cursor = %+v, %v, %v; want an ambient watch from version 0", c, ok, err)
	}
	second, err := g.RecordElsewhere(ctx, runtime, msg)
	if err != nil || !second.Recorded {
		t.Fatalf("second message = %+v, %v; want it recorded for main", second, err)
	}
	if got, want := pendingTexts(t, g, "agent:ext:main"), []string{vigil.NoticeText(group, 0)}; !slices.Equal(got, want) {
		t.Fatalf("main's queue = %q, want %q", got, want)
	}
	g.Engine().Close() // waits for every wake
	for len(wakes) > 0 {
		woken = append(woken, <-wakes)
	}
	if len(woken) != 0 {
		t.Fatalf("woke %v: group activity waits for main's next turn", woken)
	}
}

func TestOnlyUnparentedGroupSessionsAreWatchedAndOnlyWhenGroupWatchesAreOn(t *testing.T) {
	for name, tt := range map[string]struct {
		opts   gateway.Options
		key    string
		parent string
	}{
		"a direct conversation": {key: "agent:ext:telegram:direct:42"},
		"a cron session":        {key: "agent:ext:cron:channel:nightly"},
		"a child's group":       {key: "agent:ext:slack:channel:c1", parent: "agent:ext:coord"},
		"group watches off":     {opts: gateway.Options{NoGroupWatches: true}, key: "agent:ext:slack:channel:c1"},
	} {
		t.Run(name, func(t *testing.T) {
			g := gatewayWith(t, tt.opts)
			runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}, "")
			if _, err := g.RecordElsewhere(ctx, runtime, gateway.RecordInput{SessionKey: tt.key, Kind: vigil.KindHumanDirectMessage,
				ActorType: vigil.ActorHuman, ActorID: "u1", Parent: tt.parent}); err != nil {
				t.Fatal(err)
			}
			if _, ok, _ := g.Engine().Cursor(ctx, "agent:ext:main", vigil.MustRef(tt.key)); ok {
				t.Fatal("the main session watches it")
			}
		})
	}
}

func TestASpawnRefusesALabelThatDoesNotReadAsOneLine(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	manager := caller(t, g, admin, "agent:main:main")
	for _, label := range []string{"two\nlines", "two\u0085lines", "two\u2028lines", "del\x7f"} {
		_, err := g.Spawn(ctx, manager, gateway.SpawnInput{Task: "draft", Label: label})
		if gateway.Code(err) != gateway.CodeInvalid || !strings.Contains(fmt.Sprint(err), "label must be one line") {
			t.Errorf("spawn labelled %q: %v, want invalid naming the label", label, err)
		}
	}
	if got := pendingTexts(t, g, "agent:main:main"); len(got) != 0 {
		t.Fatalf("main's queue = %q after refused spawns", got)
	}
}

func TestTheWatchGraphMarksAMainSessionsWatchOfAGroupAsAmbient(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}, "")
	group := "agent:ext:telegram:group:-100123"
	for range 2 {
		if _, err := g.RecordElsewhere(ctx, runtime, gateway.RecordInput{SessionKey: group, Kind: vigil.KindHumanDirectMessage,
			ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram"}); err != nil {
			t.Fatal(err)
		}
	}
	out, err := g.Graph(ctx, runtime, gateway.GraphInput{AgentID: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Cursors) != 1 || out.Cursors[0].Watcher != "agent:ext:main" || out.Cursors[0].Target != group || !out.Cursors[0].Ambient {
		t.Fatalf("graph = %+v, want main's ambient watch of the group", out.Cursors)
	}
}

func TestAGroupSessionAndItsMainSessionsWatchAreListedFromAPersonsFirstMessage(t *testing.T) {
	g := gatewayWith(t, gateway.Options{})
	runtime := caller(t, g, gateway.Principal{Role: gateway.RoleAgent, ID: "ext", RecordHuman: true}, "")
	group := "agent:ext:telegram:group:-100123"
	if _, err := g.RecordElsewhere(ctx, runtime, gateway.RecordInput{SessionKey: group, Kind: vigil.KindHumanDirectMessage,
		ActorType: vigil.ActorHuman, ActorID: "telegram:42", Summary: "human message via telegram"}); err != nil {
		t.Fatal(err)
	}
	list, err := g.List(ctx, runtime, gateway.ListInput{AgentID: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, s := range list.Sessions {
		keys = append(keys, s.SessionKey+" "+s.State)
	}
	if want := []string{"agent:ext:main recorded", group + " recorded"}; !slices.Equal(keys, want) {
		t.Fatalf("sessions_list = %q, want %q", keys, want)
	}
	graph, err := g.Graph(ctx, runtime, gateway.GraphInput{AgentID: "ext"})
	if err != nil {
		t.Fatal(err)
	}
	if len(graph.Cursors) != 1 || graph.Cursors[0].Watcher != "agent:ext:main" || graph.Cursors[0].Target != group {
		t.Fatalf("graph = %+v, want main's watch of the group", graph.Cursors)
	}
}
