package a2aserver

import (
	"context"
	"fmt"
	"iter"
	"strings"

	"github.com/a2aproject/a2a-go/a2a"

	"github.com/vigilhq/vigil/sessions"
)

// v03 is the binding of revision 0.3: the SDK's JSON-RPC binding decodes
// and encodes, and these methods (its RequestHandler) turn its types into
// the core's and back.
type v03 struct{ *core }

// Protocol revisions as push configs record them.
const (
	protocol03 = "0.3"
	protocol10 = "1.0"
)

// textOf is a message's text: its text parts joined by newlines. vigil's
// transcripts hold text, so any other part is refused rather than dropped.
func textOf(m *a2a.Message) (string, error) {
	if m == nil {
		return "", fmt.Errorf("message is required: %w", a2a.ErrInvalidParams)
	}
	var texts []string
	for _, p := range m.Parts {
		switch p := p.(type) {
		case a2a.TextPart:
			texts = append(texts, p.Text)
		case *a2a.TextPart:
			texts = append(texts, p.Text)
		default:
			return "", fmt.Errorf("vigil's sessions hold text: a %T part cannot be delivered: %w", p, a2a.ErrUnsupportedContentType)
		}
	}
	return strings.Join(texts, "\n"), nil
}

func sendOf03(p *a2a.MessageSendParams) (sendInput, error) {
	if p == nil {
		return sendInput{}, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	text, err := textOf(p.Message)
	if err != nil {
		return sendInput{}, err
	}
	return sendInput{text: text, taskID: string(p.Message.TaskID), contextID: p.Message.ContextID, meta: p.Message.Metadata}, nil
}

func state03(s taskState) a2a.TaskState {
	if s == stateInputRequired {
		return a2a.TaskStateInputRequired
	}
	return a2a.TaskStateWorking
}

func message03(m *textMessage) *a2a.Message {
	if m == nil {
		return nil
	}
	role := a2a.MessageRoleAgent
	if m.fromUser {
		role = a2a.MessageRoleUser
	}
	return &a2a.Message{ID: m.id, Role: role, TaskID: a2a.TaskID(m.task), ContextID: m.task,
		Parts: a2a.ContentParts{a2a.TextPart{Text: m.text}}}
}

func task03(t *taskView) *a2a.Task {
	at := t.at
	return &a2a.Task{ID: a2a.TaskID(t.key), ContextID: t.key, Metadata: t.meta,
		Status: a2a.TaskStatus{State: state03(t.state), Timestamp: &at, Message: message03(t.message)}}
}

// update03 is an update as revision 0.3 streams it; final is always false,
// since a session never finishes.
func update03(u *updateView) *a2a.TaskStatusUpdateEvent {
	at := u.at
	return &a2a.TaskStatusUpdateEvent{TaskID: a2a.TaskID(u.key), ContextID: u.key, Metadata: u.meta,
		Status: a2a.TaskStatus{State: state03(u.state), Message: message03(&u.message), Timestamp: &at}}
}

func event03(ev event) a2a.Event {
	if ev.task != nil {
		return task03(ev.task)
	}
	return update03(ev.update)
}

// OnGetTask is session_status: metadata.changesSince asks for the delta.
func (h v03) OnGetTask(ctx context.Context, q *a2a.TaskQueryParams) (*a2a.Task, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if q == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	since, err := metaInt(q.Metadata, MetaChangesSince)
	if err != nil {
		return nil, err
	}
	t, _, err := h.task(ctx, c, string(q.ID), since)
	if err != nil {
		return nil, err
	}
	return task03(t), nil
}

// OnCancelTask refuses: vigil does not run sessions.
func (h v03) OnCancelTask(ctx context.Context, id *a2a.TaskIDParams) (*a2a.Task, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if id == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	return nil, h.cancel(ctx, c, string(id.ID))
}

// OnSendMessage is sessions_spawn or sessions_send; the answer is the task.
func (h v03) OnSendMessage(ctx context.Context, p *a2a.MessageSendParams) (a2a.SendMessageResult, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	in, err := sendOf03(p)
	if err != nil {
		return nil, err
	}
	t, err := h.sentTask(ctx, c, in)
	if err != nil {
		return nil, err
	}
	return task03(t), nil
}

// OnSendMessageStream sends as OnSendMessage does, answers with the task,
// then follows it as tasks/resubscribe does.
func (h v03) OnSendMessageStream(ctx context.Context, p *a2a.MessageSendParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		in, err := sendOf03(p)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, c, &in, "", nil, func(ev event) bool { return yield(event03(ev), nil) },
			func(err error) { yield(nil, err) })
	}
}

