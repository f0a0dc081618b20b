package redact_test

import (
	"strings"
	"testing"

	"github.com/vigilhq/vigil/internal/redact"
)

func TestURLHidesThePasswordWhereverTheURLGivesIt(t *testing.T) {
	for raw, want := range map[string]string{
		"postgres://vigil:s3cret@db.example:5432/vigil":                        "postgres://vigil:xxxxx@db.example:5432/vigil",
		"postgres://vigil@db.example/vigil?password=s3cret&sslpassword=s3cret": "postgres://vigil@db.example/vigil?password=xxxxx&sslpassword=xxxxx",
		"http://ann:s3cret@127.0.0.1:7317":                                     "http://ann:xxxxx@127.0.0.1:7317",
		// Not parsed: all before the last @ goes.
		"postgres://vigil:s3cret#1@db.example:5432/vigil": "postgres://xxxxx@db.example:5432/vigil",
		"postgres://vigil:s3c%zzret@db.example/vigil":     "postgres://xxxxx@db.example/vigil",
		// Without its scheme: parsed as an opaque URL of the scheme "bob".
		"bob:s3cret@host:7317": "xxxxx@host:7317",
	} {
		if got := redact.URL(raw); got != want {
			t.Errorf("URL(%q) = %q, want %q", raw, got, want)
		}
	}
}

func TestURLLeavesAURLWithoutAPasswordAsItIs(t *testing.T) {
	for _, raw := range []string{"postgres://vigil@db.example/vigil?schema=team", "/var/lib/vigil/vigil.db", "127.0.0.1:7317"} {
		if got := redact.URL(raw); got != raw {
			t.Errorf("URL(%q) = %q, want it unchanged", raw, got)
		}
	}
}

func TestParseErrorNeverQuotesTheUserInfo(t *testing.T) {
	for _, raw := range []string{
		"postgres://vigil:s3cret@db.example:port/vigil",
		"postgres://vigil:s3cret@db.example/vigil\x7f",
		"postgresql://vigil:s3cret@[db.example/vigil?x=1",
		"postgres://vigil:s3cret#1@db.example/vigil",
		"postgres://vigil:s3cret/1@db.example/vigil",
		"postgres://vigil:s3cret?1@db.example/vigil",
		"postgres://vigil:s3c%zzret@db.example/vigil",
	} {
		err := redact.ParseError(raw)
		if err == nil {
			t.Errorf("%q: no reason given", raw)
			continue
		}
		if strings.Contains(err.Error(), "s3c") {
			t.Errorf("%q: the reason quotes the password: %v", raw, err)
		}
	}
	if err := redact.ParseError("postgres://vigil:s3cret@db.example/vigil"); err != nil {
		t.Errorf("a URL that parses: %v", err)
	}
}
