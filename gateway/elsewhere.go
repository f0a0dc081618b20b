package gateway

import (
	"context"
	"errors"
	"fmt"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

// Several gateways can share one database. What one of them commits
// reaches the others' in-memory state through the store's change
// announcements (pgstore.Store.Follow): notices through the engine's
// Refresh, and the two kinds of news below through these methods.

// MessageArrived tells the gateway that another process appended message
// id to session's transcript. The gateway reads it back and publishes it
// like its own: a turn parked here on that session returns with it, and
// the session's live stream shows it. A reply that names the message it
// answers (replyTo) completes a sessions_send waiting here for it; a reply
// without replyTo only ever answers sends waiting on the gateway that
// stored it, so one reply never completes two sends. A message deleted
// meanwhile is ignored, and so is one that nobody here could be waiting
// for: with no listener on the session and no send waiting on it, it is
// not read at all, so a gateway pays for others' messages only where it
// has someone to give them to.
func (g *Gateway) MessageArrived(ctx context.Context, session vigil.SessionRef, id int64) error {
	if !g.opts.Hub.Listened(session.Key) && !g.awaited(session) {
		return nil
	}
	msgs, err := g.store.Messages(ctx, session, id-1, 1)
	if err != nil {
		return fmt.Errorf("read message %d of %s: %w", id, session, err)
	}
	if len(msgs) == 0 || msgs[0].ID != id {
		return nil
	}
	m := msgs[0]
	switch m.Role {
	case sessions.RoleAssistant:
		if m.ReplyTo != 0 {
			g.answer(session, m)
		}
		g.publishMessage(LiveReply, m)
	case sessions.RoleUser:
		g.publishMessage(LiveMessage, m)
	}
	return nil
}

// EventsAppendedElsewhere tells the gateway that another process appended
// events to the log, so live readers of the whole log read on from the
// store.
func (g *Gateway) EventsAppendedElsewhere() { g.opts.Hub.appendedElsewhere() }

// HearCommits says whether, from now on, the events every process on the
// shared store commits, this one's included, reach the gateway through
// CommitsHeard in commit order (a change listener is connected): the
// followers of sessions are then given them without reading the store.
func (g *Gateway) HearCommits(on bool) { g.opts.Hub.HearCommits(on) }

// CommitsHeard hands on what a change listener heard of the commits of
// every process on the shared store, in one step for the followers
// (Hub.Committed): the events of the commits (given only while commits
// are heard, HearCommits), and the sessions other processes deleted,
// whose followers end once given the changes heard with the deletion
// that came before it. Sends and turns waiting here on a deleted
// session end too, unless it was made again since: a session made again
// is told from the one deleted by its version, and only the sessions
// something waits on here are read from the store for it. A reset
// heard among the events ends the sends waiting here on the session's
// earlier incarnations.
func (g *Gateway) CommitsHeard(ctx context.Context, c Heard) error {
	g.opts.Hub.Committed(c)
	for _, e := range c.Events {
		if e.Kind == vigil.KindSessionReset {
			g.sessionReset(vigil.SessionRef{AgentID: e.AgentID, Key: e.SessionKey}, e.SessionID)
		}
	}
	for _, d := range c.Deleted {
		if !g.awaited(d.Session) && !g.parkedOn(d.Session) {
			continue
		}
		v, err := g.eng.Version(ctx, d.Session)
		if err != nil {
			return fmt.Errorf("read the version of %s, deleted elsewhere: %w", d.Session, err)
		}
		if v <= d.Version {
			g.endWaits(d.Session)
		}
	}
	return nil
}

// sessionDeleted ends everything that follows or waits on d's session,
// once its deletion committed here: the hub tells its streams and
// subscriptions (Hub.Deleted), a send waiting for its reply answers an
// error, and a turn parked on it ends not found.
func (g *Gateway) sessionDeleted(d SessionDeletion) {
	g.opts.Hub.Deleted(d)
	g.endWaits(d.Session)
}

// endWaits ends the sends and turns waiting on ref: it was deleted.
func (g *Gateway) endWaits(ref vigil.SessionRef) {
	g.failWaiters(ref, "the session was deleted")
	g.endParked(ref)
}

// Recheck makes up for news from other processes that may have been lost
// (announcements made while this gateway was not listening): parked turns
// look at the store again, sends waiting here for a reply complete if
// one was stored (naming their message) through another process, those
// still waiting on an incarnation of their target that a reset replaced
// end as the reset would have ended them, and the turns and sends
// waiting on a session vigil no longer knows end as its deletion would
// have ended them. Call it after reconnecting to the announcements, and
// now and then.
func (g *Gateway) Recheck(ctx context.Context) error {
	g.opts.Hub.Recheck()
	// Each goes on whatever the other met.
	return errors.Join(g.recheckGone(ctx), g.recheckWaiters(ctx))
}

// recheckGone ends the turns parked on sessions deleted unheard; the
// sends waiting on a session, and the turns parked on it with them, are
// rechecked with the sends (recheckSends). A session deleted and made
// again since is not found by this: it exists, and what waits on it
// waits on until its timeout. A turn of a main session may park before
// the session is made, waiting for the first message, which makes it
// (Turn): one vigil knows nothing of was perhaps never made, so such a
// turn waits on too.
func (g *Gateway) recheckGone(ctx context.Context) error {
	g.waitMu.Lock()
	parked := make([]vigil.SessionRef, 0, len(g.parked))
	for ref := range g.parked {
		if _, ok := g.waiters[ref]; !ok && kindOf(ref.Key) != sessions.KindMain {
			parked = append(parked, ref)
		}
	}
	g.waitMu.Unlock()
	for _, ref := range parked {
		exists, err := g.sessionExists(ctx, ref)
		if err != nil {
			return fmt.Errorf("recheck whether %s, waited on, exists: %w", ref, err)
		}
		if !exists {
			g.endWaits(ref)
		}
	}
	return nil
}

func (g *Gateway) recheckWaiters(ctx context.Context) error {
	g.waitMu.Lock()
	from := map[vigil.SessionRef]int64{}
	for target, ws := range g.waiters {
		for _, w := range ws {
			if cur, ok := from[target]; !ok || w.messageID < cur {
				from[target] = w.messageID
			}
		}
	}
	g.waitMu.Unlock()
	// Each session goes on whatever the others met: a failed read of one
	// must not keep replies to others waiting to the next recheck.
	var errs []error
	for target, after := range from {
		if err := g.recheckSends(ctx, target, after); err != nil {
			errs = append(errs, fmt.Errorf("recheck the sends waiting on %s: %w", target, err))
		}
	}
	return errors.Join(errs...)
}

// recheckSends reads from the store what the sends waiting here on
// target may have missed of other processes' news, their messages being
// after message after: a reply stored completes its send; then, a reset
// ends the sends to the incarnations it replaced, and a deletion ends
// them all, as the news would have.
func (g *Gateway) recheckSends(ctx context.Context, target vigil.SessionRef, after int64) error {
	if err := g.answerStored(ctx, target, after); err != nil {
		return err
	}
	// After the replies: one stored is the send's answer, whatever came
	// after it.
	if !g.awaited(target) {
		return nil
	}
	s, ok, err := g.store.Session(ctx, target)
	if err != nil {
		return fmt.Errorf("read the incarnation of %s: %w", target, err)
	}
	if ok {
		g.sessionReset(target, s.SessionID)
		return nil
	}
	exists, err := g.sessionExists(ctx, target)
	if err != nil {
		return fmt.Errorf("read whether %s exists: %w", target, err)
	}
	if !exists {
		g.endWaits(target)
	}
	return nil
}

// answerStored hands the replies stored on target after message after
// that name the message they answer to the sends waiting here for them.
// It reads page by page while a send waits on target, to the last
// message: a reply may lie behind any number of others. A reply naming
// no message is left alone: it only ever answers a send waiting on the
// gateway that stored it (MessageArrived).
func (g *Gateway) answerStored(ctx context.Context, target vigil.SessionRef, after int64) error {
	for g.awaited(target) {
		msgs, err := g.store.Messages(ctx, target, after, maxRecheck)
		if err != nil {
			return fmt.Errorf("read the messages of %s after %d: %w", target, after, err)
		}
		for _, m := range msgs {
			if m.Role == sessions.RoleAssistant && m.ReplyTo != 0 {
				g.answer(target, m)
			}
		}
		if len(msgs) < maxRecheck {
			return nil
		}
		after = msgs[len(msgs)-1].ID
	}
	return nil
}

// maxRecheck bounds the messages one read of answerStored takes.
const maxRecheck = 500
