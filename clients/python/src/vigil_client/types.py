"""The tools' outputs and the streams' events, as dataclasses.

Field names are the gateway's, in snake_case (``stateVersion`` is
``state_version``); times are milliseconds since the Unix epoch. Fields a
newer gateway adds are ignored when decoding.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Optional, Union


def camel(name: str) -> str:
    """The wire name of a snake_case field: state_version is stateVersion."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def snake(name: str) -> str:
    """The field name of a camelCase wire name."""
    return re.sub(r"([A-Z])", lambda m: "_" + m.group(1).lower(), name)


def decode(cls: Any, value: Any) -> Any:
    """Builds cls (a dataclass, list[...], Optional[...] or a plain type)
    from decoded JSON."""
    origin = typing.get_origin(cls)
    if origin in (Union, types.UnionType):
        args = [a for a in typing.get_args(cls) if a is not type(None)]
        return None if value is None else decode(args[0], value)
    if origin is list:
        (item,) = typing.get_args(cls)
        return [decode(item, v) for v in (value or [])]
    if origin is dict:
        return dict(value or {})
    if dataclasses.is_dataclass(cls):
        hints = typing.get_type_hints(cls)
        kwargs = {}
        for f in dataclasses.fields(cls):
            if not f.init:
                continue
            key = camel(f.name)
            if key in value:
                kwargs[f.name] = decode(hints[f.name], value[key])
        return cls(**kwargs)
    return value


@dataclass
class GoalView:
    objective: str = ""
    status: str = ""
    updated_at: int = 0


@dataclass
class SessionRow:
    session_key: str = ""
    agent_id: str = ""
    session_id: str = ""
    kind: str = ""
    label: str = ""
    spawned_by: str = ""
    goal: Optional[GoalView] = None
    #: Set once the session has logged changes.
    state_version: int = 0
    #: hosted (the gateway keeps it) or recorded (a runtime elsewhere keeps
    #: it and records what happens in it).
    state: str = ""
    #: vigil, or for a recorded session the runtime its recorder named,
    #: else "agent:<agent id>" (that agent's own runtime).
    hosted_by: str = ""
    created_at: int = 0
    updated_at: int = 0


@dataclass
class ListOutput:
    sessions: list[SessionRow] = field(default_factory=list)
    next_cursor: str = ""


@dataclass
class MessageView:
    id: int = 0
    role: str = ""
    actor_type: str = ""
    actor_id: str = ""
    channel: str = ""
    content: str = ""
    reply_to: int = 0
    created_at: int = 0


@dataclass
class HistoryOutput:
    session_key: str = ""
    messages: list[MessageView] = field(default_factory=list)
    truncated: bool = False
    next_after_id: int = 0
    next_before_id: int = 0


@dataclass
class SendOutput:
    """``status`` is accepted (not waiting), ok (replied), timeout or error."""

    status: str = ""
    session_key: str = ""
    message_id: int = 0
    reply: str = ""
    error: str = ""
    #: Set when a watch was asked: whether it is registered.
    watched: Optional[bool] = None


@dataclass
class SpawnOutput:
    status: str = ""
    child_session_key: str = ""
    run_id: str = ""


@dataclass
class AgentEvent:
    """A change of one session as agents see it (never message content).
    ``sequence`` is the session's state version after it. A session's
    stream gives one for each change."""

    sequence: int = 0
    kind: str = ""
    actor_type: str = ""
    actor_id: str = ""
    run_id: str = ""
    occurred_at: int = 0
    summary: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class StateChanges:
    """The changes after ``changes_since``. While ``truncated``, ask again
    from ``next_changes_since``; ``history_gap`` means retention removed
    some: re-read the session instead."""

    events: list[AgentEvent] = field(default_factory=list)
    truncated: bool = False
    next_changes_since: int = 0
    earliest_available_sequence: int = 0
    history_gap: bool = False


