// Package redact hides the secrets a URL can carry (a database's, or the
// gateway's address given with a user and password) before the URL, or
// an error about it, is printed or logged. It is the one place that rule
// lives; it imports nothing of vigil's, so any layer may use it.
//
// A URL's secrets are its password, wherever it is given: after the user
// name, or (as the PostgreSQL driver takes it) in the query as password
// or sslpassword. A URL that does not parse is read no further than
// this: everything between its "://" and its last "@" is taken to be the
// user name and password. A password holding a / ? or # that is not
// percent-encoded is what keeps most such URLs from parsing, and it ends
// the host early, so no part of a parse of the whole URL can be trusted
// to leave it out.
package redact

import (
	"errors"
	"net/url"
	"strings"
)

// Mask stands in for a hidden secret.
const Mask = "xxxxx"

// secretParams are the query parameters that hold a password.
var secretParams = []string{"password", "sslpassword"}

// URL returns raw with its password hidden, in the user info and in the
// query. A URL with no password is returned as it is; one that does not
// parse loses its user info whole (Mask stands in for it), and so does
// one given without its scheme ("user:password@host").
func URL(raw string) string {
	if rest, ok := afterSchemelessUserinfo(raw); ok {
		return Mask + "@" + rest
	}
	u, err := url.Parse(raw)
	if err != nil {
		if scheme, rest, ok := withoutUserinfo(raw); ok {
			return scheme + "://" + Mask + "@" + rest
		}
		return raw
	}
	hidden := false
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), Mask)
			hidden = true
		}
	}
	if q := u.Query(); hasAny(q, secretParams) {
		for _, k := range secretParams {
			if q.Has(k) {
				q.Set(k, Mask)
			}
		}
		u.RawQuery = q.Encode()
		hidden = true
	}
	if !hidden {
		return raw
	}
	return u.String()
}

// ParseError says why url.Parse refuses raw without quoting its user name
// or password: a url.Error quotes the whole URL, and its reason may quote
// a part of it (a password with a # reads as the host's port). The reason
// given is that of a parse of raw without its user info, or, when that
// parses, a hint at what the user name or password holds. It returns nil
// when raw parses.
func ParseError(raw string) error {
	_, err := url.Parse(raw)
	if err == nil {
		return nil
	}
	if scheme, rest, ok := withoutUserinfo(raw); ok {
		if _, err = url.Parse(scheme + "://" + rest); err == nil {
			return errors.New("its user name or password holds a character that must be percent-encoded (such as / ? # or %)")
		}
	}
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// withoutUserinfo splits raw into its scheme and what follows its user
// info, read as everything between "://" and the last "@"; ok is false
// when raw has no "://" or no "@" after it.
func withoutUserinfo(raw string) (scheme, rest string, ok bool) {
	scheme, after, found := strings.Cut(raw, "://")
	if !found {
		return "", "", false
	}
	at := strings.LastIndex(after, "@")
	if at < 0 {
		return "", "", false
	}
	return scheme, after[at+1:], true
}

// afterSchemelessUserinfo returns what follows the user info of raw, a
// URL given without its "scheme://" (as "user:password@host:port"): what
// comes after its last "@"; ok is false unless what comes before that
// holds a ":" (a password after a user name). url.Parse reads such a URL
// as an opaque one of the scheme "user", and sees no user info in it.
func afterSchemelessUserinfo(raw string) (rest string, ok bool) {
	if strings.Contains(raw, "://") {
		return "", false
	}
	at := strings.LastIndex(raw, "@")
	if at < 0 || !strings.Contains(raw[:at], ":") {
		return "", false
	}
	return raw[at+1:], true
}

func hasAny(q url.Values, keys []string) bool {
	for _, k := range keys {
		if q.Has(k) {
			return true
		}
	}
	return false
}
