package mcpserver

// A subscription made by a 2026-07-28 listen hears its end however soon
// the end comes: the SDK lists the subscription only after the subscribe
// handler returns, and an end told before then would reach nobody.

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/vigilhq/vigil/gateway"
	"github.com/vigilhq/vigil/internal/gatewaytest"
)

func TestAListensSubscriptionHearsAnEndThatCameAsItWasMade(t *testing.T) {
	for _, c := range []struct {
		name   string
		ending error
		key    string
	}{
		{"deleted", &gateway.SessionDeletedError{Version: 3}, DeletedMetaKey},
		{"no longer followed", errors.New("the follower broke"), EndedMetaKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir() // outside the bubble: its cleanup outlives it
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				gw, err := gatewaytest.New(ctx, gatewaytest.Options{Path: filepath.Join(dir, "v.db")})
				if err != nil {
					t.Fatal(err)
				}
				defer gw.Close()
				subs := newSubscriptions(ctx, gw.Gateway, slog.New(slog.DiscardHandler), nil)
				var runs atomic.Int32
				subs.runFollower = func(f *gateway.Follower, fctx context.Context, r gateway.FollowReader) error {
					if runs.Add(1) == 1 {
						return c.ending
					}
					return f.Run(fctx, r)
				}
				// The follow does all it can before the SDK lists the
				// subscription: the widest the window gets.
				handled := make(chan struct{})
				subs.subscribed = func() {
					synctest.Wait()
					close(handled)
				}
				told := make(chan mcp.Meta, 16)
				srv := newServer(gw.Gateway, subs.log, func(*mcp.RequestExtra) (gateway.Caller, context.Context, bool) {
					c, err := gw.Gateway.ResolveCaller(ctx, gateway.Principal{Role: gateway.RoleAgent, ID: "main"}, "agent:main:main")
					return c, context.Background(), err == nil
				}, subs, nil)
				st, ct := mcp.NewInMemoryTransports()
				ss, err := srv.Connect(ctx, st, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer ss.Close()
				cs, err := mcp.NewClient(&mcp.Implementation{Name: "listen-end-test", Version: "1"}, &mcp.ClientOptions{
					ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
						told <- req.Params.Meta
					},
				}).Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: workerURI(0)}); err != nil {
					t.Fatal(err)
				}
				<-handled
				synctest.Wait()
				select {
				case meta := <-told:
					if meta[c.key] == nil {
						t.Fatalf("the listen's subscriber was told %v, want its end under %s", meta, c.key)
					}
				default:
					t.Fatalf("the listen's subscriber was never told its subscription ended; %d streams held",
						gw.Gateway.Held(gateway.HoldStream))
				}
			})
		})
	}
}
