package gateway_test

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// historyOf makes a worker session whose transcript holds its task and
// then n replies, and returns a person's caller, its key and every
// message id, oldest first.
func historyOf(t *testing.T, n int) (*gateway.Gateway, gateway.Caller, string, []int64) {
	t.Helper()
	g, _ := newGateway(t)
	agent := gateway.Principal{Role: gateway.RoleAgent, ID: "main"}
	sp, err := g.Spawn(ctx, caller(t, g, agent, "agent:main:main"), gateway.SpawnInput{Task: "draft"})
	if err != nil {
		t.Fatal(err)
	}
	worker := caller(t, g, agent, sp.ChildSessionKey)
	for i := range n {
		if _, err := g.Reply(ctx, worker, gateway.ReplyInput{SessionKey: sp.ChildSessionKey, Text: strings.Repeat("x", i+1)}); err != nil {
			t.Fatal(err)
		}
	}
	c := caller(t, g, person, "")
	most := gateway.MaxPageLimit
	h, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: sp.ChildSessionKey, Limit: &most})
	if err != nil {
		t.Fatal(err)
	}
	return g, c, sp.ChildSessionKey, ids(h)
}

func ids(h gateway.HistoryOutput) []int64 {
	var out []int64
	for _, m := range h.Messages {
		out = append(out, m.ID)
	}
	return out
}

func TestHistoryBeforeAnIDAboveEveryOneReadsTheNewestPageOldestFirst(t *testing.T) {
	g, c, key, all := historyOf(t, 4)
	before, two := int64(math.MaxInt64), 2
	h, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, BeforeID: &before, Limit: &two})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(h); !slices.Equal(got, all[3:]) || !h.Truncated || h.NextBeforeID != all[3] || h.NextAfterID != all[4] {
		t.Fatalf("the newest page = ids %v, truncated %v, nextBeforeId %d, nextAfterId %d; want ids %v, truncated, nextBeforeId %d, nextAfterId %d",
			got, h.Truncated, h.NextBeforeID, h.NextAfterID, all[3:], all[3], all[4])
	}
}

func TestHistoryPagedBackWithNextBeforeIDReadsEveryMessageOnce(t *testing.T) {
	g, c, key, all := historyOf(t, 6)
	before, two := int64(math.MaxInt64), 2
	var read []int64
	for pages := 1; ; pages++ {
		h, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, BeforeID: &before, Limit: &two})
		if err != nil {
			t.Fatal(err)
		}
		read = append(ids(h), read...)
		if !h.Truncated {
			break
		}
		if pages > len(all) {
			t.Fatalf("still truncated after %d pages of 2: %v", pages, read)
		}
		before = h.NextBeforeID
	}
	if !slices.Equal(read, all) {
		t.Fatalf("paging back read %v; want %v", read, all)
	}
}

func TestHistoryBeforeTheFirstMessageIsAnEmptyPage(t *testing.T) {
	g, c, key, all := historyOf(t, 1)
	h, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, BeforeID: &all[0]})
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Messages) != 0 || h.Truncated || h.NextBeforeID != 0 || h.NextAfterID != 0 {
		t.Fatalf("the page before the first message = %+v; want an empty one, not truncated, with no cursors", h)
	}
}

func TestHistoryRefusesAfterIDAndBeforeIDTogetherNamingThem(t *testing.T) {
	g, c, key, all := historyOf(t, 1)
	after, before := int64(0), all[1]
	_, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, AfterID: &after, BeforeID: &before})
	if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), "afterId or beforeId, not both") {
		t.Fatalf("afterId and beforeId together = %v; want a refusal naming both", err)
	}
}

func TestHistoryRefusesABeforeIDBelowOne(t *testing.T) {
	g, c, key, _ := historyOf(t, 1)
	for _, before := range []int64{0, -1} {
		_, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, BeforeID: &before})
		if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), "beforeId must be an integer of at least 1") {
			t.Errorf("beforeId %d = %v; want a refusal naming beforeId", before, err)
		}
	}
}

func TestHistoryRefusesANegativeAfterID(t *testing.T) {
	g, c, key, _ := historyOf(t, 1)
	after := int64(-1)
	_, err := g.History(ctx, c, gateway.HistoryInput{SessionKey: key, AfterID: &after})
	if !errors.Is(err, gateway.ErrInvalid) || !strings.Contains(err.Error(), "afterId must be an integer of at least 0") {
		t.Fatalf("afterId -1 = %v; want a refusal naming afterId", err)
	}
}
