"""The client: one method per tool, the turn and reply of a runtime, and
the two event streams."""

from __future__ import annotations

import http.client
import json
import math
import re
import socket
import threading
import urllib.parse
from typing import Any, Callable, Iterator, Optional

from . import types as t
from .errors import APIError, InvalidArgumentError, TransportError, error_from, error_in, not_the_gateways

SESSION_HEADER = "Vigil-Session"

#: How long a call may take beyond any wait it asks for.
_MARGIN = 30.0

#: The most an answer read into memory may hold, as in the Go client: the
#: gateway's largest (a page of 200 messages of at most 64 KiB, escaped)
#: stays well under it. Past it what answers is not a gateway.
_MAX_ANSWER = 64 << 20


def _read_answer(op: str, resp: http.client.HTTPResponse) -> bytes:
    """The answer's body, refused past _MAX_ANSWER bytes."""
    raw = resp.read(_MAX_ANSWER + 1)
    if len(raw) > _MAX_ANSWER:
        raise TransportError(f"vigil: {op}: the answer is larger than {_MAX_ANSWER >> 20} MiB: "
                             "what answers is not a vigil gateway")
    return raw


def _without_userinfo(url: str) -> str:
    """The URL as a refusal shows it: all before its last "@" after the
    scheme (a user name and password, or more) hidden, as a URL that is
    refused cannot be trusted to parse."""
    at = url.rfind("@")
    if at < 0:
        return url
    scheme = url.find("://")
    start = scheme + 3 if 0 <= scheme < at else 0
    return url[:start] + "xxxxx" + url[at:]


def _header_safe(key: str) -> bool:
    """Whether a header can carry the key as it is: printable ASCII only."""
    return key.isascii() and key.isprintable()


def _quote(op: str, key: str, safe: str, what: str = "session key") -> str:
    """The key percent-encoded as UTF-8 for a URL."""
    try:
        return urllib.parse.quote(key, safe=safe)
    except UnicodeEncodeError as e:
        raise InvalidArgumentError(op, 0, "invalid_argument", f"{what} {key!r} is not valid Unicode: {e.reason}") from e


#: The longest wait any call may ask for (a send's timeoutSeconds is capped
#: at 300), and the longest idle timeout of a stream: a socket's timeout
#: past the platform's clock overflows.
_MAX_WAIT = 300.0
_MAX_IDLE = 86400.0


def _seconds(value: Any) -> Optional[float]:
    """value as seconds, or None unless it is a finite number of at least 0."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def _wait(value: Any) -> float:
    """How long the client allows a call for the wait it asks for: none for
    a value the gateway refuses at once, as it answers without waiting."""
    seconds = _seconds(value)
    return 0.0 if seconds is None else min(seconds, _MAX_WAIT)


def _check_key(op: str, key: Any, what: str = "session key") -> None:
    if key is not None and not isinstance(key, str):
        raise InvalidArgumentError(op, 0, "invalid_argument", f"{what} {key!r} is not a string")


def _input(**fields: Any) -> dict[str, Any]:
    """A tool's input: the given fields under their wire names."""
    return {t.camel(k): v for k, v in fields.items() if v is not None}


