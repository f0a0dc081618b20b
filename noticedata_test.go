package vigil_test

// Tests for notices as data (vigil.NoticeData): what each notice covers,
// beside its unchanged text.

import (
	"context"
	"reflect"
	"testing"

	vigil "github.com/vigilhq/vigil"
)

// onlyNotice is watcher's one queued entry, failing unless there is
// exactly one.
func (env *testEnv) onlyNotice(watcher string) vigil.SystemEvent {
	env.t.Helper()
	p := env.eng.Pending(watcher)
	if len(p) != 1 {
		env.t.Fatalf("%s has %d entries queued, want one: %q", watcher, len(p), texts(p))
	}
	return p[0]
}

// noticeData is the data of watcher's entry ev.
func (env *testEnv) noticeData(watcher string, ev vigil.SystemEvent) vigil.NoticeData {
	env.t.Helper()
	d, ok, err := env.eng.NoticeData(ctx, watcher, ev)
	if err != nil || !ok {
		env.t.Fatalf("NoticeData(%q) = %v, %v", ev.Text, ok, err)
	}
	return d
}

func wantData(t *testing.T, got, want vigil.NoticeData) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("notice data\n got %+v\nwant %+v", got, want)
	}
}

var (
	person   = vigil.NoticeActor{Type: vigil.ActorHuman, ID: "telegram:42"}
	operator = vigil.NoticeActor{Type: vigil.ActorHuman, ID: "operator:ann"}
)

func TestANoticeOpenedByAChangeCarriesItsTargetPositionKindAndActor(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	n := env.onlyNotice(manager)
	if n.Text != vigil.NoticeText(child, 1) {
		t.Fatalf("text = %q, want the exact notice text", n.Text)
	}
	wantData(t, env.noticeData(manager, n), vigil.NoticeData{Type: vigil.NoticeChanged, Target: vigil.MustRef(child),
		ChangesSince: 1, Kinds: []vigil.Kind{vigil.KindHumanDirectMessage}, Actors: []vigil.NoticeActor{person}})
}

// A change while the notice is pending is the follow-up's: the notice
// still covers what taking it acknowledges.
func TestAPendingNoticeStillCoversOnlyWhatItsTurnAcknowledges(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	n := env.onlyNotice(manager)
	want := vigil.NoticeData{Type: vigil.NoticeChanged, Target: vigil.MustRef(child), ChangesSince: 1,
		Kinds: []vigil.Kind{vigil.KindHumanDirectMessage}, Actors: []vigil.NoticeActor{person}}
	wantData(t, env.noticeData(manager, n), want)
	d := env.drain(manager)
	if len(d.Events) != 1 || d.Events[0].Text != vigil.NoticeText(child, 1) {
		t.Fatalf("drained %q", texts(d.Events))
	}
	wantData(t, env.noticeData(manager, d.Events[0]), want)
}

// A follow-up covers every change by others after the acknowledged
// watermark, each kind and actor once; the watcher's own are not among
// them.
func TestAFollowUpCoversEveryChangeByOthersSinceTheAcknowledgedOne(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	first := env.human(child, manager).Event.Sequence
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	env.goal(child, vigil.ActorAgent, manager, manager) // the watcher's own
	env.human(child, manager)
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	d := env.drain(manager)
	if len(d.FollowUps) != 1 {
		t.Fatalf("follow-ups %q, want one", texts(d.FollowUps))
	}
	n := env.onlyNotice(manager)
	if n.Text != vigil.NoticeText(child, first) {
		t.Fatalf("follow-up text = %q, want the exact notice text from %d", n.Text, first)
	}
	wantData(t, env.noticeData(manager, n), vigil.NoticeData{Type: vigil.NoticeChanged, Target: vigil.MustRef(child),
		ChangesSince: first, Kinds: []vigil.Kind{vigil.KindGoalChanged, vigil.KindHumanDirectMessage},
		Actors: []vigil.NoticeActor{operator, person}})
}

func TestANoticeQueuedAgainAtARestartCoversEverythingUnacknowledged(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	env.restart()
	n := env.onlyNotice(manager)
	if n.Text != vigil.NoticeText(child, 1) {
		t.Fatalf("text = %q, want the exact notice text", n.Text)
	}
	wantData(t, env.noticeData(manager, n), vigil.NoticeData{Type: vigil.NoticeChanged, Target: vigil.MustRef(child),
		ChangesSince: 1, Kinds: []vigil.Kind{vigil.KindHumanDirectMessage, vigil.KindGoalChanged},
		Actors: []vigil.NoticeActor{person, operator}})
}

func TestAnAttentionNoticeSaysWhichAttentionItAnnounces(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.record(vigil.Record{Session: vigil.MustRef(child), Kind: vigil.KindAttention, ActorType: vigil.ActorSystem,
		Payload: []byte(`{"attention":"stuck"}`), Parent: manager})
	wantData(t, env.noticeData(manager, env.onlyNotice(manager)), vigil.NoticeData{Type: vigil.NoticeChanged,
		Target: vigil.MustRef(child), ChangesSince: 1, Kinds: []vigil.Kind{vigil.KindAttention},
		Actors: []vigil.NoticeActor{{Type: vigil.ActorSystem}}, Attention: []string{"stuck"}})
}

func TestADeletionNoticeSaysItsTargetWasDeleted(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	env.spawn(manager, child, "run-1")
	env.remove(child, "")
	n := env.onlyNotice(manager)
	if n.Text != vigil.DeletedNoticeText(child) {
		t.Fatalf("text = %q, want the exact deletion notice", n.Text)
	}
	wantData(t, env.noticeData(manager, n), vigil.NoticeData{Type: vigil.NoticeDeleted, Target: vigil.MustRef(child)})
}

func TestACreationNoticeNamesTheSessionItAnnounces(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	created := "agent:main:subagent:new"
	out, err := env.eng.RecordCreation(ctx, vigil.Creation{Session: vigil.MustRef(created), SessionID: "s1", Via: "spawn",
		Creator: &vigil.Creator{Type: vigil.ActorAgent, ID: manager}})
	if err != nil {
		t.Fatal(err)
	}
	n := env.onlyNotice(manager)
	if n.Text != out.Notice {
		t.Fatalf("text = %q, want %q", n.Text, out.Notice)
	}
	wantData(t, env.noticeData(manager, n), vigil.NoticeData{Type: vigil.NoticeCreated, Target: vigil.MustRef(created)})
}

// Retention may prune what a coalesced notice covers: the data says it
// may be missing some.
func TestANoticeWhoseChangesWerePrunedSaysItsDataIsPartial(t *testing.T) {
	env := newEnv(t, vigil.Options{MaxEvents: 1})
	env.spawn(manager, child, "run-1")
	env.human(child, manager)
	env.goal(child, vigil.ActorHuman, "operator:ann", manager)
	if _, err := env.eng.Prune(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.restart()
	d := env.noticeData(manager, env.onlyNotice(manager))
	if !d.Partial || !reflect.DeepEqual(d.Kinds, []vigil.Kind{vigil.KindGoalChanged}) {
		t.Fatalf("data %+v, want the retained goal change, marked partial", d)
	}
}

func TestAnEntryThatIsNoNoticeHasNoNoticeData(t *testing.T) {
	env := newEnv(t, vigil.Options{})
	if _, ok, err := env.eng.NoticeData(ctx, manager, vigil.SystemEvent{ContextKey: "other", Text: "hello"}); ok || err != nil {
		t.Fatalf("NoticeData of a plain system event = %v, %v; want none", ok, err)
	}
}
