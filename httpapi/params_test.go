package httpapi_test

// Tests of what a request says outside its body: its query parameters and
// its headers. Each is given once, under a name its route takes, and a
// refusal names what was wrong and changes nothing stored.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/vigilhq/vigil/a2aserver"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/httpapi"
)

// paramsRequest sends a request with the given headers, each value its
// own header line, and returns the status and body. An event stream's
// answer is not read: its status is all a refusal is told apart by.
func paramsRequest(t *testing.T, s *e2eServer, method, path string, header http.Header, body string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range header {
		for _, v := range values {
			req.Header.Add(name, v)
		}
	}
	resp, err := e2eClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") == "text/event-stream" {
		return resp.StatusCode, nil
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// paramsAdmin is the admin's credential as one Authorization header.
func paramsAdmin() http.Header {
	return http.Header{"Authorization": {"Bearer " + e2eAdmin}}
}

// paramsWith is h with name given the values, one line each.
func paramsWith(h http.Header, name string, values ...string) http.Header {
	h = h.Clone()
	for _, v := range values {
		h.Add(name, v)
	}
	return h
}

// paramsSpawn is a spawn by the manager: a change, had it been let through.
const paramsSpawn = `{"task": "draft"}`

func TestAQueryParameterGivenTwiceIsRefusedNamingItAndStoresNothing(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	for _, path := range []string{
		"/v1/tools/sessions_spawn?as=" + e2eManager + "&as=" + e2eManager,
		"/v1/tools/sessions_spawn?as=" + e2eManager + "&as=" + e2eOpsMain,
	} {
		code, body := paramsRequest(t, s, http.MethodPost, path, paramsAdmin(), paramsSpawn)
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, `query parameter "as"`, "more than once")
	}
	for _, path := range []string{"/v1/events?after=1&after=2", "/v1/events?agent=main&agent=ops",
		"/v1/sessions/" + e2eManager + "/events?after=0&after=0"} {
		code, body := paramsRequest(t, s, http.MethodGet, path, paramsAdmin(), "")
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, "more than once")
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestBothNamesOfTheActingSessionParameterAreRefusedTogether(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	path := "/v1/tools/sessions_spawn?as=" + e2eManager + "&session=" + e2eOpsMain
	code, body := paramsRequest(t, s, http.MethodPost, path, paramsAdmin(), paramsSpawn)
	e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, "as", "session", "not both")
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestAnUnknownQueryParameterIsRefusedNamingIt(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	code, body := paramsRequest(t, s, http.MethodPost, "/v1/tools/sessions_spawn?as="+e2eManager+"&ass=x", paramsAdmin(), paramsSpawn)
	e2eCheckError(t, "?ass=", code, body, http.StatusBadRequest, gateway.CodeInvalid, `unknown query parameter "ass"`)
	for _, path := range []string{"/v1/events?limit=5", "/v1/sessions/" + e2eManager + "/events?limit=5"} {
		code, body := paramsRequest(t, s, http.MethodGet, path, paramsAdmin(), "")
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, `unknown query parameter "limit"`)
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestAMalformedQueryStringIsRefusedNotPartlyRead(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	for _, query := range []string{"as=%zz", "as=" + e2eManager + "&after=%", "as=" + e2eManager + ";x=1"} {
		// Read in part, the first would act as the person, not refuse.
		path := "/v1/tools/sessions_spawn?" + query
		code, body := paramsRequest(t, s, http.MethodPost, path, paramsAdmin(), paramsSpawn)
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, "query")
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestAnEmptyResumePositionIsRefusedNotReadAsNone(t *testing.T) {
	s := e2eStart(t)
	for _, path := range []string{"/v1/events?after=", "/v1/sessions/" + e2eManager + "/events?after="} {
		code, body := paramsRequest(t, s, http.MethodGet, path, paramsAdmin(), "")
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, "resume position")
	}
}

func TestTheOpenAPIDocumentListsEveryParameterEachStreamTakes(t *testing.T) {
	s := e2eStart(t)
	code, body := paramsRequest(t, s, http.MethodGet, httpapi.OpenAPIPath, nil, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", httpapi.OpenAPIPath, code, body)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Ref string `json:"$ref"`
			} `json:"parameters"`
		} `json:"paths"`
		Components struct {
			Parameters map[string]struct {
				Name string `json:"name"`
				In   string `json:"in"`
			} `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	want := []string{"header Vigil-Session", "query as", "query session", "query agent", "header Last-Event-ID", "query after"}
	for _, path := range []string{"/v1/events", "/v1/sessions/{key}/events"} {
		var got []string
		for _, p := range doc.Paths[path]["get"].Parameters {
			c := doc.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
			got = append(got, c.In+" "+c.Name)
		}
		for _, w := range want {
			if !slices.Contains(got, w) {
				t.Errorf("GET %s lists %q, not %s", path, got, w)
			}
		}
	}
}

func TestAVigilSessionHeaderGivenTwiceIsRefusedAndStoresNothing(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	for _, sessions := range [][]string{{e2eManager, e2eOpsMain}, {e2eManager, e2eManager}} {
		h := paramsWith(paramsAdmin(), httpapi.SessionHeader, sessions...)
		code, body := paramsRequest(t, s, http.MethodPost, "/v1/tools/sessions_spawn", h, paramsSpawn)
		e2eCheckError(t, "two Vigil-Session headers", code, body, http.StatusBadRequest, gateway.CodeInvalid,
			"Vigil-Session", "more than once")
	}
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestAnAuthorizationHeaderGivenTwiceIsRefusedAndStoresNothing(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	h := paramsWith(paramsAdmin(), "Authorization", "Bearer "+e2eMain)
	h.Set(httpapi.SessionHeader, e2eManager)
	code, body := paramsRequest(t, s, http.MethodPost, "/v1/tools/sessions_spawn", h, paramsSpawn)
	e2eCheckError(t, "two Authorization headers", code, body, http.StatusUnauthorized, gateway.CodeUnauthenticated,
		"Authorization", "more than once")
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}

func TestAnAuthorizationThatIsNotOneBearerTokenIsRefusedSayingWhy(t *testing.T) {
	s := e2eStart(t)
	for value, want := range map[string]string{
		"Basic " + e2eAdmin:                    "not Bearer",
		"Bearer " + e2eAdmin + " " + e2eMain:   "one token",
		"Bearer":                               "one token",
		e2eAdmin:                               "Bearer",
		"Bearer not-a-token-of-this-gateway-x": "a valid bearer token is required",
	} {
		code, body := paramsRequest(t, s, http.MethodPost, "/v1/tools/sessions_list",
			http.Header{"Authorization": {value}}, `{}`)
		e2eCheckError(t, value, code, body, http.StatusUnauthorized, gateway.CodeUnauthenticated, want)
	}
}

func TestALastEventIDGivenTwiceIsRefused(t *testing.T) {
	s := e2eStart(t)
	for _, path := range []string{"/v1/events", "/v1/sessions/" + e2eManager + "/events"} {
		code, body := paramsRequest(t, s, http.MethodGet, path, paramsWith(paramsAdmin(), "Last-Event-ID", "0", "1"), "")
		e2eCheckError(t, path, code, body, http.StatusBadRequest, gateway.CodeInvalid, "Last-Event-ID", "more than once")
	}
}

func TestARefusalShowsABoundedPrefixOfAHugeValueNotAllOfIt(t *testing.T) {
	s := e2eStart(t)
	huge := strings.Repeat("x", 900<<10)
	long := strings.Repeat("y", 200<<10) // within a request line's and a header's limits
	admin := paramsAdmin()
	for _, tc := range []struct {
		name, method, path string
		header             http.Header
		body               string
		status             int
		code               string
		says               []string
	}{
		{"a key in the body", http.MethodPost, "/v1/tools/session_status", admin, `{"sessionKey": "agent:` + huge + `"}`,
			400, gateway.CodeInvalid, []string{`"agent:xxx`, "longer than 512 bytes"}},
		{"an agent id in the body", http.MethodPost, "/v1/tools/sessions_list", admin, `{"agentId": "` + huge + `"}`,
			400, gateway.CodeInvalid, []string{`"xxx`, "invalid agent id"}},
		{"a key in the path", http.MethodPost, "/v1/sessions/agent:" + long + "/turn", admin, `{}`,
			400, gateway.CodeInvalid, []string{`"agent:yyy`, "longer than 512 bytes"}},
		{"a key in the query", http.MethodPost, "/v1/tools/sessions_list?as=agent:" + long, admin, `{}`,
			400, gateway.CodeInvalid, []string{`"agent:yyy`, "acting session"}},
		{"a key in a header", http.MethodPost, "/v1/tools/sessions_list", paramsWith(admin, httpapi.SessionHeader, "agent:"+long), `{}`,
			400, gateway.CodeInvalid, []string{`"agent:yyy`, "acting session"}},
		{"a field's name", http.MethodPost, "/v1/tools/sessions_list", admin, `{"` + huge + `": 1}`,
			400, gateway.CodeInvalid, []string{`unknown field "xxx`}},
		{"a field's name given twice", http.MethodPost, "/v1/tools/sessions_list", admin, `{"` + long + `": 1, "` + long + `": 1}`,
			400, gateway.CodeInvalid, []string{`field "yyy`, "more than once"}},
		{"a number", http.MethodPost, "/v1/tools/sessions_list", admin, `{"limit": 1` + strings.Repeat("0", 900<<10) + `}`,
			400, gateway.CodeInvalid, []string{"field limit", "100"}},
		{"a query parameter's name", http.MethodPost, "/v1/tools/sessions_list?" + long + "=1", admin, `{}`,
			400, gateway.CodeInvalid, []string{`unknown query parameter "yyy`}},
		{"a resume position", http.MethodGet, "/v1/events?after=" + long, admin, "",
			400, gateway.CodeInvalid, []string{`resume position "yyy`}},
		{"a tool's name", http.MethodPost, "/v1/tools/" + long, admin, `{}`,
			404, gateway.CodeNotFound, []string{"no tool named", "yyy"}},
		{"an endpoint", http.MethodGet, "/v2/" + long, admin, "",
			404, gateway.CodeNotFound, []string{"no such endpoint", "/v2/yyy"}},
	} {
		code, body := paramsRequest(t, s, tc.method, tc.path, tc.header, tc.body)
		eb := e2eCheckError(t, tc.name, code, body, tc.status, tc.code, tc.says...)
		if len(eb.Error.Message) > 1024 {
			t.Errorf("%s: the refusal is %d bytes long: %.200s...", tc.name, len(eb.Error.Message), eb.Error.Message)
		}
	}
}

// A2A's refusals are JSON-RPC errors, a query's as much as a credential's.
func TestAnA2ARequestGivingAQueryParameterTwiceIsRefusedAsAJSONRPCError(t *testing.T) {
	s := e2eStart(t)
	path := a2aserver.Path + "?as=" + e2eManager + "&as=" + e2eOpsMain
	code, body := paramsRequest(t, s, http.MethodPost, path, paramsWith(paramsAdmin(), "Content-Type", "application/json"),
		`{"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": {"id": "t1"}}`)
	var answer struct {
		JSONRPC string `json:"jsonrpc"`
		Error   struct {
			Message string            `json:"message"`
			Data    map[string]string `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		t.Fatal(err)
	}
	if code != http.StatusBadRequest || answer.JSONRPC != "2.0" || answer.Error.Data["code"] != gateway.CodeInvalid ||
		!strings.Contains(answer.Error.Message, `query parameter "as" is given more than once`) {
		t.Fatalf("status %d, answer %s; want 400 and a JSON-RPC error naming ?as=", code, body)
	}
}

func TestAnEndpointCalledWithAMethodItDoesNotTakeIsRefused405NamingTheOnesItDoes(t *testing.T) {
	s := e2eStart(t)
	before := e2eSnapshot(t, s)
	for _, tc := range []struct{ method, path, allow string }{
		{http.MethodGet, "/v1/tools/sessions_spawn", "POST"},
		{http.MethodPut, "/v1/sessions/" + e2eManager + "/turn", "POST"},
		{http.MethodPost, "/v1/events", "GET, HEAD"},
	} {
		req, err := http.NewRequest(tc.method, s.URL+tc.path, strings.NewReader(paramsSpawn))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = paramsAdmin()
		resp, err := e2eClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		e2eCheckError(t, tc.method+" "+tc.path, resp.StatusCode, body, http.StatusMethodNotAllowed, "method_not_allowed",
			tc.method, "takes "+tc.allow)
		if got := resp.Header.Get("Allow"); got != tc.allow {
			t.Errorf("%s %s: Allow %q, want %q", tc.method, tc.path, got, tc.allow)
		}
	}
	code, body := paramsRequest(t, s, http.MethodGet, "/v1/nowhere", paramsAdmin(), "")
	e2eCheckError(t, "GET /v1/nowhere", code, body, http.StatusNotFound, gateway.CodeNotFound, "no such endpoint")
	e2eSameSnapshot(t, before, e2eSnapshot(t, s))
}
