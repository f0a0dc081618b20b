package gateway_test

import (
	"context"
	"sync/atomic"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
	"github.com/vigilhq/vigil/internal/pgtest"
	"github.com/vigilhq/vigil/internal/testwait"
	"github.com/vigilhq/vigil/sessions"
)

// pausingStore holds a write back right after it has read one session's
// row, once it is armed: the write then stands between its read and its
// writes while the test lets another gateway act.
type pausingStore struct {
	gatewaytest.Store
	target vigil.SessionRef
	// run, when set, is the run whose read in a write is held back
	// instead; committed, when set, holds back a read of target's row
	// outside any write (Store.Session) instead.
	run       string
	committed bool
	armed     atomic.Bool
	read      chan struct{} // closed once the armed read is answered
	resume    chan struct{} // closed to let the write go on
}

// pause holds the caller back, once, if the store is armed.
func (s *pausingStore) pause() {
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.resume
	}
}

func (s *pausingStore) Session(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	row, ok, err := s.Store.Session(ctx, ref)
	if s.committed && ref == s.target {
		s.pause()
	}
	return row, ok, err
}

func (s *pausingStore) BeginWrite(ctx context.Context) (vigil.Tx, error) {
	tx, err := s.Store.BeginWrite(ctx)
	if err != nil {
		return nil, err
	}
	return pausingTx{tx, s}, nil
}

type pausingTx struct {
	vigil.Tx
	s *pausingStore
}

func (t pausingTx) Rows() any { return pausingRows{t.Tx.Rows().(sessions.Tx), t.s} }

type pausingRows struct {
	sessions.Tx
	s *pausingStore
}

func (r pausingRows) GetSession(ctx context.Context, ref vigil.SessionRef) (sessions.Session, bool, error) {
	s, ok, err := r.Tx.GetSession(ctx, ref)
	if r.s.run == "" && !r.s.committed && ref == r.s.target {
		r.s.pause()
	}
	return s, ok, err
}

func (r pausingRows) GetRun(ctx context.Context, runID string) (sessions.Run, bool, error) {
	run, ok, err := r.Tx.GetRun(ctx, runID)
	if r.s.run != "" && runID == r.s.run {
		r.s.pause()
	}
	return run, ok, err
}

// A write that reads a session's row and writes it back, on one gateway
// of a database, keeps what another gateway committed to the row between
// its read and its write: here a goal set, which must not be lost.
func TestAChangeOfASessionOnOneGatewayKeepsAGoalSetOnAnotherMeanwhile(t *testing.T) {
	pgtest.Require(t)
	writes := []struct {
		name string
		run  func(g *gateway.Gateway, c gateway.Caller, key string) error
	}{
		{"reply", func(g *gateway.Gateway, c gateway.Caller, key string) error {
			_, err := g.Reply(ctx, c, gateway.ReplyInput{SessionKey: key, Text: "done"})
			return err
		}},
		{"reset", func(g *gateway.Gateway, c gateway.Caller, key string) error {
			_, err := g.Reset(ctx, c, gateway.SessionInput{SessionKey: key})
			return err
		}},
		{"turn reading its inbox", func(g *gateway.Gateway, c gateway.Caller, key string) error {
			zero := 0
			_, err := g.Turn(ctx, c, gateway.TurnInput{SessionKey: key, WaitSeconds: &zero})
			return err
		}},
		{"goal status", func(g *gateway.Gateway, c gateway.Caller, key string) error {
			_, err := g.SetGoal(ctx, c, gateway.GoalInput{SessionKey: key, Action: "status", Status: "paused"})
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			schema := pgtest.FreshSchema(t)
			other := gatewayOnPostgres(t, schema)
			child := vigil.MustRef(graphStory(t, other))
			if _, err := other.SetGoal(ctx, caller(t, other, person, ""), gateway.GoalInput{SessionKey: child.Key,
				Action: "set", Objective: "draft the report"}); err != nil {
				t.Fatal(err)
			}
			paused := &pausingStore{target: child, read: make(chan struct{}), resume: make(chan struct{})}
			gw := gatewaytest.Open(t, gatewaytest.Options{Schema: schema, Wrap: func(inner gatewaytest.Store) gatewaytest.Store {
				paused.Store = inner
				return paused
			}})
			g := gw.Gateway
			by := caller(t, g, mainAgent, child.Key)

			paused.armed.Store(true)
			done := make(chan error, 1)
			go func() { done <- w.run(g, by, child.Key) }()
			<-paused.read
			set := make(chan error, 1)
			setBy := caller(t, other, person, "")
			go func() {
				_, err := other.SetGoal(ctx, setBy, gateway.GoalInput{SessionKey: child.Key, Action: "set",
					Objective: "publish the report"})
				set <- err
			}()
			look := pgtest.Connect(t)
			defer look.Close(context.Background())
			testwait.Until(t, "the goal is set or waits for the paused write", func() bool {
				return len(set) > 0 || blockedBehind(t, look, 0) > 0
			})
			close(paused.resume)
			if err := <-done; err != nil {
				t.Fatalf("%s: %v", w.name, err)
			}
			if err := <-set; err != nil {
				t.Fatalf("setting the goal: %v", err)
			}
			s, ok, err := gw.Postgres.Session(ctx, child)
			if err != nil || !ok {
				t.Fatalf("the session: %v, %v", ok, err)
			}
			if s.Goal == nil || s.Goal.Objective != "publish the report" {
				t.Fatalf("the goal set meanwhile was lost to the %s: %+v", w.name, s.Goal)
			}
		})
	}
}