class Client:
    """A client of one gateway (``vigil serve``).

    ``token`` is the bearer credential (a gateway without tokens needs
    none); ``session`` the session the client acts as (the Vigil-Session
    header): without one an operator or admin token acts as a person, an
    agent token as its agent's main session. ``timeout`` bounds a call, in
    seconds, beyond any wait it asks for. A Client is safe to share between
    threads: each call has its own connection.
    """

    def __init__(self, base_url: str = "http://127.0.0.1:7317", *, token: Optional[str] = None,
                 session: Optional[str] = None, timeout: float = 30.0):
        if not isinstance(base_url, str):
            raise ValueError(f"vigil: base URL {base_url!r}: want http(s)://host[:port] as a string")
        try:
            u = urllib.parse.urlsplit(base_url.strip())
        except ValueError:
            u = None
        if u is None or u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"vigil: base URL {_without_userinfo(base_url)!r}: want http(s)://host[:port]")
        if u.username is not None or u.password is not None:
            # Not shown: the password is a secret, and it would not be sent.
            raise ValueError("vigil: the base URL holds credentials, which are not sent: give the token as token=")
        written = base_url.strip()
        if "?" in written or "#" in written:
            raise ValueError(f"vigil: base URL {base_url!r}: a query or fragment is not sent: want http(s)://host[:port][/path]")
        # Checked on the text as written: urlsplit drops a tab or newline,
        # and http.client refuses a blank or a character beyond ASCII only
        # when a call is made.
        if not re.fullmatch(r"[!-~]*", written) or re.search(r"%(?![0-9A-Fa-f]{2})", written):
            raise ValueError(f"vigil: base URL {base_url!r}: a blank, a control character, a character beyond ASCII or "
                             "a % without two hex digits: write the URL percent-escaped")
        try:
            u.port
        except ValueError:
            raise ValueError(f"vigil: base URL {base_url!r}: the port is not a number from 0 to 65535") from None
        self._scheme, self._host, self._port = u.scheme, u.hostname, u.port
        self._prefix = u.path.rstrip("/")
        seconds = _seconds(timeout)
        if not seconds or seconds > _MAX_IDLE:
            raise ValueError(f"vigil: timeout must be a number of seconds above 0 and at most {_MAX_IDLE:g}, got {timeout!r}")
        if token is not None and not (isinstance(token, str) and _header_safe(token)):
            raise ValueError("vigil: the token must be a string of printable ASCII, as a header carries it")
        self.base_url = base_url
        self.token, self.session, self.timeout = token, session, timeout

    def as_session(self, key: Optional[str]) -> "Client":
        """A copy acting as the session key (None: a person, or an agent
        token's main session)."""
        return Client(self.base_url, token=self.token, session=key, timeout=self.timeout)

    # ---- plumbing ----

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        if self._scheme == "https":
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def _headers(self, session: Optional[str], body: bool) -> dict[str, str]:
        h = {"Accept": "application/json"}
        if body:
            h["Content-Type"] = "application/json"
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if session and _header_safe(session):
            h[SESSION_HEADER] = session
        return h

    def _target(self, op: str, path: str, session: Optional[str]) -> str:
        """The request target of path acting as session. A key a header
        cannot carry goes as the ?as= parameter instead: http.client sends a
        header's text as Latin-1, refusing what Latin-1 lacks, and the
        gateway reads UTF-8."""
        _check_key(op, session)
        if not session or _header_safe(session):
            return self._prefix + path
        return self._prefix + path + ("&" if "?" in path else "?") + "as=" + _quote(op, session, "")

    def _request(self, op: str, method: str, path: str, session: Optional[str], body: Any = None,
                 wait: float = 0.0) -> Any:
        try:
            data = None if body is None else json.dumps(body, allow_nan=False).encode("utf-8")
        except (TypeError, ValueError) as e:
            raise InvalidArgumentError(op, 0, "invalid_argument", f"the input cannot be sent as JSON: {e}") from e
        target = self._target(op, path, session)
        conn = self._connect(self.timeout + _wait(wait))
        try:
            try:
                try:
                    conn.request(method, target, body=data, headers=self._headers(session, data is not None))
                except (BrokenPipeError, ConnectionResetError):
                    # The gateway answers a body over its limit before
                    # reading it, and closes the connection: its answer
                    # says why the rest could not be sent. Without one the
                    # read below fails, and that is the error.
                    pass
                resp = conn.getresponse()
                raw = _read_answer(op, resp)
            except (OSError, http.client.HTTPException) as e:
                raise TransportError(f"vigil: {op}: {e}") from e
            if resp.status != 200:
                raise error_from(op, resp.status, raw, resp.headers)
            error = not_the_gateways(op, resp.status, resp.getheader("Content-Type"), target.split("?", 1)[0],
                                     "application/json")
            if error is not None:
                raise error
            try:
                answer = json.loads(raw.decode("utf-8"))
            except ValueError as e:
                raise TransportError(f"vigil: {op}: the answer is not JSON: {e}") from e
            error = error_in(op, resp.status, answer, raw, resp.headers)
            if error is not None:
                raise error
            return answer
        finally:
            conn.close()

    def call(self, tool: str, input: Optional[dict[str, Any]] = None, *, wait: float = 0.0) -> dict[str, Any]:
        """Calls any tool by name with its input (wire names) and returns its
        output as decoded JSON. ``wait`` is how long the call may wait on
        purpose (a long poll), added to the timeout."""
        if not isinstance(tool, str) or not tool or not _header_safe(tool) or any(ch in tool for ch in "/?#% "):
            raise InvalidArgumentError(tool, 0, "invalid_argument", f"{tool!r} is not a tool's name")
        return self._request(tool, "POST", "/v1/tools/" + tool, self.session, input or {}, wait)

    def _session_path(self, op: str, key: str, verb: str) -> str:
        _check_key(op, key)
        if not key or not key.strip():
            raise InvalidArgumentError(op, 0, "invalid_argument", "session_key is required")
        if key in (".", ".."):
            # A URL resolves such a segment away, so the request would reach another route.
            raise InvalidArgumentError(op, 0, "invalid_argument",
                                       f"session key {key!r} cannot name a session's route: it is not agent-qualified")
        return "/v1/sessions/" + _quote(op, key, ":") + "/" + verb

    def health(self) -> None:
        """Raises unless the gateway answers GET /healthz."""
        self._request("healthz", "GET", "/healthz", None)

    def tools(self) -> list[dict[str, Any]]:
        """Every tool with its description and input and output JSON schemas."""
        return self._request("list tools", "GET", "/v1/tools", self.session)["tools"]

    # ---- the tools ----

    def sessions_list(self, *, agent_id: Optional[str] = None, kind: Optional[str] = None,
                      cursor: Optional[str] = None, limit: Optional[int] = None) -> t.ListOutput:
        """The sessions the caller may reach, a page at a time."""
        return t.decode(t.ListOutput, self.call("sessions_list", _input(agent_id=agent_id, kind=kind, cursor=cursor, limit=limit)))

    def sessions_history(self, session_key: str, *, agent_id: Optional[str] = None, after_id: Optional[int] = None,
                         before_id: Optional[int] = None, limit: Optional[int] = None) -> t.HistoryOutput:
        """A page of a session's transcript, oldest first: the oldest messages
        after after_id, or the newest before before_id (one above every id,
        such as 2**63 - 1, reads the newest); not both."""
        return t.decode(t.HistoryOutput, self.call("sessions_history", _input(
            session_key=session_key, agent_id=agent_id, after_id=after_id, before_id=before_id, limit=limit)))

    def sessions_send(self, session_key: Optional[str] = None, *, message: str, label: Optional[str] = None,
                      agent_id: Optional[str] = None, timeout_seconds: Optional[int] = None,
                      watch: Optional[bool] = None, channel: Optional[str] = None,
                      if_state_version: Optional[int] = None, if_synced: Optional[bool] = None) -> t.SendOutput:
        """A message to a session (by key, label or agent) and, unless
        timeout_seconds is 0, the wait for its reply. Without an acting
        session the message is a person's."""
        wait = 30 if timeout_seconds is None else timeout_seconds
        return t.decode(t.SendOutput, self.call("sessions_send", _input(
            session_key=session_key, label=label, agent_id=agent_id, message=message,
            timeout_seconds=timeout_seconds, watch=watch, channel=channel,
            if_state_version=if_state_version, if_synced=if_synced), wait=wait))

    def sessions_spawn(self, task: str, *, label: Optional[str] = None, agent_id: Optional[str] = None,
                       if_state_version: Optional[int] = None, if_synced: Optional[bool] = None) -> t.SpawnOutput:
        """A child of the acting session; the caller becomes its parent."""
        return t.decode(t.SpawnOutput, self.call("sessions_spawn", _input(
            task=task, label=label, agent_id=agent_id, if_state_version=if_state_version, if_synced=if_synced)))

    def session_status(self, session_key: str, *, agent_id: Optional[str] = None,
                       changes_since: Optional[int] = None, limit: Optional[int] = None,
                       wait_for_version: Optional[int] = None, timeout_seconds: Optional[int] = None) -> t.StatusOutput:
        """A session's facts and state version; with changes_since, the exact
        changes after that version. Acknowledges nothing."""
        wait = 0 if wait_for_version is None else (30 if timeout_seconds is None else timeout_seconds)
        return t.decode(t.StatusOutput, self.call("session_status", _input(
            session_key=session_key, agent_id=agent_id, changes_since=changes_since, limit=limit,
            wait_for_version=wait_for_version, timeout_seconds=timeout_seconds), wait=wait))

    def sessions_unwatch(self, session_key: str, *, agent_id: Optional[str] = None) -> t.UnwatchOutput:
        """The acting session stops watching a session."""
        return t.decode(t.UnwatchOutput, self.call("sessions_unwatch", _input(session_key=session_key, agent_id=agent_id)))

    def session_goal(self, session_key: str, action: str, *, agent_id: Optional[str] = None,
                     objective: Optional[str] = None, status: Optional[str] = None,
                     if_state_version: Optional[int] = None, if_synced: Optional[bool] = None) -> t.GoalOutput:
        """Set, edit, change the status of, or clear a session's goal."""
        return t.decode(t.GoalOutput, self.call("session_goal", _input(
            session_key=session_key, agent_id=agent_id, action=action, objective=objective, status=status,
            if_state_version=if_state_version, if_synced=if_synced)))

    def session_wait(self, *, timeout_seconds: Optional[int] = None) -> t.TurnOutput:
        """The model-facing form of a turn, for the acting session."""
        wait = 30 if timeout_seconds is None else timeout_seconds
        return t.decode(t.TurnOutput, self.call("session_wait", _input(timeout_seconds=timeout_seconds), wait=wait))

    def session_pending(self, session_key: str) -> t.PendingOutput:
        """A session's queued notices, without consuming them."""
        return t.decode(t.PendingOutput, self.call("session_pending", _input(session_key=session_key)))

    def sessions_graph(self, *, agent_id: Optional[str] = None, cursor: Optional[str] = None,
                       limit: Optional[int] = None) -> t.GraphOutput:
        """Who watches whom, with each cursor's versions and pending notice."""
        return t.decode(t.GraphOutput, self.call("sessions_graph", _input(agent_id=agent_id, cursor=cursor, limit=limit)))

    def session_turn(self, session_key: str, *, wait_seconds: Optional[int] = None) -> t.TurnOutput:
        """Takes a session's turn (POST /v1/sessions/{key}/turn), acting as the
        session itself: waits up to wait_seconds (0-60, default 30) for
        work, then consumes its queued notices (acknowledging them) and
        unread messages. Not idempotent: a runtime that loses the answer
        re-reads what it follows."""
        path = self._session_path("session_turn", session_key, "turn")
        wait = 30 if wait_seconds is None else wait_seconds
        body = _input(session_key=session_key, wait_seconds=wait_seconds)
        return t.decode(t.TurnOutput, self._request("session_turn", "POST", path, session_key, body, wait))

    def session_reply(self, session_key: str, text: str, *, reply_to: Optional[int] = None) -> t.ReplyOutput:
        """Answers as a session (POST /v1/sessions/{key}/reply), acting as the
        session itself; completes the send waiting for it."""
        path = self._session_path("session_reply", session_key, "reply")
        body = _input(session_key=session_key, text=text, reply_to=reply_to)
        return t.decode(t.ReplyOutput, self._request("session_reply", "POST", path, session_key, body))

    def session_reset(self, session_key: str, *, agent_id: Optional[str] = None,
                      if_state_version: Optional[int] = None, if_synced: Optional[bool] = None) -> t.ResetOutput:
        """A new incarnation of the session; its watchers are told."""
        return t.decode(t.ResetOutput, self.call("session_reset", _input(
            session_key=session_key, agent_id=agent_id, if_state_version=if_state_version, if_synced=if_synced)))

    def session_delete(self, session_key: str, *, agent_id: Optional[str] = None,
                       if_state_version: Optional[int] = None, if_synced: Optional[bool] = None) -> t.DeleteOutput:
        """Deletes the session with its transcript, log and cursors."""
        return t.decode(t.DeleteOutput, self.call("session_delete", _input(
            session_key=session_key, agent_id=agent_id, if_state_version=if_state_version, if_synced=if_synced)))

    def run_end(self, run_id: str, outcome: str, *, if_state_version: Optional[int] = None,
                if_synced: Optional[bool] = None) -> t.RunEndOutput:
        """A child's run ended: completed, error, timeout or cancelled."""
        return t.decode(t.RunEndOutput, self.call("run_end", _input(
            run_id=run_id, outcome=outcome, if_state_version=if_state_version, if_synced=if_synced)))

    def session_compact(self, session_key: str, *, summary: Optional[str] = None,
                        up_to_message_id: Optional[int] = None, operation_id: Optional[str] = None) -> t.CompactOutput:
        """A summary replaces the older messages, or a compaction the runtime
        did itself is recorded."""
        return t.decode(t.CompactOutput, self.call("session_compact", _input(
            session_key=session_key, summary=summary, up_to_message_id=up_to_message_id, operation_id=operation_id)))

    def session_record(self, session_key: str, kind: str, *, agent_id: Optional[str] = None,
                       actor_type: Optional[str] = None, actor_id: Optional[str] = None, run_id: Optional[str] = None,
                       summary: Optional[str] = None, payload: Optional[dict[str, Any]] = None,
                       dedupe_key: Optional[str] = None, occurred_at: Optional[int] = None,
                       parent: Optional[str] = None, hosted_by: Optional[str] = None,
                       if_state_version: Optional[int] = None, if_synced: Optional[bool] = None,
                       upstream: Optional[dict[str, Any]] = None,
                       creation: Optional[dict[str, Any]] = None) -> t.RecordOutput:
        """Records an event of a session your runtime keeps itself; its
        watchers get their notices as for a hosted session, and it is listed
        as recorded, hosted by hosted_by (your runtime's name). With
        if_state_version or if_synced it records only while the session is
        as you last read it, else raises ConflictError. upstream is a
        follower's check of an adopted session's transcript (see
        docs/api.md), with which the gateway makes the event itself.
        creation, with kind "created", says how the session came to be
        (via, label, draft, incognito, creatorLabel, creatorSource), for
        the notice its agent's main session is given."""
        return t.decode(t.RecordOutput, self.call("session_record", _input(
            session_key=session_key, agent_id=agent_id, kind=kind, actor_type=actor_type, actor_id=actor_id,
            run_id=run_id, summary=summary, payload=payload, dedupe_key=dedupe_key, occurred_at=occurred_at,
            parent=parent, hosted_by=hosted_by, if_state_version=if_state_version, if_synced=if_synced,
            upstream=upstream, creation=creation)))

    def session_adopt(self, format: str, *, path: Optional[str] = None, thread_id: Optional[str] = None,
                      session_key: Optional[str] = None, agent_id: Optional[str] = None, host_id: Optional[str] = None,
                      marker: Optional[dict[str, Any]] = None, watcher: Optional[str] = None) -> t.AdoptOutput:
        """Adopts a coding agent's own session (format claude-cli or codex)
        by its transcript: a turn a person types straight into the agent
        then reaches the session's watchers, once."""
        return t.decode(t.AdoptOutput, self.call("session_adopt", _input(
            format=format, path=path, thread_id=thread_id, session_key=session_key, agent_id=agent_id,
            host_id=host_id, marker=marker, watcher=watcher)))

    def session_upstream_links(self, host_id: str, *, cursor: Optional[str] = None,
                               limit: Optional[int] = None) -> t.UpstreamLinksOutput:
        """Lists the adopted sessions' links a follower of host_id checks
        (those someone watches)."""
        return t.decode(t.UpstreamLinksOutput, self.call("session_upstream_links", _input(
            host_id=host_id, cursor=cursor, limit=limit)))

    # ---- streams ----

    def events(self, *, after: Optional[int] = None, session: Optional[str] = None, agent: Optional[str] = None,
               idle_timeout: float = 45.0, report_drops: bool = False) -> "Stream":
        """Follows the signal log (GET /v1/events): LogEvents and Bookmarks;
        from after (a log sequence) if given, else live. session and agent
        filter. report_drops: see Stream."""
        path = "/v1/events" + self._query("log events", " filter", session=session, agent=agent)
        return Stream(self, "log events", path, after, idle_timeout, _decode_log, report_drops)

    @staticmethod
    def _query(op: str, what: str, **params: Optional[str]) -> str:
        """A stream's query of the parameters given ("" when none is); what
        follows a parameter's name where an error names it."""
        query = []
        for name, value in params.items():
            # Else quote() takes bytes as they are, and other values as a TypeError.
            _check_key(op, value, name + what)
            if value:
                query.append(f"{name}={_quote(op, value, '', name + what)}")
        return "?" + "&".join(query) if query else ""

    def session_events(self, session_key: str, *, agent: Optional[str] = None, after: Optional[int] = None,
                       idle_timeout: float = 45.0, report_drops: bool = False) -> "Stream":
        """Follows one session (GET /v1/sessions/{key}/events): its changes as
        AgentEvents, its LiveEvents and Bookmarks; from after (a state
        version) if given, else from its current version. agent names the
        agent of a bare key (such as global), as a tool's agent_id does.
        report_drops: see Stream."""
        path = self._session_path("session events", session_key, "events") + self._query(
            "session events", "", agent=agent)
        return Stream(self, "session events", path, after, idle_timeout, _decode_session, report_drops)


