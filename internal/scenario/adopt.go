package scenario

// The ops of adopted sessions: adopt, and the upstream checks that follow
// an adopted Claude session's transcript (upstream_missing, upstream_tick,
// upstream_human). They run the rules the gateway runs (package
// adoption), on real transcript files in a scratch directory, with the
// scenario's clock.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/adoption"
	"github.com/vigilhq/vigil/internal/jsstring"
	"github.com/vigilhq/vigil/sessions"
	"github.com/vigilhq/vigil/upstream"
)

// The defaults of adopt, as the scenario format gives them.
const (
	defaultCatalog = upstream.Claude
	defaultHost    = sessions.HostGateway
	defaultText    = "hello from the terminal"
	// maxTicks bounds one op's checks, which a scenario runs one after
	// the other.
	maxTicks = 1000
)

// upstreamState is what the scenario keeps of adopted sessions' upstream
// transcripts; their links are in the store.
type upstreamState struct {
	dir    string            // the transcripts' scratch directory, made on first use
	files  map[string]string // session key -> its transcript
	echoes map[string][]string
	rows   int // rows written, which number them
	// follow is the check loop of the running process (nil until the
	// first check after an open): its missing counts live in memory, so a
	// restart starts them again.
	follow *adoption.Loop
}

// transcript is key's transcript path, made (empty) when missing.
func (r *Runner) transcript(key string) (string, error) {
	u := &r.up
	if u.dir == "" {
		dir, err := os.MkdirTemp("", "vigil-sim-upstream-")
		if err != nil {
			return "", fmt.Errorf("scratch directory of the transcripts: %w", err)
		}
		u.dir, u.files, u.echoes = dir, map[string]string{}, map[string][]string{}
	}
	path, ok := u.files[key]
	if !ok {
		path = filepath.Join(u.dir, fmt.Sprintf("upstream-%d.jsonl", len(u.files)+1))
		u.files[key] = path
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return "", err
	}
	return path, f.Close()
}

func (r *Runner) follower() upstream.Follower {
	f := upstream.Follower{Clock: r.clk}
	if r.up.dir != "" {
		f.Roots = []string{r.up.dir}
	}
	return f
}

// sessionStore is the scenario's store as the sessions' store it also is.
func (r *Runner) sessionStore() (sessions.Store, error) {
	st, ok := r.store.(sessions.Store)
	if !ok {
		return nil, errors.New("the scenario's store keeps no sessions, so no upstream links")
	}
	return st, nil
}

// adopt continues a session from a coding agent's catalog: `adopted`, and
// with link (the default) a link to its transcript at the transcript's
// current end. As the reference's Claude catalog, only a transcript of the
// gateway's own host is linked.
func (r *Runner) adopt(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	if _, err := r.sessionStore(); err != nil {
		return nil, err
	}
	r.touch(ref.Key)
	a := adoption.Adoption{Session: ref, CatalogID: defaultCatalog, HostID: defaultHost, ThreadID: ref.Key}
	for _, f := range []struct {
		to    *string
		given *string
	}{{&a.CatalogID, o.CatalogID}, {&a.HostID, o.HostID}, {&a.ThreadID, o.ThreadID}} {
		if f.given != nil {
			*f.to = *f.given
		}
	}
	if (o.Link == nil || *o.Link) && a.HostID == sessions.HostGateway {
		path, err := r.transcript(ref.Key)
		if err != nil {
			return nil, err
		}
		m, err := r.follower().Start(ctx, upstream.Claude, path)
		if err != nil {
			return nil, err
		}
		a.Marker = &m
	}
	var adopted adoption.Adopted
	err = r.engine.Update(ctx, func(ctx context.Context, txn *vigil.Txn) error {
		tx, err := sessions.TxOf(txn)
		if err != nil {
			return err
		}
		adopted, err = adoption.Adopt(ctx, txn, tx, a)
		return err
	}, vigil.Changing(ref))
	if err != nil {
		return nil, err
	}
	out, err := r.recorded(ctx, ref, adopted.Recorded)
	if err != nil {
		return nil, err
	}
	link, err := linkObject(adopted.Link)
	if err != nil {
		return nil, err
	}
	return out.Set("sessionKey", ref.Key).Set("link", link), nil
}