@dataclass
class StatusOutput:
    session_key: str = ""
    agent_id: str = ""
    #: True for a hosted session and a recorded one; False when vigil knows
    #: nothing of it (state "absent": never created, or deleted).
    exists: bool = False
    #: hosted, recorded or absent.
    state: str = ""
    hosted_by: str = ""
    session_id: str = ""
    kind: str = ""
    label: str = ""
    spawned_by: str = ""
    goal: Optional[GoalView] = None
    created_at: int = 0
    updated_at: int = 0
    state_version: int = 0
    state_changes: Optional[StateChanges] = None
    #: With wait_for_version: true when the version was not reached in time.
    timed_out: bool = False


@dataclass
class UnwatchOutput:
    session_key: str = ""
    unwatched: bool = False


@dataclass
class GoalOutput:
    session_key: str = ""
    goal: Optional[GoalView] = None
    state_version: int = 0


@dataclass
class NoticeActor:
    type: str = ""
    id: str = ""


@dataclass
class NoticeData:
    """A notice as data, beside its text. ``type`` is changed, deleted or
    created; ``target`` (and ``target_agent_id``) the session it is about.
    A changed notice also has ``changes_since``, the state version to
    reconcile from (session_status changes_since), and the ``kinds`` of the
    changes it covers and the ``actors`` who made them, each once;
    ``attention`` the states its attention changes announced; ``partial``
    says some covered changes could not be read (pruned, or the target
    deleted since)."""

    type: str = ""
    target: str = ""
    target_agent_id: str = ""
    changes_since: Optional[int] = None
    kinds: list[str] = field(default_factory=list)
    actors: list[NoticeActor] = field(default_factory=list)
    attention: list[str] = field(default_factory=list)
    partial: bool = False


@dataclass
class SystemEventView:
    text: str = ""
    context_key: str = ""
    #: The session a stale-state notice is about.
    target: str = ""
    #: A notice as data (None for an entry that is no notice).
    data: Optional[NoticeData] = None


@dataclass
class PendingOutput:
    session_key: str = ""
    events: list[SystemEventView] = field(default_factory=list)
    #: True when the full queue left out entries still owed, not in events.
    left_out: bool = False


@dataclass
class GraphCursor:
    """A watcher's cursor on a target: last_seen (L), notified (N) and
    material (M) versions, and the queued notice while one is pending.
    ambient marks an agent's main session watching one of its group, room
    or channel sessions since a person's first message there."""

    watcher: str = ""
    target: str = ""
    target_agent_id: str = ""
    last_seen: int = 0
    notified: int = 0
    material: int = 0
    pending: bool = False
    notice: str = ""
    ambient: bool = False
    updated_at: int = 0


@dataclass
class GraphOutput:
    cursors: list[GraphCursor] = field(default_factory=list)
    next_cursor: str = ""


@dataclass
class TurnBookmark:
    state_version: int = 0


@dataclass
class TurnOutput:
    """What a turn consumed: the lines for the next prompt (notices among
    them; ``events`` are the same entries in the same order, each notice
    with its data), the new inbound messages, the targets acknowledged and
    the follow-up notices queued. ``timed_out`` with a ``bookmark`` when
    the wait ended with no work."""

    turn_id: str = ""
    session_key: str = ""
    system_events: list[str] = field(default_factory=list)
    events: list[SystemEventView] = field(default_factory=list)
    messages: list[MessageView] = field(default_factory=list)
    acknowledged: list[str] = field(default_factory=list)
    follow_ups: list[str] = field(default_factory=list)
    timed_out: bool = False
    bookmark: Optional[TurnBookmark] = None


@dataclass
class ReplyOutput:
    message_id: int = 0
    delivered: bool = False


@dataclass
class ResetOutput:
    session_key: str = ""
    session_id: str = ""


@dataclass
class DeleteOutput:
    session_key: str = ""
    deleted: bool = False


