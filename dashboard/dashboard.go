// Package dashboard serves the web dashboard: one page at / and its assets
// under /ui/, all embedded in the binary. The page holds no data of its own;
// it reads and changes sessions through the HTTP API with the token a
// person types in, so serving it needs no credential and reveals nothing.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/vigilhq/vigil/internal/quote"
)

//go:embed assets
var assets embed.FS

// AssetPrefix is the path under which the page's scripts, styles and
// icons are served.
const AssetPrefix = "/ui/"

// contentSecurityPolicy allows the page nothing but its own assets and the
// API on the same origin: no inline script, no third-party host, no
// framing. A token typed into the page can therefore only travel to the
// gateway that served it.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

type asset struct {
	body        []byte
	contentType string
	etag        string
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Handler serves the page at / and its assets at /ui/NAME. Mount it for
// exactly those paths; anything else it answers with a JSON 404.
func Handler() http.Handler {
	files := map[string]asset{}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		files[strings.TrimPrefix(p, "assets/")] = asset{body: body, contentType: contentTypes[path.Ext(p)],
			etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
		return nil
	})
	if err != nil {
		panic("dashboard: embedded assets: " + err.Error()) // the embed directive guarantees they are there
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := ""
		switch {
		case r.URL.Path == "/":
			name = "index.html"
		case strings.HasPrefix(r.URL.Path, AssetPrefix):
			name = strings.TrimPrefix(r.URL.Path, AssetPrefix)
		}
		a, ok := files[name]
		if !ok || name == "" {
			notFound(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		// A page of another origin that opened the dashboard's window keeps
		// no handle on it, with which it could later send the window (and
		// the token a person types there) to a look-alike of its own.
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		// Revalidated on every load (cheaply, by ETag), so a new binary's
		// page never runs against an old script.
		h.Set("Cache-Control", "no-cache")
		h.Set("ETag", a.etag)
		if a.contentType != "" {
			h.Set("Content-Type", a.contentType)
		}
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
	})
}

func notFound(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = "not_found", "no such endpoint: "+r.Method+" "+quote.Bounded(r.URL.Path)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	json.NewEncoder(w).Encode(body)
}
