package gateway_test

import (
	"slices"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
)

const earlyKey = "agent:main:subagent:w"

func earlyEvent(seq int64) vigil.Event {
	return vigil.Event{Sequence: seq, AgentID: "main", SessionKey: earlyKey}
}

// hubThatGave5 is a hub on a shared store that hears every commit, with a
// subscription of earlyKey that was given event 5, heard with its commit.
func hubThatGave5(t *testing.T) (*gateway.Hub, *gateway.Subscription) {
	t.Helper()
	h := gateway.NewHub()
	h.ShareStore()
	h.HearCommits(true)
	s := h.Subscribe(earlyKey)
	t.Cleanup(s.Close)
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(5)}})
	if !woken(s) {
		t.Fatal("the commit heard did not wake the subscription")
	}
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{5}) {
		t.Fatalf("took %v, want [5]", got)
	}
	s.Take(nil) // parks it
	return h, s
}

// committedHere is this process committing and recording ev, whose
// session's version before it is before.
func committedHere(h *gateway.Hub, ev vigil.Event, before int64) {
	if h.Followed(ev.Session()) {
		h.CommittedHere([]vigil.Event{ev}, []int64{before})
	}
	h.Record(ev)
}

func TestOnASharedStoreThisProcesssEventIsGivenAtItsCommitWhenEveryEventOfItsSessionBeforeItWasGiven(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(7), 5)
	if !woken(s) {
		t.Fatal("the event did not wake the subscription at its commit")
	}
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{7}) {
		t.Fatalf("took %v at the commit, want [7]", got)
	}
}

func TestAnEventGivenAtItsCommitIsNotGivenAgainWhenItsCommitIsHeard(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(7), 5)
	woken(s)
	s.Take(nil)
	s.Take(nil) // parks it
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(7)}})
	if woken(s) {
		t.Fatal("hearing the commit of an event given already woke the subscription")
	}
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(8)}})
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{8}) {
		t.Fatalf("took %v, want [8]: the event given at its commit once, the next one heard", got)
	}
}

func TestThisProcesssEventWaitsForTheEventOfItsSessionBeforeItWhenThatOneMayBeOnItsWay(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(8), 6) // 6 is another process's, not heard yet
	if woken(s) || len(s.Take(nil).Events) != 0 {
		t.Fatal("the event was given before the event before it")
	}
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(6)}})
	if !woken(s) {
		t.Fatal("the commit heard did not wake the subscription")
	}
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{6, 8}) {
		t.Fatalf("took %v, want [6 8]: the event given with the one before it, before its own commit is heard", got)
	}
	s.Take(nil) // parks it
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(8)}})
	if woken(s) {
		t.Fatal("hearing the commit of an event given already woke the subscription")
	}
}

func TestASessionWrittenFasterThanCommitsAreHeardIsGivenEveryWaitingEventWithTheFirstCommitHeard(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(7), 6) // 6 is another process's, not heard yet
	committedHere(h, earlyEvent(9), 7)
	committedHere(h, earlyEvent(11), 9)
	if woken(s) {
		t.Fatal("events were given before the event before them")
	}
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(6)}})
	if !woken(s) {
		t.Fatal("the commit heard did not wake the subscription")
	}
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{6, 7, 9, 11}) {
		t.Fatalf("took %v, want [6 7 9 11]", got)
	}
	s.Take(nil) // parks it
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(7), earlyEvent(9), earlyEvent(11)}})
	if woken(s) {
		t.Fatal("hearing the commits of events given already woke the subscription")
	}
}

func TestAnEventWaitingWhoseCommitIsHeardFirstIsGivenOnce(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(8), 6)
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(6), earlyEvent(8)}})
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{6, 8}) {
		t.Fatalf("took %v, want [6 8]: each once, in order", got)
	}
}