@dataclass
class RunEndOutput:
    run_id: str = ""
    session_key: str = ""
    outcome: str = ""
    recorded: bool = False


@dataclass
class CompactOutput:
    session_key: str = ""
    replaced: int = 0
    recorded: bool = False
    state_version: int = 0


@dataclass
class RecordOutput:
    session_key: str = ""
    recorded: bool = False
    sequence: int = 0
    state_version: int = 0
    reason: str = ""


@dataclass
class LinkView:
    """An adopted session's link to its coding agent's transcript: where
    following stands (marker), and for a follower elsewhere the digests of
    the session's newest messages sent through vigil."""

    session_key: str = ""
    agent_id: str = ""
    catalog_id: str = ""
    host_id: str = ""
    thread_id: str = ""
    upstream_kind: str = ""
    path: str = ""
    marker: dict[str, Any] = field(default_factory=dict)
    updated_at: int = 0
    own_digests: list[str] = field(default_factory=list)
    seen_message: int = 0


@dataclass
class AdoptOutput:
    session_key: str = ""
    recorded: bool = False
    state_version: int = 0
    link: Optional[LinkView] = None
    watched: bool = False


@dataclass
class UpstreamLinksOutput:
    links: list[LinkView] = field(default_factory=list)
    next_cursor: str = ""


# ---- stream events ----


@dataclass
class LogEvent:
    """An event of the signal log (the log stream); ``sequence`` is global."""

    sequence: int = 0
    session_key: str = ""
    agent_id: str = ""
    session_id: str = ""
    kind: str = ""
    actor_type: str = ""
    actor_id: str = ""
    run_id: str = ""
    occurred_at: int = 0
    recorded_at: int = 0
    summary: str = ""
    payload: dict[str, Any] = field(default_factory=dict)


@dataclass
class NoticeView:
    text: str = ""
    target: str = ""
    data: Optional[NoticeData] = None


@dataclass
class LiveEvent:
    """A wake, notice, message or reply of the followed session. Live
    events are not replayed after a reconnection: on Resumed, take a turn."""

    type: str = ""
    session_key: str = ""
    notice: Optional[NoticeView] = None
    message: Optional[MessageView] = None


@dataclass
class Bookmark:
    """A quiet stream's position: the log's sequence, or the session's
    state version. The stream resumes from it after a drop."""

    position: int = 0


@dataclass
class HistoryGap:
    """Events after ``requested`` were pruned: re-read what you follow. The
    stream goes on with every event still retained, after ``resume_after``."""

    requested: int = 0
    pruned_watermark: int = 0
    earliest_available_sequence: int = 0
    message: str = ""
    resume_after: int = field(default=0, init=False)


@dataclass
class Lagged:
    """A session stream fell behind and was cut; it reconnects at once."""

    message: str = ""


@dataclass
class SessionDeleted:
    """The session followed was deleted, at ``state_version``: a session
    stream's last event. The stream ends rather than resuming; a session
    made again with the same key is a new one, followed anew without a
    position."""

    session_key: str = ""
    agent_id: str = ""
    state_version: int = 0
    message: str = ""


@dataclass
class Resumed:
    """The stream reconnected after a drop, after ``position`` (None when it
    had seen none yet and started again live). Live events of the outage
    were missed: a runtime takes a turn."""

    position: Optional[int] = None
    cause: Optional[BaseException] = None


@dataclass
class Dropped:
    """With ``report_drops``: the stream's connection just ended, or an
    attempt to connect failed (``cause`` says why: a TooManyRequestsError
    is the credential's stream limit), and the stream is about to try
    again; a Resumed follows once it has connected. One for each failed
    attempt. As the Go client's Dropped."""

    cause: Optional[BaseException] = None


Event = Union[AgentEvent, LogEvent, LiveEvent, Bookmark, HistoryGap, Lagged, SessionDeleted, Resumed, Dropped]
