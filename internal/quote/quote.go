// Package quote words a value a caller sent for an error about it.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// MaxBytes is the most of a value an error shows.
const MaxBytes = 100

// Bounded returns s quoted as %q quotes it, when s is at most MaxBytes
// long. A longer s is shown by its first MaxBytes at most (cut where a
// character begins), then "..." and its length: a refusal of a huge value
// stays short, and still shows which value it was.
func Bounded(s string) string {
	if len(s) <= MaxBytes {
		return strconv.Quote(s)
	}
	cut := MaxBytes
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.Quote(s[:cut]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
