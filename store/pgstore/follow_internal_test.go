package pgstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestChangesAreSplitIntoNotificationsBelowTheLimit(t *testing.T) {
	tx := &Tx{s: &Store{origin: "me"}, watchers: map[string]struct{}{}, appended: true}
	var want []string
	for i := range 400 {
		// Long keys with characters JSON escapes, the worst case for size.
		w := fmt.Sprintf("agent:a%03d:%s", i, strings.Repeat("\u0001\"", 20))
		tx.watchers[w] = struct{}{}
		want = append(want, w)
	}
	ps := tx.payloads()
	if len(ps) < 2 {
		t.Fatalf("%d notifications, want the list split", len(ps))
	}
	var got []string
	for i, p := range ps {
		if len(p) >= 8000 {
			t.Fatalf("notification %d is %d bytes, PostgreSQL refuses 8000 or more", i, len(p))
		}
		var c change
		if err := json.Unmarshal([]byte(p), &c); err != nil {
			t.Fatalf("notification %d: %v", i, err)
		}
		if c.Origin != "me" {
			t.Errorf("notification %d origin = %q", i, c.Origin)
		}
		if c.Appended != (i == 0) {
			t.Errorf("notification %d appended = %v, want it on the first only", i, c.Appended)
		}
		got = append(got, c.Watchers...)
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("watchers across notifications differ from the transaction's: got %d, want %d", len(got), len(want))
	}
}

func TestATransactionThatChangedNothingAnnouncesNothing(t *testing.T) {
	tx := &Tx{s: &Store{origin: "me"}, watchers: map[string]struct{}{}}
	if ps := tx.payloads(); len(ps) != 0 {
		t.Fatalf("payloads = %q, want none", ps)
	}
}
