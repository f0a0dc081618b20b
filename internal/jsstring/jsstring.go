// Package jsstring writes strings as JavaScript's JSON.stringify does,
// which texts vigil shares with the reference (creation notices, and the
// transcripts vigil sim writes) must match byte for byte.
package jsstring

import "strings"

// Write writes s to b as a JSON string the way JSON.stringify does: only
// '"', '\\' and the C0 controls are escaped (the short forms where JSON
// has them), everything else as it is.
func Write(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

// Quote is s written by Write.
func Quote(s string) string {
	var b strings.Builder
	Write(&b, s)
	return b.String()
}
