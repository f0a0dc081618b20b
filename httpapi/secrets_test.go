package httpapi_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/gateway"
)

// A token in a URL lands in proxies' access logs, browser history and
// Referer headers, so the API never reads one there: only the
// Authorization header authenticates, and the query parameter is refused
// as one the route does not take, without being quoted.
func TestATokenInTheURLsQueryIsNeverTaken(t *testing.T) {
	s := e2eStart(t)
	for _, name := range []string{"token", "access_token", "authorization"} {
		path := "/v1/tools?" + name + "=" + url.QueryEscape(e2eAdmin)
		code, body := edgeRequest(t, s, http.MethodGet, path, nil, "")
		e2eCheckError(t, "?"+name+"=", code, body, http.StatusBadRequest, gateway.CodeInvalid, "unknown query parameter")
		if strings.Contains(string(body), e2eAdmin) {
			t.Errorf("?%s=: the refusal quotes the token: %s", name, body)
		}
	}
}
