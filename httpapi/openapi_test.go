package httpapi_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"testing"

	"github.com/vigilhq/vigil/httpapi"
)

const openAPIPath = "../docs/openapi.json"

// TestOpenAPIDocumentIsCurrent fetches the document a live server serves,
// without a credential, and checks docs/openapi.json is the same. Run with
// -update to rewrite the file from the server's.
func TestOpenAPIDocumentIsCurrent(t *testing.T) {
	srv, _ := docServer(t)
	resp, err := http.Get(srv.URL + httpapi.OpenAPIPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	served, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s: %s, Content-Type %q:\n%s", httpapi.OpenAPIPath, resp.Status, resp.Header.Get("Content-Type"), served)
	}
	if *docUpdate {
		if err := os.WriteFile(openAPIPath, served, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log("rewrote", openAPIPath)
		return
	}
	committed, err := os.ReadFile(openAPIPath)
	if err != nil {
		t.Fatalf("%v; write it with: go test ./httpapi -run TestOpenAPIDocumentIsCurrent -update", err)
	}
	if !bytes.Equal(committed, served) {
		t.Fatalf("%s is not the document the tool registry gives (its first difference is at line %d); "+
			"refresh it with: go test ./httpapi -run TestOpenAPIDocumentIsCurrent -update", openAPIPath, firstDiffLine(committed, served))
	}
}

func firstDiffLine(a, b []byte) int {
	la, lb := bytes.Split(a, []byte("\n")), bytes.Split(b, []byte("\n"))
	for i := range min(len(la), len(lb)) {
		if !bytes.Equal(la[i], lb[i]) {
			return i + 1
		}
	}
	return min(len(la), len(lb)) + 1
}

// TestOpenAPIDocumentIsDeterministic builds the document twice: a map
// ranged over in a changing order would make the committed file flap.
func TestOpenAPIDocumentIsDeterministic(t *testing.T) {
	srv, _ := docServer(t)
	var docs [2]string
	for i := range docs {
		r := docDo(srv, "GET "+httpapi.OpenAPIPath)
		if r.err != nil {
			t.Fatal(r.err)
		}
		docs[i] = string(r.body)
	}
	if docs[0] != docs[1] {
		t.Fatal("two requests for the document got different bytes")
	}
}
