package jsstring

import "testing"

func TestOnlyQuotesBackslashesAndControlsAreEscapedAsJSONStringifyDoes(t *testing.T) {
	for in, want := range map[string]string{
		"plain":             `"plain"`,
		`say "hi" \ there`:  `"say \"hi\" \\ there"`,
		"a\nb\tc\rd\be\ff":  `"a\nb\tc\rd\be\ff"`,
		"\x00\x1f":          `"\u0000\u001f"`,
		"<tag> & é \u2028 ": "\"<tag> & é \u2028 \"",
	} {
		if got := Quote(in); got != want {
			t.Errorf("Quote(%q) = %s, want %s", in, got, want)
		}
	}
}