def _json_object(raw: str) -> dict[str, Any]:
    """An event's data, which the gateway always sends as a JSON object."""
    data = json.loads(raw)
    if not isinstance(data, dict):
        raise ValueError("the data is not a JSON object")
    return data


# A stream's decoder takes an event's type and a function reading its data,
# called only for a type it knows: data of another type is left unread.

def _decode_bookmark(data: dict[str, Any]) -> t.Bookmark:
    position = data.get("sequence", data.get("stateVersion"))
    if isinstance(position, bool) or not isinstance(position, int):
        raise ValueError("no position")
    return t.Bookmark(position=position)


def _decode_log(typ: str, data: Callable[[], dict[str, Any]]) -> Optional[t.Event]:
    if typ == "signal":
        return t.decode(t.LogEvent, data())
    if typ == "bookmark":
        return _decode_bookmark(data())
    return None


def _decode_session(typ: str, data: Callable[[], dict[str, Any]]) -> Optional[t.Event]:
    if typ == "signal":
        return t.decode(t.AgentEvent, data())
    if typ == "bookmark":
        return _decode_bookmark(data())
    if typ in ("wake", "notice", "message", "reply"):
        return t.decode(t.LiveEvent, data())
    return None


_FIRST_DELAY, _MAX_DELAY = 0.1, 5.0

