package client_test

import (
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vigilhq/vigil/client"
)

// fakeStream is a server answering a stream's nth connection (from 1)
// with answer(n, w).
func fakeStream(t *testing.T, answer func(n int32, w http.ResponseWriter)) *client.Client {
	t.Helper()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer(requests.Add(1), w)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestAStreamRefusedAtItsLimitIsReportedAsDroppedWhenAsked(t *testing.T) {
	t.Parallel()
	c := fakeStream(t, func(n int32, w http.ResponseWriter) {
		if n == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, `{"error":{"code":"too_many_requests","message":"stream limit reached"}}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 7\nevent: bookmark\ndata: {\"sequence\":7}\n\n")
	})
	st := pull(t, c.Events(bounded(t), client.EventsOptions{After: new(int64(1)), ReportDrops: true}))
	d, ok := st.event(t).(client.Dropped)
	if ae := (*client.APIError)(nil); !ok || !errors.As(d.Cause, &ae) || !errors.Is(ae, client.ErrTooManyRequests) {
		t.Fatalf("after a refusal at the limit: %#v, want Dropped with the 429", d)
	}
	resumed(t, <-st.ahead(), 1)
	if ev := st.event(t); ev != (client.Bookmark{Position: 7}) {
		t.Fatalf("after resuming: %#v", ev)
	}
}

func TestAnEventWhoseDataIsCorruptEndsTheStreamNamingItsID(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	c := fakeStream(t, func(_ int32, w http.ResponseWriter) {
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "id: 7\nevent: bookmark\ndata: {\"sequence\":7}\n\nid: 8\nevent: signal\ndata: {\"sequence\":8,\n\n")
	})
	for name, opts := range map[string]client.EventsOptions{"plain": {}, "raw": {Raw: true}} {
		requests.Store(0)
		st := pull(t, c.Events(bounded(t), opts))
		st.event(t) // the bookmark
		ev, err, ok := st.next()
		if !ok || err == nil || !strings.Contains(err.Error(), "a corrupt signal event (last event id 8)") {
			t.Fatalf("%s: after a corrupt event: %#v, %v, %v; want the stream to fail naming it", name, ev, err, ok)
		}
		if _, _, ok := st.next(); ok {
			t.Fatalf("%s: the stream went on after the corrupt event", name)
		}
		if n := requests.Load(); n != 1 {
			t.Fatalf("%s: %d connections, want one", name, n)
		}
	}
}

func TestAnEventOfATypeTheClientDoesNotKnowIsSkippedWhateverItsData(t *testing.T) {
	t.Parallel()
	c := fakeStream(t, func(n int32, w http.ResponseWriter) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "event: forecast\ndata: rain\n\nid: 7\nevent: bookmark\ndata: {\"sequence\":7}\n\n")
	})
	st := pull(t, c.Events(bounded(t), client.EventsOptions{}))
	if ev := st.event(t); ev != (client.Bookmark{Position: 7}) {
		t.Fatalf("after an unknown event: %#v, want the bookmark", ev)
	}
}

func TestANegativeIdleTimeoutIsRefusedNamingTheOption(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	c := fakeStream(t, func(n int32, w http.ResponseWriter) { requests.Store(n) })
	check := func(how string, err error) {
		t.Helper()
		var ae *client.APIError
		if !errors.As(err, &ae) || !errors.Is(ae, client.ErrInvalidArgument) || !strings.Contains(ae.Message, "IdleTimeout") {
			t.Fatalf("%s with IdleTimeout -1s: %v, want an invalid argument naming IdleTimeout", how, err)
		}
	}
	idle := -time.Second
	streams := map[string]iter.Seq2[client.Event, error]{
		"Events":        c.Events(bounded(t), client.EventsOptions{IdleTimeout: idle}),
		"SessionEvents": c.SessionEvents(bounded(t), "agent:ops:x", client.SessionEventsOptions{IdleTimeout: idle}),
	}
	for how, seq := range streams {
		for _, err := range seq {
			check(how, err)
			break
		}
	}
	_, err := c.OpenEvents(bounded(t), client.EventsOptions{IdleTimeout: idle})
	check("OpenEvents", err)
	_, err = c.OpenSessionEvents(bounded(t), "agent:ops:x", client.SessionEventsOptions{IdleTimeout: idle})
	check("OpenSessionEvents", err)
	if n := requests.Load(); n != 0 {
		t.Fatalf("%d requests sent, want none", n)
	}
}