// OnResubscribeToTask follows a task: first the task as it is, then its
// updates. Given metadata.stateVersion (the last version the client saw)
// and a session that moved past it, the second event says so.
func (h v03) OnResubscribeToTask(ctx context.Context, id *a2a.TaskIDParams) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		c, err := callerOf(ctx)
		if err != nil {
			yield(nil, rpcError(err))
			return
		}
		if id == nil {
			yield(nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams))
			return
		}
		seen, err := metaInt(id.Metadata, MetaStateVersion)
		if err != nil {
			yield(nil, err)
			return
		}
		h.stream(ctx, c, nil, string(id.ID), seen, func(ev event) bool { return yield(event03(ev), nil) },
			func(err error) { yield(nil, err) })
	}
}

// pushConfig03 is a stored config as revision 0.3 shows it: the token and
// the credentials are secrets, never shown back.
func pushConfig03(p sessions.PushConfig) *a2a.TaskPushConfig {
	out := &a2a.TaskPushConfig{TaskID: a2a.TaskID(p.Session.Key), Config: a2a.PushConfig{ID: p.ID, URL: p.URL}}
	if p.AuthScheme != "" {
		out.Config.Auth = &a2a.PushAuthInfo{Schemes: []string{p.AuthScheme}}
	}
	return out
}

// OnSetTaskPushConfig stores the config and starts its deliveries.
func (h v03) OnSetTaskPushConfig(ctx context.Context, p *a2a.TaskPushConfig) (*a2a.TaskPushConfig, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	spec := pushSpec{task: string(p.TaskID), id: p.Config.ID, url: p.Config.URL, token: p.Config.Token,
		field: "pushNotificationConfig.", schemeField: "authentication.schemes[0]"}
	if a := p.Config.Auth; a != nil {
		// The protocol lists the schemes the receiver takes; a delivery
		// can use one, the first.
		if len(a.Schemes) > 0 {
			spec.authScheme = a.Schemes[0]
		}
		spec.authCredentials = a.Credentials
	}
	cfg, err := h.setPush(ctx, c, spec, protocol03)
	if err != nil {
		return nil, err
	}
	return pushConfig03(cfg), nil
}

// OnGetTaskPushConfig shows one of the caller's own configs: the one
// named, or without a name any one.
func (h v03) OnGetTaskPushConfig(ctx context.Context, p *a2a.GetTaskPushConfigParams) (*a2a.TaskPushConfig, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	cfg, err := h.pushGet(ctx, c, string(p.TaskID), p.ConfigID)
	if err != nil {
		return nil, err
	}
	return pushConfig03(cfg), nil
}

// OnListTaskPushConfig lists the caller's own configs on the task.
func (h v03) OnListTaskPushConfig(ctx context.Context, p *a2a.ListTaskPushConfigParams) ([]*a2a.TaskPushConfig, error) {
	c, err := callerOf(ctx)
	if err != nil {
		return nil, rpcError(err)
	}
	if p == nil {
		return nil, fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	cfgs, err := h.pushList(ctx, c, string(p.TaskID))
	if err != nil {
		return nil, err
	}
	out := make([]*a2a.TaskPushConfig, 0, len(cfgs))
	for _, cfg := range cfgs {
		out = append(out, pushConfig03(cfg))
	}
	return out, nil
}

// OnDeleteTaskPushConfig stops and forgets one of the caller's configs;
// one it does not have is task not found, as revision 0.3 has it.
func (h v03) OnDeleteTaskPushConfig(ctx context.Context, p *a2a.DeleteTaskPushConfigParams) error {
	c, err := callerOf(ctx)
	if err != nil {
		return rpcError(err)
	}
	if p == nil {
		return fmt.Errorf("params are required: %w", a2a.ErrInvalidParams)
	}
	deleted, key, err := h.pushDelete(ctx, c, string(p.TaskID), p.ConfigID)
	if err != nil {
		return err
	}
	if !deleted {
		return fmt.Errorf("no push notification config %q of this credential on %s: %w", p.ConfigID, key, a2a.ErrTaskNotFound)
	}
	return nil
}

// OnGetExtendedAgentCard: the public card is the whole card.
func (h v03) OnGetExtendedAgentCard(ctx context.Context) (*a2a.AgentCard, error) {
	return nil, a2a.ErrAuthenticatedExtendedCardNotConfigured
}