// linkObject is a link as adopt prints it: the marker without its
// transcript's path, which is in a scratch directory.
func linkObject(l *sessions.Link) (any, error) {
	if l == nil {
		return nil, nil
	}
	m, err := upstream.ParseMarker(l.Marker)
	if err != nil {
		return nil, err
	}
	return Object{}.Set("catalogId", l.CatalogID).Set("hostId", l.HostID).Set("threadId", l.ThreadID).
		Set("upstreamKind", m.Format).Set("marker", Object{}.Set("offset", m.Offset).Set("generation", m.Generation)), nil
}

// upstreamMissing removes the session's transcript (unless remove is
// false) and runs the checks (three unless ticks says).
func (r *Runner) upstreamMissing(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	if o.Remove == nil || *o.Remove {
		if path, ok := r.up.files[ref.Key]; ok {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, err
			}
		}
	}
	return r.upstreamTicks(ctx, o, 3)
}

// upstreamHuman appends a person's turn to the session's Claude
// transcript (declared one of the session's own messages with echo) and
// runs the checks (one unless ticks says).
func (r *Runner) upstreamHuman(ctx context.Context, o op) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	path, ok := r.up.files[ref.Key]
	if !ok {
		return nil, errors.New("upstream_human: session has no upstream transcript (adopt it first)")
	}
	text := defaultText
	if o.Text != nil {
		text = *o.Text
	}
	if o.Echo {
		r.up.echoes[ref.Key] = append(r.up.echoes[ref.Key], text)
	}
	thread := ref.Key
	if st, err := r.sessionStore(); err == nil {
		if l, ok, err := st.UpstreamLink(ctx, ref); err != nil {
			return nil, err
		} else if ok {
			thread = l.ThreadID
		}
	}
	r.up.rows++
	row := claudeRow(r.up.rows, thread, text, r.clk.Now())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(row); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	return r.upstreamTicks(ctx, o, 1)
}

// upstreamTicks runs ticks checks (defaultTicks unless the op says), each
// of every adopted session that has a link and a watcher, as the
// reference's monitor tick does, and prints what they did to the op's
// session.
func (r *Runner) upstreamTicks(ctx context.Context, o op, defaultTicks int64) (Object, error) {
	ref, err := r.ensure("session", o.Session)
	if err != nil {
		return nil, err
	}
	ticks, given, err := integer("ticks", o.Ticks)
	if err != nil {
		return nil, err
	}
	if !given {
		ticks = defaultTicks
	}
	if ticks < 0 || ticks > maxTicks {
		return nil, fmt.Errorf("ticks must be an integer from 0 to %d", maxTicks)
	}
	st, err := r.sessionStore()
	if err != nil {
		return nil, err
	}
	before, err := r.engine.Version(ctx, ref)
	if err != nil {
		return nil, err
	}
	if r.up.follow == nil {
		r.up.follow = &adoption.Loop{
			Backend: adoption.Local{Engine: r.engine, Store: st, Host: sessions.HostGateway, OwnOf: r.ownOf},
			// As the oracle's monitor, whose one provider is Claude's.
			Follows: func(catalog string) bool { return catalog == upstream.Claude },
		}
	}
	r.up.follow.Follower = r.follower()
	for range ticks {
		if _, err := r.up.follow.Tick(ctx); err != nil {
			return nil, err
		}
	}
	after, err := r.engine.Version(ctx, ref)
	if err != nil {
		return nil, err
	}
	_, linked, err := st.UpstreamLink(ctx, ref)
	if err != nil {
		return nil, err
	}
	return Object{}.Set("recorded", after != before).Set("stateVersion", after).Set("ticks", ticks).Set("linked", linked), nil
}

// ownOf gives a session's own messages: a scenario's sessions have no
// transcript, so they are the texts its upstream_human ops declared as
// echoes.
func (r *Runner) ownOf(_ context.Context, ref vigil.SessionRef) (adoption.Own, error) {
	var own adoption.Own
	for _, t := range r.up.echoes[ref.Key] {
		own.Digests = append(own.Digests, adoption.Digest(t))
	}
	return own, nil
}

// claudeRow is the row upstream_human appends: a person's turn as Claude
// Code writes one, byte for byte the row the reference's run appends (the
// same members in the same order, its JSON string escapes), so that the
// transcripts' offsets, which markers hold, are the same on both sides.
func claudeRow(n int, thread, text string, at time.Time) []byte {
	return fmt.Appendf(nil, `{"type":"user","uuid":"u-%d","sessionId":%s,"timestamp":"%s","message":{"role":"user","content":%s}}`+"\n",
		n, jsstring.Quote(thread), at.UTC().Format("2006-01-02T15:04:05.000Z"), jsstring.Quote(text))
}