func TestAfterItsSubscriptionsAreToldToReadTheStoreASessionsEventsWaitForTheirCommitsToBeHeard(t *testing.T) {
	h, s := hubThatGave5(t)
	h.Committed(gateway.Heard{Uncarried: []string{earlyKey}}) // an event too long to carry: its sequence is not known
	if !woken(s) || !s.Take(nil).ReadStore {
		t.Fatal("the subscription was not told to read the store")
	}
	s.Take(nil) // parks it
	committedHere(h, earlyEvent(7), 5)
	if woken(s) {
		t.Fatal("an event was given at its commit though the hub no longer knew what its subscriptions had")
	}
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(7)}})
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{7}) {
		t.Fatalf("took %v, want [7]", got)
	}
	committedHere(h, earlyEvent(9), 7) // known again
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{9}) {
		t.Fatalf("took %v at the commit, want [9]", got)
	}
}

func TestASessionsFirstEventIsGivenAtItsCommit(t *testing.T) {
	h := gateway.NewHub()
	h.ShareStore()
	h.HearCommits(true)
	s := h.Subscribe(earlyKey)
	defer s.Close()
	committedHere(h, earlyEvent(3), 0) // nothing before it, ever
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{3}) {
		t.Fatalf("took %v at the commit, want [3]", got)
	}
}

func TestAnEventIsGivenAtItsCommitOnlyAfterTheEventsOfItsOwnSessionNotOfAnotherAgentsWithItsKey(t *testing.T) {
	h, s := hubThatGave5(t) // 5 was agent main's
	other := vigil.Event{Sequence: 7, AgentID: "other", SessionKey: earlyKey}
	committedHere(h, other, 5)
	if woken(s) {
		t.Fatal("an event of another agent's session was given after agent main's event 5")
	}
}

func TestAHubThatDoesNotHearCommitsGivesNoEventAtItsCommit(t *testing.T) {
	h, s := hubThatGave5(t)
	h.HearCommits(false)
	s.Take(nil) // told to read the store
	s.Take(nil) // parks it
	committedHere(h, earlyEvent(7), 5)
	if got := s.Take(nil); len(got.Events) != 0 || !got.ReadStore {
		t.Fatalf("took %+v, want nothing but a read of the store", got)
	}
}

func TestHearingCommitsAgainForgetsTheEventsGivenAtTheirCommit(t *testing.T) {
	h, s := hubThatGave5(t)
	committedHere(h, earlyEvent(7), 5)
	s.Take(nil)
	h.HearCommits(false)
	h.HearCommits(true)
	s.Take(nil) // told to read the store
	s.Take(nil) // parks it
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(7)}})
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{7}) {
		t.Fatalf("took %v, want [7]: what is heard is given (each follower skips what it has)", got)
	}
}

func TestAnEventWhoseCommitIsHeardBeforeThisProcessRecordsItIsGivenOnce(t *testing.T) {
	h, s := hubThatGave5(t)
	h.Committed(gateway.Heard{Events: []vigil.Event{earlyEvent(7)}}) // heard before the committer went on
	woken(s)
	if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{7}) {
		t.Fatalf("took %v, want [7]", got)
	}
	s.Take(nil) // parks it
	committedHere(h, earlyEvent(7), 5)
	if woken(s) {
		t.Fatal("the event was given again when this process recorded it")
	}
	if n := gateway.WaitingEvents(h, earlyKey); n != 0 {
		t.Fatalf("%d events wait for the event before them, want none: the event was given", n)
	}
}

func TestEventsGivenAtTheirCommitWhoseCommitsAreNeverHeardWithThemDoNotStopTheNextOnes(t *testing.T) {
	h, s := hubThatGave5(t)
	// Events too long to be carried: their commits name their session
	// alone, or not yet; the hub remembers each as given until then.
	for seq := int64(6); seq <= 6+gateway.MaxEarly; seq++ {
		committedHere(h, earlyEvent(seq), seq-1)
		if got := seqs(s.Take(nil).Events); !slices.Equal(got, []int64{seq}) {
			t.Fatalf("took %v at the commit, want [%d]", got, seq)
		}
	}
}
