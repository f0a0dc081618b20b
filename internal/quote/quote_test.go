package quote

import (
	"strings"
	"testing"
)

func TestAShortValueIsQuotedWhole(t *testing.T) {
	if got := Bounded("agent::x\xff"); got != `"agent::x\xff"` {
		t.Fatalf("Bounded = %s", got)
	}
}

func TestALongValueIsShownByItsFirstBytesAndItsLength(t *testing.T) {
	got := Bounded(strings.Repeat("x", 1<<20))
	if want := `"` + strings.Repeat("x", MaxBytes) + `"... (1048576 bytes)`; got != want {
		t.Fatalf("Bounded = %s, want %s", got, want)
	}
}

func TestALongValueIsCutWhereACharacterBegins(t *testing.T) {
	s := strings.Repeat("x", MaxBytes-1) + "é" + strings.Repeat("x", MaxBytes)
	if want := `"` + strings.Repeat("x", MaxBytes-1) + `"... (201 bytes)`; Bounded(s) != want {
		t.Fatalf("Bounded = %s, want %s", Bounded(s), want)
	}
}