#: The most bytes one event may hold, its unfinished line included. The
#: gateway's largest (a message of 64 KiB, escaped) is far below it; past it
#: what answers is not the gateway, and reading on would hold memory without
#: bound.
_MAX_EVENT_SIZE = 4 << 20
_NOWHERE = object()


class _Closed(Exception):
    pass


class Stream:
    """An event stream: iterate it for events. After a dropped connection
    (a network error, the gateway restarting, nothing heard for
    idle_timeout seconds, 45 when 0) it reconnects with Last-Event-ID set to the last
    position it saw and yields Resumed; after a HistoryGap it goes on with
    every retained event. A session stream ends after a SessionDeleted, its
    session's deletion. close(), from any thread, ends it promptly, also
    while it is still connecting; so does leaving a ``with`` block. An
    error reconnecting cannot mend (a refused credential, a bad filter, a
    200 that is not text/event-stream, such as a proxy's login page) is
    raised from the iteration; so is a TransportError naming an event of a
    known type whose data cannot be read (skipping it would lose an event
    unseen, reconnecting would read it again). Events of a type the client
    does not know are skipped unread. With report_drops, a Dropped is
    yielded as soon as a connection ends or an attempt to connect fails
    (the gateway refusing the stream at the credential's stream limit, a
    TooManyRequestsError, say), before the stream waits to try again.
    """

    def __init__(self, client: Client, op: str, path: str, after: Optional[int], idle_timeout: float, decode,
                 report_drops: bool = False):
        # 0 is the default, as in the Go client: a socket timeout of 0
        # would make every read fail at once.
        seconds = _seconds(idle_timeout)
        if seconds is None or seconds > _MAX_IDLE:
            raise InvalidArgumentError(op, 0, "invalid_argument", "idle_timeout must be a number of seconds from 0 "
                                       f"to {_MAX_IDLE:g} (0: 45 s), got {idle_timeout!r}")
        if after is not None and (isinstance(after, bool) or not isinstance(after, int) or after < 0):
            # It goes as the Last-Event-ID header, which must not carry other text.
            raise InvalidArgumentError(op, 0, "invalid_argument", f"after must be an integer of at least 0, got {after!r}")
        idle_timeout = idle_timeout or 45.0
        self._client, self._op, self._path, self._idle, self._decode = client, op, path, idle_timeout, decode
        self._report_drops = report_drops
        #: The last position seen (a log sequence or a state version), or None.
        self.position: Optional[int] = after
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._conn: Optional[http.client.HTTPConnection] = None
        # The connection's socket, kept apart: for an answer that ends with
        # its connection (no length, HTTP/1.0, Connection: close),
        # http.client hands the socket to the response and the connection
        # lets go of it.
        self._sock: Optional[socket.socket] = None
        #: Set when the connection being made is, or when the stream closes.
        self._settled: Optional[threading.Event] = None

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Ends the stream, also while another thread waits on it."""
        self._closed.set()
        with self._lock:
            sock, settled = self._sock, self._settled
        if settled is not None:
            settled.set()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __iter__(self) -> Iterator[t.Event]:
        delay, cause, reconnecting = _FIRST_DELAY, None, False
        too_long_at: Any = _NOWHERE  # the position an event past the bound came after
        try:
            while not self._closed.is_set():
                try:
                    resp = self._open()
                except APIError as e:
                    if self._closed.is_set():
                        return
                    if e.status not in (408, 429) and e.status < 500:
                        raise
                    cause, wait = e, e.retry_after or delay
                except TransportError as e:
                    if self._closed.is_set():
                        return
                    cause, wait = e, delay
                else:
                    if reconnecting:
                        yield t.Resumed(position=self.position, cause=cause)
                        reconnecting = False
                    end = yield from self._read(resp)
                    if self._closed.is_set() or end.get("deleted"):
                        return
                    if "corrupt" in end:
                        raise end["corrupt"]
                    if end.get("too_long"):
                        # Once, a proxy's page, say: resumed. Again at the
                        # same position, it would come on every reconnection.
                        if too_long_at == self.position:
                            raise end["error"]
                        too_long_at = self.position
                    if end.get("heard"):
                        delay = _FIRST_DELAY
                    if "gap" in end:
                        # At once, as the retained events are there; a
                        # position that did not move would ask for the same
                        # gap again.
                        gap = end["gap"]
                        if gap.resume_after <= gap.requested:
                            raise TransportError(f"vigil: {self._op}: history gap after {gap.requested}, "
                                                 "and nothing retained to resume from")
                        self.position = gap.resume_after
                        continue
                    if end.get("lagged"):
                        continue
                    cause = end.get("error") or TransportError(f"vigil: {self._op}: the gateway closed the stream")
                    wait = delay
                reconnecting = True
                if self._report_drops:
                    yield t.Dropped(cause=cause)
                if self._closed.wait(wait):
                    return
                delay = min(2 * delay, _MAX_DELAY)
        finally:
            self._drop()

    def _drop(self) -> None:
        with self._lock:
            conn, self._conn, self._sock = self._conn, None, None
        if conn is not None:
            conn.close()

    def _open(self) -> http.client.HTTPResponse:
        c = self._client
        target = c._target(self._op, self._path, c.session)
        conn = c._connect(self._idle)
        headers = c._headers(c.session, False)
        headers["Accept"] = "text/event-stream"
        if self.position is not None:
            headers["Last-Event-ID"] = str(self.position)
        with self._lock:
            self._conn = conn
        try:
            self._connect(conn)
            conn.request("GET", target, headers=headers)
            with self._lock:
                self._sock = conn.sock
            if self._closed.is_set():  # closed before the socket could be shut
                raise OSError("the stream was closed")
            resp = conn.getresponse()
        except TimeoutError as e:
            self._drop()
            raise self._silent() from e
        except (OSError, http.client.HTTPException) as e:
            self._drop()
            raise TransportError(f"vigil: {self._op}: {e}") from e
        if resp.status != 200:
            try:
                body = _read_answer(self._op, resp)
            except (OSError, http.client.HTTPException, TransportError):
                # The status says what the refusal is (one worth retrying,
                # or not); a body that did not come whole loses only its
                # words, as in the other clients.
                body = b""
            finally:
                self._drop()
            raise error_from(self._op, resp.status, body, resp.headers)
        error = not_the_gateways(self._op, resp.status, resp.getheader("Content-Type"), target.split("?", 1)[0],
                                 "text/event-stream")
        if error is not None:
            # Read as a stream it would hold no event, and each reconnection
            # would get the same page: raised, it ends the stream (its
            # status, 200, is not one worth retrying).
            resp.close()
            self._drop()
            raise error
        return resp

    def _connect(self, conn: http.client.HTTPConnection) -> None:
        """Connects conn, or raises OSError once the stream is closed
        meanwhile. A socket's connect cannot be interrupted, and one to an
        address that never answers lasts the idle timeout, so it runs on a
        thread of its own, left to end (and close what it made) alone when
        the stream closes first."""
        settled = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            try:
                conn.connect()
            except BaseException as e:  # handed to the stream's thread
                failed.append(e)
            if self._closed.is_set():
                conn.close()
            settled.set()

        with self._lock:
            self._settled = settled
        if self._closed.is_set():
            raise OSError("the stream was closed")
        threading.Thread(target=run, name="vigil connect", daemon=True).start()
        settled.wait()
        with self._lock:
            self._settled = None
        if self._closed.is_set():
            conn.close()
            raise OSError("the stream was closed")
        if failed:
            raise failed[0]

    def _read(self, resp: http.client.HTTPResponse):
        """Yields the events of one connection; returns why it ended."""
        end: dict[str, Any] = {}
        typ, data, last_id, size = "", [], None, 0
        try:
            while True:
                line = resp.readline(_MAX_EVENT_SIZE - size + 1)
                if not line:
                    break  # the gateway closed the stream
                size += len(line)
                if size > _MAX_EVENT_SIZE:
                    end["too_long"] = True
                    end["error"] = TransportError(
                        f"vigil: {self._op}: an event larger than {_MAX_EVENT_SIZE >> 20} MiB after position "
                        f"{self.position}: what answers is not a vigil gateway's stream")
                    return end
                text = line.decode("utf-8").rstrip("\r\n")
                if text == "":
                    if data or typ:
                        if last_id is not None and last_id.isdigit():
                            self.position = int(last_id)
                        try:
                            ev = self._dispatch(typ or "message", "\n".join(data), end)
                        except (ValueError, TypeError) as e:
                            # Ends the stream: a reconnection after the event
                            # would lose it unseen, one before it read it again.
                            end["corrupt"] = TransportError(
                                f"vigil: {self._op}: a corrupt {typ or 'message'} event "
                                f"(last event id {last_id if last_id is not None else 'none'}): {e}")
                            return end
                        if ev is not None:
                            yield ev
                        if "gap" in end or end.get("lagged") or end.get("deleted"):
                            return end
                    typ, data, size = "", [], 0
                    continue
                if text.startswith(":"):
                    continue
                name, _, value = text.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    typ = value
                elif name == "data":
                    data.append(value)
                elif name == "id" and "\0" not in value:
                    last_id = value
        except TimeoutError:
            end["error"] = self._silent()
        except (OSError, http.client.HTTPException, ValueError) as e:
            end["error"] = TransportError(f"vigil: {self._op}: {e}")
        finally:
            resp.close()  # it holds the socket when the answer ends with the connection
            self._drop()
        return end

    def _silent(self) -> TransportError:
        """Why a connection whose socket timed out was dropped: the idle
        timeout is the socket's, so its timing out is the silence."""
        return TransportError(f"vigil: {self._op}: nothing heard for {self._idle:g}s")

    def _dispatch(self, typ: str, raw: str, end: dict[str, Any]) -> Optional[t.Event]:
        """The event decoded, or None for a type the client does not know,
        whose data is left unread."""
        def data() -> dict[str, Any]:
            return _json_object(raw)

        if typ == "history_gap":
            gap = t.decode(t.HistoryGap, data())
            gap.resume_after = gap.pruned_watermark if gap.pruned_watermark > 0 else max(gap.earliest_available_sequence - 1, 0)
            end["gap"] = gap
            return gap
        if typ == "lagged":
            end["lagged"] = True
            return t.decode(t.Lagged, data())
        if typ == "deleted":
            end["deleted"] = True
            return t.decode(t.SessionDeleted, data())
        ev = self._decode(typ, data)
        end["heard"] = True
        return ev
