package gateway

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessionkey"
	"github.com/vigilhq/vigil/sessions"
)

// A child whose run is open and has made no progress for a while needs
// attention: it is stuck, or, when the last thing it did was answer a
// person, it waits on that person. The gateway looks at every open run on
// a cadence and records one attention event (vigil.KindAttention) for each
// such change, which its watchers, its parent and its agent's main session
// are told of as of any material change. Progress is any change of the
// session's row (a message in or out, a goal change, a reset): after it, a
// session that stalls again is a new change, announced again.

// DefaultStuckAfter is how long an open run may go without progress before
// its session needs attention.
const DefaultStuckAfter = 15 * time.Minute

// Attention states, as an attention event's payload.attention gives them.
const (
	AttentionStuck           = "stuck"
	AttentionWaitingOnPerson = "waiting_on_person"
)

// attentionLook is how many of a session's newest messages are read to
// find the one its last reply answers.
const attentionLook = 20

// attentionEvery is how often the gateway looks: a few times per
// StuckAfter, at most once a minute.
func attentionEvery(stuckAfter time.Duration) time.Duration {
	return max(time.Second, min(stuckAfter/4, time.Minute))
}

// watchAttention looks at the open runs every AttentionEvery until the
// gateway closes.
func (g *Gateway) watchAttention() {
	every := g.opts.AttentionEvery
	if every == 0 {
		every = attentionEvery(g.opts.StuckAfter)
	}
	g.every(every, every, func(ctx context.Context) {
		if _, err := g.CheckAttention(ctx); err != nil && ctx.Err() == nil && !errors.Is(err, vigil.ErrClosed) {
			g.log.Warn("look at open runs for attention", "err", err)
		}
	})
}

// every runs do once first has passed, then every interval, on the
// gateway's clock until the gateway closes, each run after the one before
// has returned. The clock's callback only signals, so a manual clock's
// Advance never runs do itself; the first timer is armed before every returns, so a clock moved
// right after it moves that timer.
func (g *Gateway) every(first, interval time.Duration, do func(ctx context.Context)) {
	tick := make(chan struct{}, 1)
	arm := func(after time.Duration) clockTimer {
		return g.clk.AfterFunc(after, func() {
			select {
			case tick <- struct{}{}:
			default:
			}
		})
	}
	ctx := g.loopCtx
	timer := arm(first)
	g.loops.Add(1)
	go func() {
		defer g.loops.Done()
		for {
			select {
			case <-ctx.Done():
				timer.Stop()
				return
			case <-tick:
			}
			do(ctx)
			timer = arm(interval)
		}
	}()
}

// clockTimer is a timer of the gateway's clock.
type clockTimer interface{ Stop() bool }

// CheckAttention looks at every open run once, and records an attention
// event for each session that has come to need attention since its last
// progress, once per such change (a repeat, also by another gateway on the
// same database, records nothing: the event's dedupe key names the change).
// It returns how many it recorded. A gateway does this on its own on a
// cadence (Options.AttentionEvery); tests and tools may call it.
func (g *Gateway) CheckAttention(ctx context.Context) (int, error) {
	if g.opts.StuckAfter < 0 {
		return 0, nil
	}
	runs, err := g.store.OpenRuns(ctx)
	if err != nil {
		return 0, fmt.Errorf("read open runs: %w", err)
	}
	now := g.clk.Now().UnixMilli()
	recorded := 0
	for _, run := range runs {
		s, ok, err := g.store.Session(ctx, run.Session)
		if err != nil {
			return recorded, fmt.Errorf("read session %s: %w", run.Session, err)
		}
		since := max(s.UpdatedAt, run.StartedAt)
		if !ok || now-since < g.opts.StuckAfter.Milliseconds() {
			continue
		}
		state, err := g.attentionOf(ctx, s)
		if err != nil {
			return recorded, err
		}
		summary := "session stuck: its run made no progress for " + shortDuration(g.opts.StuckAfter)
		if state == AttentionWaitingOnPerson {
			summary = "session waiting on a person"
		}
		// On the session's lock, which every change of its row and its
		// runs takes, the stall is looked at again: a session deleted
		// meanwhile, or whose row or run changed (progress, an end), is
		// no longer the stall that was looked at, and is left to the
		// next look.
		err = g.writeOn(ctx, run.Session, func(ctx context.Context, txn *vigil.Txn, tx sessions.Tx) error {
			cur, ok, err := tx.GetSession(ctx, run.Session)
			if err != nil || !ok || cur.UpdatedAt != s.UpdatedAt || cur.SessionID != s.SessionID {
				return err
			}
			if r, ok, err := tx.GetRun(ctx, run.RunID); err != nil || !ok || r.EndedAt != 0 {
				return err
			}
			parent, err := liveParent(ctx, tx, s)
			if err != nil {
				return err
			}
			res, err := txn.Record(ctx, vigil.Record{Session: run.Session, SessionID: s.SessionID, Kind: vigil.KindAttention,
				ActorType: vigil.ActorSystem, RunID: run.RunID, Summary: summary,
				Payload:   []byte(`{"attention":"` + state + `"}`),
				DedupeKey: "attention:" + state + ":" + run.RunID + ":" + strconv.FormatInt(since, 10),
				Parent:    parent, Notify: []string{sessionkey.MainKey(run.Session.AgentID)}})
			if err == nil && res.Appended {
				recorded++
			}
			return err
		})
		if err != nil {
			return recorded, fmt.Errorf("record the attention %s needs: %w", run.Session, err)
		}
	}
	return recorded, nil
}

// attentionOf tells a stalled session's state: waiting on a person when
// its newest message is its own reply to a person's message, else stuck.
func (g *Gateway) attentionOf(ctx context.Context, s sessions.Session) (string, error) {
	ms, err := g.store.LatestMessages(ctx, s.Ref, math.MaxInt64, attentionLook)
	if err != nil {
		return "", fmt.Errorf("read the newest messages of %s: %w", s.Ref, err)
	}
	if len(ms) == 0 || ms[0].Role != sessions.RoleAssistant {
		return AttentionStuck, nil
	}
	reply := ms[0]
	for _, m := range ms[1:] {
		if m.Role == sessions.RoleUser && (reply.ReplyTo == 0 || m.ID == reply.ReplyTo) {
			if m.ActorType == vigil.ActorHuman {
				return AttentionWaitingOnPerson, nil
			}
			break
		}
	}
	return AttentionStuck, nil
}

// shortDuration writes d the way people say it: 15m, 2h, 90s.
func shortDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.Round(time.Second).String()
}
