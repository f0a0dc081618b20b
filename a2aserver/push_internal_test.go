package a2aserver

import (
	"context"
	"testing"

	vigil "github.com/vigilhq/vigil"
	"github.com/vigilhq/vigil/sessions"
)

func TestASweepLeavesRunningADeliveryStartedWhileItReadTheStoredConfigs(t *testing.T) {
	p := newPushes(&core{ctx: t.Context()})
	task := vigil.SessionRef{AgentID: "main", Key: "agent:main:main"}
	deleted := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "deleted"}
	goneCtx, _ := p.register(deleted) // its config was deleted: the read will not see it
	set := sessions.PushConfig{Session: task, Owner: "admin:root", ID: "set"}
	var setCtx context.Context
	p.configs = func(context.Context) ([]sessions.PushConfig, error) {
		// Set and started while the sweep reads: stored after what the
		// read sees.
		setCtx, _ = p.register(set)
		return nil, nil
	}
	if err := p.sweep(t.Context()); err != nil {
		t.Fatal(err)
	}
	if setCtx.Err() != nil || p.count() != 1 {
		t.Errorf("the delivery set while the sweep read was stopped (%v; %d running)", setCtx.Err(), p.count())
	}
	if goneCtx.Err() == nil {
		t.Error("the delivery whose config was deleted still runs")
	}
}
