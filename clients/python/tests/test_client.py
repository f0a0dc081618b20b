"""The Python client against a live vigil serve (see live.py)."""

from __future__ import annotations

import dataclasses
import http.server
import inspect
import itertools
import json
import socket
import threading
import unittest
from pathlib import Path
from unittest import mock

import vigil_client as vc
from vigil_client import types as t
from vigil_client.client import Client

from live import ADMIN, MAIN, MANAGER, OPERATOR, OPERATOR_ID, OPS, REPO, RUNTIME, Gateway, Proxy, created_text, notice_text

gateway: Gateway
_names = itertools.count(1)


def setUpModule() -> None:
    global gateway
    gateway = Gateway("--bookmark-interval", "200ms")


def tearDownModule() -> None:
    gateway.stop()


def manager_key() -> str:
    """The main session of an agent of the test's own (an admin acts as
    it), so tests sharing the gateway do not see each other's notices."""
    return f"agent:m{next(_names)}:main"


def agent_of(key: str) -> str:
    return key.split(":")[1]


def as_(token: str, session: str | None = None, url: str | None = None) -> Client:
    return Client(url or gateway.url, token=token, session=session, timeout=20)


def spawn(manager: str, label: str | None = None) -> tuple[str, str, int]:
    """A worker of manager: its key, its run and its state version (versions
    are positions in the gateway's one log, shared by every test; the tests
    run one at a time, so each change a test makes is the next one)."""
    out = as_(ADMIN if manager != MANAGER else MAIN, manager).sessions_spawn("draft the report", label=label)
    return out.child_session_key, out.run_id, as_(ADMIN).session_status(out.child_session_key).state_version


def changed_data(worker: str, v: int) -> t.NoticeData:
    """The data of the notice of a person's message into worker, from version v."""
    return t.NoticeData(type="changed", target=worker, target_agent_id=agent_of(worker), changes_since=v,
                        kinds=["human_direct_message"], actors=[t.NoticeActor(type="human", id=OPERATOR_ID)])


def person_writes(key: str, message: str) -> None:
    as_(OPERATOR).sessions_send(key, message=message, timeout_seconds=0)


def first(stream, cls):
    """The stream's next event of type cls."""
    for ev in stream:
        if isinstance(ev, cls):
            return ev
    raise AssertionError(f"the stream ended before a {cls.__name__}")


class TheStory(unittest.TestCase):
    """The story every client of the repository tells: a manager spawns a
    worker (and is told it was created), a person writes into it, the
    manager gets exactly one notice of the change and reconciles with
    changes_since, a stale write gets the typed
    conflict with the current version, a stream resumes after a drop."""

    def test_the_story_of_a_manager_a_worker_and_a_person(self) -> None:
        manager = MANAGER
        mgr = as_(MAIN, manager)
        proxy = Proxy(gateway.url)
        self.addCleanup(proxy.close)
        with as_(OPERATOR, url=proxy.url).events(after=0) as log:
            worker, _, v = spawn(manager, "writer")
            person_writes(worker, "Use the revised figures")

            turn = mgr.session_turn(manager, wait_seconds=5)
            self.assertEqual(turn.system_events, [created_text(worker, manager, "writer"), notice_text(worker, v)])
            self.assertEqual(turn.acknowledged, [worker])
            # The same entries as data: the position to reconcile from is a field.
            self.assertEqual([e.text for e in turn.events], turn.system_events)
            notice = turn.events[1].data
            self.assertEqual(notice, changed_data(worker, v))
            again = mgr.session_turn(manager, wait_seconds=0)
            self.assertEqual(again.system_events, [])
            self.assertTrue(again.timed_out)

            status = mgr.session_status(notice.target, changes_since=notice.changes_since)
            self.assertEqual(status.state_version, v + 1)
            [change] = status.state_changes.events
            self.assertEqual((change.kind, change.actor_type, change.actor_id),
                             ("human_direct_message", "human", OPERATOR_ID))

            with self.assertRaises(vc.ConflictError) as refused:
                mgr.session_goal(worker, "set", objective="old plan", if_state_version=v)
            self.assertTrue(refused.exception.precondition)
            self.assertEqual(refused.exception.state_version, v + 1)

            # The log, cut after the person's message, resumes after it.
            events = iter(log)
            got = []
            for ev in events:
                if isinstance(ev, t.LogEvent) and ev.session_key == worker:
                    got.append(ev.sequence)
                    if ev.sequence == v + 1:
                        break
            self.assertEqual(got[-1], v + 1)
            proxy.cut_and_hold()
            resume = {}
            reader = threading.Thread(target=lambda: resume.update(ev=next(events)))
            reader.start()
            self.assertEqual(proxy.resumed_with(), str(got[-1]))
            mgr.session_goal(worker, "set", objective="revised plan", if_state_version=refused.exception.state_version)
            proxy.release()
            reader.join(20)
            self.assertIsInstance(resume.get("ev"), t.Resumed)
            self.assertEqual(resume["ev"].position, got[-1])
            after = first(events, t.LogEvent)
            self.assertEqual((after.sequence, after.kind), (got[-1] + 1, "goal_changed"))


class Tools(unittest.TestCase):
    def test_a_spawned_worker_is_listed_with_its_parent_and_transcript(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager, "writer")
        rows = as_(ADMIN, manager).sessions_list(agent_id=agent_of(manager), kind="subagent").sessions
        [row] = [r for r in rows if r.session_key == worker]
        self.assertEqual((row.label, row.spawned_by, row.state_version), ("writer", manager, v))
        hist = as_(ADMIN, manager).sessions_history(worker)
        self.assertEqual([m.content for m in hist.messages], ["draft the report"])

    def test_history_before_the_newest_id_reads_back_from_the_newest(self) -> None:
        manager = manager_key()
        worker, _, _ = spawn(manager)
        person_writes(worker, "one")
        c = as_(ADMIN, manager)
        newest = c.sessions_history(worker, before_id=2**63 - 1, limit=1)
        self.assertEqual(([m.content for m in newest.messages], newest.truncated), (["one"], True))
        older = c.sessions_history(worker, before_id=newest.next_before_id, limit=1)
        self.assertEqual(([m.content for m in older.messages], older.truncated), (["draft the report"], False))

    def test_the_graph_and_pending_show_the_managers_notice(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        person_writes(worker, "one")
        cursors = [c for c in as_(OPERATOR).sessions_graph(agent_id=agent_of(manager)).cursors if c.target == worker]
        self.assertEqual(len(cursors), 1)
        self.assertEqual((cursors[0].watcher, cursors[0].pending, cursors[0].notice),
                         (manager, True, notice_text(worker, v)))
        pending = as_(ADMIN, manager).session_pending(manager)
        self.assertEqual([(e.text, e.target) for e in pending.events],
                         [(created_text(worker, manager), ""), (notice_text(worker, v), worker)])

    def test_a_send_waits_for_the_reply_the_worker_gives_on_its_turn(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        rt = as_(ADMIN)
        self.assertEqual([m.content for m in rt.session_turn(worker, wait_seconds=0).messages], ["draft the report"])
        replies = []

        def answer() -> None:
            turn = rt.session_turn(worker, wait_seconds=30)
            replies.append(rt.session_reply(worker, "half done", reply_to=turn.messages[0].id))

        th = threading.Thread(target=answer)
        th.start()
        sent = as_(ADMIN, manager).sessions_send(worker, message="how far along?", timeout_seconds=15)
        th.join(20)
        self.assertEqual((sent.status, sent.reply), ("ok", "half done"))
        self.assertTrue(replies[0].delivered)

    def test_goal_changes_by_a_person_notify_the_manager_once(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        person = as_(OPERATOR)
        out = person.session_goal(worker, "set", objective="Q3 report")
        self.assertEqual((out.goal.objective, out.goal.status, out.state_version), ("Q3 report", "active", v + 1))
        person.session_goal(worker, "edit", objective="Q3 report, revised")
        mgr = as_(ADMIN, manager)
        mgr.session_goal(worker, "status", status="blocked")
        self.assertIsNone(mgr.session_goal(worker, "clear").goal)
        turn = mgr.session_wait(timeout_seconds=0)
        self.assertEqual(turn.system_events, [created_text(worker, manager), notice_text(worker, v)])

    def test_unwatching_drops_the_notice_and_the_next_ones(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        ops = as_(ADMIN, "agent:ops:main")
        self.assertTrue(ops.sessions_send(worker, message="ping", timeout_seconds=0, watch=True).watched)
        person_writes(worker, "one")
        self.assertTrue(ops.sessions_unwatch(worker).unwatched)
        person_writes(worker, "two")
        self.assertEqual(ops.session_pending("agent:ops:main").events, [])

    def test_a_runs_end_a_compaction_a_reset_and_a_delete_are_recorded(self) -> None:
        manager = manager_key()
        worker, run, v = spawn(manager)
        mgr = as_(ADMIN, manager)
        ended = mgr.run_end(run, "timeout")
        self.assertEqual((ended.recorded, ended.session_key), (True, worker))
        compacted = mgr.as_session(worker).session_compact(worker, summary="asked for a draft", operation_id="c1")
        self.assertEqual((compacted.replaced, compacted.recorded), (1, True))
        self.assertTrue(as_(OPERATOR).session_reset(worker).session_id)
        status = mgr.session_status(worker, changes_since=v)
        self.assertEqual([e.kind for e in status.state_changes.events], ["run_failed", "compacted", "session_reset"])
        self.assertEqual(status.state_changes.events[0].payload, {"outcome": "timeout"})
        self.assertTrue(as_(OPERATOR).session_delete(worker).deleted)
        gone = mgr.session_status(worker)
        self.assertEqual((gone.exists, gone.state, gone.state_version), (False, "absent", 0))

    def test_a_recorded_message_of_a_session_elsewhere_notifies_its_watcher(self) -> None:
        rt = as_(RUNTIME, "agent:ext:main")
        worker = f"agent:ext:subagent:w{next(_names)}"
        v = rt.session_record(worker, "child_spawned", parent="agent:ext:main").state_version
        rec = rt.session_record(worker, "human_direct_message", actor_type="human", actor_id="bob",
                                payload={"channel": "slack"}, dedupe_key="m-1")
        self.assertEqual((rec.recorded, rec.state_version), (True, v + 1))
        self.assertFalse(rt.session_record(worker, "human_direct_message", actor_type="human", actor_id="bob",
                                           dedupe_key="m-1").recorded)
        [change] = rt.session_status(worker, changes_since=v).state_changes.events
        self.assertEqual((change.actor_id, change.payload), ("bob", {"channel": "slack"}))
        self.assertIn(notice_text(worker, v), [e.text for e in rt.session_pending("agent:ext:main").events])

    def test_a_session_recorded_elsewhere_is_listed_and_says_who_hosts_it(self) -> None:
        rt = as_(RUNTIME, "agent:ext:main")
        worker = f"agent:ext:subagent:w{next(_names)}"
        v = rt.session_record(worker, "child_spawned", parent="agent:ext:main", hosted_by="langgraph").state_version
        st = rt.session_status(worker)
        self.assertEqual((st.exists, st.state, st.hosted_by, st.state_version), (True, "recorded", "langgraph", v))
        rows = {r.session_key: r for r in rt.sessions_list(agent_id="ext", limit=200).sessions}
        self.assertEqual((rows[worker].state, rows[worker].hosted_by), ("recorded", "langgraph"))
        self.assertEqual(rt.as_session(worker).session_pending(worker).events, [])  # it may act as its own
        rt.session_delete(worker)
        gone = rt.session_status(worker)
        self.assertEqual((gone.exists, gone.state), (False, "absent"))

    def test_a_record_fenced_with_a_version_the_session_moved_past_is_a_conflict(self) -> None:
        rt = as_(RUNTIME, "agent:ext:main")
        worker = f"agent:ext:subagent:w{next(_names)}"
        v = rt.session_record(worker, "child_spawned", parent="agent:ext:main").state_version
        rt.session_record(worker, "human_direct_message", actor_type="human", actor_id="bob")
        with self.assertRaises(vc.ConflictError) as e:
            rt.session_record(worker, "run_completed", if_state_version=v)
        self.assertEqual((e.exception.precondition, e.exception.state_version), (True, v + 1))
        rec = rt.session_record(worker, "run_completed", if_state_version=e.exception.state_version)
        self.assertEqual((rec.recorded, rec.state_version), (True, v + 2))

    def test_a_session_whose_key_is_not_ascii_takes_its_turn_and_is_acted_as(self) -> None:
        rt = as_(RUNTIME, "agent:ext:main")
        for key in (f"agent:ext:chat:müller{next(_names)}", f"agent:ext:chat:日本{next(_names)}"):
            rt.session_record(key, "child_spawned", parent="agent:ext:main")
            self.assertEqual(rt.session_turn(key, wait_seconds=0).session_key, key)
            self.assertEqual(rt.as_session(key).session_pending(key).events, [])

    def test_call_reaches_a_tool_by_name_and_tools_lists_them_all(self) -> None:
        admin = as_(ADMIN)
        admin.health()
        names = {tool["name"] for tool in admin.tools()}
        self.assertEqual(names, set(TOOL_TYPES))
        self.assertFalse(admin.call("session_status", {"sessionKey": "agent:main:nobody"})["exists"])


class Errors(unittest.TestCase):
    def test_bad_input_is_an_invalid_argument_naming_the_field(self) -> None:
        with self.assertRaises(vc.InvalidArgumentError) as e:
            as_(MAIN).session_status("agent:main:main", changes_since=-1)
        self.assertEqual((e.exception.status, e.exception.code), (400, "invalid_argument"))
        self.assertIn("changesSince", e.exception.message)
        with self.assertRaises(vc.InvalidArgumentError) as e:
            as_(MAIN).call("session_status", {"sessionKey": "agent:main:main", "since": 3})
        self.assertIn('unknown field "since"', e.exception.message)

    def test_a_turn_without_a_key_is_refused_before_anything_is_sent(self) -> None:
        with self.assertRaises(vc.InvalidArgumentError):
            as_(MAIN).session_turn("")

    def test_a_sessions_route_refuses_a_key_of_dots_which_a_url_resolves_to_another_route(self) -> None:
        for key in (".", ".."):
            with self.assertRaises(vc.InvalidArgumentError) as e:
                as_(ADMIN).session_turn(key, wait_seconds=0)
            self.assertIn(repr(key), e.exception.message)
            with self.assertRaises(vc.InvalidArgumentError):
                as_(ADMIN).session_events(key)

    def test_a_wait_that_is_negative_not_a_number_or_text_is_the_gateways_invalid_argument_not_a_socket_error(self) -> None:
        manager = manager_key()
        worker, _, _ = spawn(manager)
        for bad in (-50, float("nan"), "5", 1e300, 10**30):
            with self.subTest(bad=bad):
                with self.assertRaises(vc.InvalidArgumentError):
                    as_(ADMIN).session_turn(worker, wait_seconds=bad)
                with self.assertRaises(vc.InvalidArgumentError):
                    as_(ADMIN).session_status(worker, wait_for_version=10**6, timeout_seconds=bad)
                with self.assertRaises(vc.InvalidArgumentError):
                    as_(ADMIN, manager).session_wait(timeout_seconds=bad)
                if bad != 10**30:  # a send's wait is capped, not refused
                    with self.assertRaises(vc.InvalidArgumentError):
                        as_(OPERATOR).sessions_send(worker, message="hi", timeout_seconds=bad)
        self.assertEqual(as_(ADMIN).sessions_history(worker).messages[-1].content, "draft the report")

    def test_a_value_json_cannot_carry_is_an_invalid_argument_and_nothing_is_sent(self) -> None:
        worker, _, v = spawn(manager_key())
        with self.assertRaisesRegex(vc.InvalidArgumentError, "bytes"):
            as_(OPERATOR).sessions_send(worker, message=b"hi", timeout_seconds=0)
        with self.assertRaisesRegex(vc.InvalidArgumentError, "set"):
            as_(RUNTIME, "agent:ext:x").session_record("agent:ext:x", "message", payload={"a": {1}})
        with self.assertRaisesRegex(vc.InvalidArgumentError, "float"):  # NaN and infinity are no JSON numbers
            as_(RUNTIME, "agent:ext:x").session_record("agent:ext:x", "message", payload={"a": float("nan")})
        self.assertEqual(as_(ADMIN).session_status(worker).state_version, v)

    def test_a_session_key_that_is_not_a_string_is_an_invalid_argument(self) -> None:
        for call in (lambda: as_(ADMIN).session_turn(5, wait_seconds=0),
                     lambda: as_(ADMIN).session_reply(5, "done"),
                     lambda: as_(ADMIN).session_events(5),
                     lambda: as_(ADMIN).as_session(5).sessions_list(),
                     lambda: next(iter(as_(ADMIN, 5).events()))):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "session key"):
                call()

    def test_a_tool_name_a_url_cannot_carry_is_an_invalid_argument(self) -> None:
        for bad in ("sessi\u00f6ns_list", "sessions list", "sessions_list\n", 5):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "not a tool's name"):
                as_(ADMIN).call(bad)

    def test_an_events_filter_that_is_not_valid_unicode_is_an_invalid_argument(self) -> None:
        for kw in ({"session": "agent:main:\ud800"}, {"agent": "m\udc80"}):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "not valid Unicode"):
                as_(ADMIN).events(**kw)

    def test_an_events_filter_that_is_not_a_string_is_an_invalid_argument_naming_it(self) -> None:
        for kw in ({"session": 5}, {"agent": ["ops"]}, {"session": b"agent:main:main"}):
            with self.subTest(**{k: repr(v) for k, v in kw.items()}):
                with self.assertRaisesRegex(vc.InvalidArgumentError, f"{next(iter(kw))} filter .* is not a string"):
                    as_(ADMIN).events(**kw)

    def test_a_resume_position_that_is_not_an_integer_of_at_least_0_is_refused_before_it_is_sent(self) -> None:
        for bad in ("1\r\nX-Other: 1", "7", -1, True, 1.5):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "after"):
                as_(ADMIN).events(after=bad)
            with self.assertRaisesRegex(vc.InvalidArgumentError, "after"):
                as_(ADMIN).session_events("agent:main:main", after=bad)

    def test_a_huge_idle_timeout_is_refused_not_an_overflow(self) -> None:
        for bad in (1e300, 10**30):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "idle_timeout"):
                as_(ADMIN).events(idle_timeout=bad)

    def test_a_client_timeout_that_is_not_a_number_of_seconds_above_0_is_refused_when_the_client_is_made(self) -> None:
        for bad in (-1, 0, float("nan"), float("inf"), "30", True, None, 1e300):
            with self.assertRaisesRegex(ValueError, "timeout"):
                Client(gateway.url, token=ADMIN, timeout=bad)

    def test_a_token_a_header_cannot_carry_is_refused_when_the_client_is_made(self) -> None:
        for bad in ("t\u00f6ken\u20ac", "tok\r\nX-Other: 1", 5):
            with self.assertRaisesRegex(ValueError, "token"):
                Client(gateway.url, token=bad)

    def test_a_base_url_that_is_not_a_string_is_refused_when_the_client_is_made(self) -> None:
        for bad in (None, 7317, b"http://127.0.0.1:1"):
            with self.assertRaisesRegex(ValueError, "base URL"):
                Client(bad)

    def test_a_base_url_the_client_cannot_use_whole_is_refused_when_the_client_is_made(self) -> None:
        for bad, why in (("http://127.0.0.1:1/?x=1", "query"), ("http://127.0.0.1:1/#top", "fragment"),
                         ("http://127.0.0.1:1?", "query"), ("http://127.0.0.1:99999", "port")):
            with self.assertRaisesRegex(ValueError, why):
                Client(bad)
        with self.assertRaisesRegex(ValueError, "credentials") as e:
            Client("http://user:s3cret-pass@127.0.0.1:1")
        self.assertNotIn("s3cret-pass", str(e.exception))

    def test_a_base_url_refused_does_not_show_its_password(self) -> None:
        for bad in ("ftp://bob:s3cret-pw@host:21", "bob:s3cret-pw@host:7317", "http://bob:s3cret-pw@[::1"):
            with self.assertRaisesRegex(ValueError, "base URL") as e:
                Client(bad)
            self.assertNotIn("s3cret-pw", str(e.exception))

    def test_a_wrong_token_is_unauthenticated(self) -> None:
        with self.assertRaises(vc.UnauthenticatedError) as e:
            as_("not-a-real-token-at-all").sessions_list()
        self.assertEqual(e.exception.status, 401)

    def test_reaching_another_agents_session_is_permission_denied(self) -> None:
        with self.assertRaises(vc.PermissionDeniedError) as e:
            as_(OPS).session_status("agent:main:main")
        self.assertIn('agent "ops"', e.exception.message)

    def test_an_unknown_run_or_tool_is_not_found(self) -> None:
        with self.assertRaises(vc.NotFoundError):
            as_(MAIN).run_end("run-nope", "completed")
        with self.assertRaises(vc.NotFoundError):
            as_(MAIN).call("sessions_teleport")

    def test_an_if_synced_write_with_a_notice_pending_carries_the_notice(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        person_writes(worker, "one")
        with self.assertRaises(vc.ConflictError) as e:
            as_(ADMIN, manager).sessions_send(worker, message="go on", timeout_seconds=0, if_synced=True)
        self.assertEqual((e.exception.precondition, e.exception.state_version, e.exception.notice, e.exception.notice_data),
                         (True, v + 1, notice_text(worker, v), changed_data(worker, v)))

    def test_a_label_in_use_is_a_conflict_without_a_precondition(self) -> None:
        manager = manager_key()
        label = f"writer{next(_names)}"
        spawn(manager, label)
        with self.assertRaises(vc.ConflictError) as e:
            as_(ADMIN, manager).sessions_spawn("again", label=label)
        self.assertFalse(e.exception.precondition)

    def test_a_body_over_the_limit_is_payload_too_large(self) -> None:
        with self.assertRaises(vc.PayloadTooLargeError) as e:
            as_(OPERATOR).sessions_send("agent:main:main", message="x" * (2 << 20))
        self.assertEqual(e.exception.status, 413)

    def test_a_body_far_over_the_limit_is_payload_too_large_not_a_broken_connection(self) -> None:
        # The gateway answers before reading such a body and closes the
        # connection, which breaks the sending of the rest: its answer is
        # what the caller gets, as from the other clients.
        with self.assertRaises(vc.PayloadTooLargeError) as e:
            as_(OPERATOR).sessions_send("agent:main:main", message="x" * (32 << 20), timeout_seconds=0)
        self.assertEqual(e.exception.status, 413)

    def test_limits_are_too_many_requests_or_unavailable_with_retry_after(self) -> None:
        limited = Gateway("--max-waits", "1", "--max-waits-per-credential", "1")
        self.addCleanup(limited.stop)
        main = as_(MAIN, url=limited.url)
        parked = threading.Thread(target=lambda: main.session_turn("agent:main:main", wait_seconds=2))
        parked.start()
        self.addCleanup(parked.join)
        limited.wait_for_metric("vigil_parked_requests", 1, ADMIN)
        # The parked turn holds the only wait: the same credential is told
        # of its own limit, another of the gateway's.
        with self.assertRaises(vc.TooManyRequestsError) as e:
            main.session_turn("agent:main:main", wait_seconds=2)
        self.assertEqual((e.exception.status, e.exception.retry_after), (429, 1.0))
        with self.assertRaises(vc.UnavailableError) as e:
            as_(ADMIN, "agent:ops:main", url=limited.url).session_wait(timeout_seconds=2)
        self.assertEqual((e.exception.status, e.exception.retry_after), (503, 1.0))

    def test_a_retry_after_past_the_longest_wait_is_the_longest_wait(self) -> None:
        # Weeks, or a date far ahead: neither a stream nor a caller retrying
        # sleeps for as long.
        from vigil_client.errors import MAX_RETRY_AFTER
        for after in ("3000000", "Fri, 01 Jan 2100 00:00:00 GMT", "18446744073709551616"):
            with self.subTest(after=after):
                url, _ = page_server(self, "application/json", b'{"error":{"code":"unavailable","message":"draining"}}',
                                     status=503, headers={"Retry-After": after})
                with self.assertRaises(vc.UnavailableError) as caught:
                    Client(url).sessions_list()
                self.assertEqual(caught.exception.retry_after, MAX_RETRY_AFTER)
                self.assertEqual(MAX_RETRY_AFTER, 30.0)

    def test_an_unreachable_gateway_is_a_transport_error(self) -> None:
        from live import free_port
        with self.assertRaises(vc.TransportError):
            Client(f"http://127.0.0.1:{free_port()}").sessions_list()

    def test_a_call_answered_with_a_page_is_an_api_error_naming_its_content_type(self) -> None:
        # A proxy's login page at a wrong base URL is not the gateway's
        # answer: an error naming what answered, never a success (health
        # reads no output).
        for content_type, says in (("text/html; charset=utf-8", 'Content-Type "text/html; charset=utf-8"'),
                                   (None, "no Content-Type")):
            url, _ = page_server(self, content_type, b"<html><body>Sign in</body></html>")
            c = Client(url + "/vigil", token="s3cret-token")
            for path, call in (("/vigil/v1/tools/sessions_list", c.sessions_list), ("/vigil/healthz", c.health)):
                with self.subTest(content_type=content_type, path=path):
                    with self.assertRaises(vc.APIError) as caught:
                        call()
                    e = caught.exception
                    self.assertEqual((e.status, e.code), (200, ""))
                    for part in (says, path, "not application/json"):
                        self.assertIn(part, e.message)
                    self.assertNotIn("s3cret-token", str(e))

    def test_an_error_answered_with_200_is_the_error_it_says(self) -> None:
        # An error body whose status was changed to 200 on the way is never
        # read as an empty output; one without a code is an error showing it.
        url, _ = page_server(self, "application/json",
                             b'{"error":{"code":"not_found","message":"no session agent:ops:main"}}')
        with self.assertRaises(vc.NotFoundError) as caught:
            Client(url).session_status("agent:ops:main")
        self.assertEqual((caught.exception.status, caught.exception.message), (200, "no session agent:ops:main"))
        url, _ = page_server(self, "application/json", b'{"error":{"reason":"upstream rejected"}}')
        with self.assertRaises(vc.APIError) as caught:
            Client(url).session_status("agent:ops:main")
        self.assertEqual((caught.exception.status, caught.exception.code), (200, ""))
        self.assertIn("holding an error", caught.exception.message)
        self.assertIn("upstream rejected", caught.exception.message)

    def test_an_error_with_a_code_but_no_message_keeps_its_code_and_names_the_status(self) -> None:
        url, _ = page_server(self, "application/json", b'{"error":{"code":"not_found"}}', status=404)
        with self.assertRaises(vc.NotFoundError) as caught:
            Client(url).session_status("agent:ops:main")
        e = caught.exception
        self.assertEqual((e.status, e.code, e.message), (404, "not_found", "HTTP 404: not_found"))

    def test_a_failure_of_the_gateways_own_carries_the_request_id_of_its_log_line(self) -> None:
        url, _ = page_server(self, "application/json",
                             b'{"error":{"code":"unavailable","message":"the store is unavailable; retry","requestId":"4f2a9c"}}',
                             status=503, headers={"Retry-After": "1", "Vigil-Request-Id": "4f2a9c"})
        with self.assertRaises(vc.UnavailableError) as caught:
            Client(url).session_status("agent:ops:main")
        e = caught.exception
        self.assertEqual((e.status, e.code, e.request_id), (503, "unavailable", "4f2a9c"))

    def test_an_error_whose_code_is_not_a_text_is_an_answer_without_a_code(self) -> None:
        url, _ = page_server(self, "application/json", b'{"error":{"code":404,"message":"gone"}}', status=404)
        with self.assertRaises(vc.APIError) as caught:
            Client(url).session_status("agent:ops:main")
        self.assertEqual((caught.exception.status, caught.exception.code), (404, ""))

    def test_a_send_that_failed_is_an_output_not_an_error_answer(self) -> None:
        # sessions_send says a failed delivery in its output's "error" text.
        url, _ = page_server(self, "application/json",
                             b'{"status":"error","sessionKey":"agent:ops:main","error":"the agent is down"}')
        out = Client(url).sessions_send("agent:ops:main", message="hi")
        self.assertEqual((out.status, out.error), ("error", "the agent is down"))

    def test_an_answer_larger_than_any_the_gateway_sends_is_refused_not_held_in_memory(self) -> None:
        # What answers is not the gateway: a body of 80 MiB.
        class Huge(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                block = b" " * (1 << 20)
                try:
                    for _ in range(80):
                        self.wfile.write(block)
                except OSError:
                    pass  # the client hung up

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Huge)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        with self.assertRaisesRegex(vc.TransportError, "larger than 64 MiB"):
            Client(f"http://127.0.0.1:{srv.server_address[1]}").session_status(session_key=MANAGER)


def page_server(test: unittest.TestCase, content_type: str | None, body: bytes, status: int = 200,
                headers: dict[str, str] | None = None) -> tuple[str, list]:
    """A server answering every request status (200 unless given) with body,
    content_type (None sends none) and headers: its URL, and the paths it
    was asked."""
    asked: list = []

    class Page(http.server.BaseHTTPRequestHandler):
        def answer(self) -> None:
            asked.append(self.path)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status)
            if content_type is not None:
                self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = answer

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    test.addCleanup(srv.server_close)
    test.addCleanup(srv.shutdown)
    return f"http://127.0.0.1:{srv.server_address[1]}", asked


class Streams(unittest.TestCase):
    def test_a_stream_answered_with_a_page_ends_naming_its_content_type(self) -> None:
        # A proxy's login page (a wrong base URL) read as a stream holds no
        # event, and every reconnection would get it again: the stream ends
        # at once, its one connection made, naming what answered.
        for content_type, says in (("text/html; charset=utf-8", 'Content-Type "text/html; charset=utf-8"'),
                                   (None, "no Content-Type")):
            url, asked = page_server(self, content_type, b"<html><body>Sign in</body></html>")
            c = Client(url + "/vigil", token="s3cret-token")
            for path, stream in (("/vigil/v1/events", c.events()),
                                 ("/vigil/v1/sessions/agent:ops:x/events", c.session_events("agent:ops:x"))):
                with self.subTest(content_type=content_type, path=path), stream:
                    del asked[:]
                    with self.assertRaises(vc.APIError) as caught:
                        next(iter(stream))
                    e = caught.exception
                    self.assertEqual((e.status, e.code), (200, ""))
                    for part in (says, path, "not text/event-stream"):
                        self.assertIn(part, e.message)
                    self.assertNotIn("s3cret-token", str(e))
                    self.assertEqual(len(asked), 1)

    def test_a_session_stream_cut_and_resumed_gets_every_change_once(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        person_writes(worker, "one")
        proxy = Proxy(gateway.url)
        self.addCleanup(proxy.close)
        with as_(OPERATOR, url=proxy.url).session_events(worker, after=v) as stream:
            events = iter(stream)
            self.assertEqual(first(events, t.AgentEvent).sequence, v + 1)
            proxy.cut_and_hold()
            got = {}
            reader = threading.Thread(target=lambda: got.update(ev=first(events, t.Resumed)))
            reader.start()
            self.assertEqual(proxy.resumed_with(), str(v + 1))
            person_writes(worker, "two")
            person_writes(worker, "three")
            proxy.release()
            reader.join(20)
            self.assertEqual(got["ev"].position, v + 1)
            self.assertEqual([first(events, t.AgentEvent).sequence for _ in range(2)], [v + 2, v + 3])

    def test_a_session_stream_carries_the_managers_notice_and_wake(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        with as_(ADMIN, manager).session_events(manager) as stream:
            events = iter(stream)
            first(events, t.Bookmark)  # the stream is open
            person_writes(worker, "one")
            notice = first(events, t.LiveEvent)
            self.assertEqual((notice.type, notice.notice.text, notice.notice.target, notice.notice.data),
                             ("notice", notice_text(worker, v), worker, changed_data(worker, v)))
            self.assertEqual(first(events, t.LiveEvent).type, "wake")

    def test_a_quiet_session_stream_gives_bookmarks_of_its_state_version(self) -> None:
        manager = manager_key()
        worker, _, v = spawn(manager)
        person_writes(worker, "one")
        with as_(OPERATOR).session_events(worker) as stream:
            self.assertEqual(first(stream, t.Bookmark).position, v + 1)

    def test_a_session_stream_of_a_bare_key_names_its_agent(self) -> None:
        # A bare key (one not agent-qualified) is a session of the agent
        # named beside it, as the tools' agent_id names it.
        key = f"global-{next(_names)}"
        v = as_(RUNTIME).session_record(key, "child_spawned", agent_id="ext", parent="agent:ext:main").state_version
        with as_(ADMIN).session_events(key, agent="ext") as stream:
            self.assertEqual(first(stream, t.Bookmark).position, v)

    def test_a_session_stream_ends_with_session_deleted_when_its_session_is_deleted(self) -> None:
        worker, _, v = spawn(manager_key())
        with as_(OPERATOR).session_events(worker) as stream:
            guard = threading.Timer(20, stream.close)  # a stream that never ends fails, not hangs
            guard.start()
            try:
                events = iter(stream)
                first(events, t.Bookmark)  # the stream is open
                as_(OPERATOR).session_delete(worker)
                rest = list(events)
            finally:
                guard.cancel()
        self.assertEqual(rest, [t.SessionDeleted(session_key=worker, agent_id=agent_of(worker), state_version=v,
                                                 message=rest[-1].message if rest else "")])
        self.assertTrue(rest[0].message)

    def test_a_refused_stream_raises_the_error(self) -> None:
        with self.assertRaises(vc.PermissionDeniedError):
            with as_(OPS).session_events("agent:main:main") as stream:
                next(iter(stream))

    def test_close_from_another_thread_ends_a_waiting_stream(self) -> None:
        stream = as_(ADMIN).events()
        events = iter(stream)
        first(events, t.Bookmark)
        threading.Timer(0.05, stream.close).start()
        self.assertEqual([e for e in events if not isinstance(e, t.Bookmark)], [])

    def test_a_history_gap_is_reported_and_the_stream_goes_on_after_the_watermark(self) -> None:
        # vigil serve keeps 50,000 events and has no retention flag, so the
        # gap comes from a server that sends what the gateway sends for a
        # pruned position (httpapi/stream.go), then the retained events.
        asked = []

        class Pruned(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked.append(self.headers.get("Last-Event-ID"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if len(asked) == 1:
                    gap = {"requested": 1, "prunedWatermark": 3, "message": "events after the requested position were pruned"}
                    self.wfile.write(b": connected\n\nevent: history_gap\ndata: " + json.dumps(gap).encode() + b"\n\n")
                else:
                    sig = {"sequence": 4, "sessionKey": "agent:main:main", "agentId": "main", "kind": "goal_changed",
                           "actorType": "human", "occurredAt": 1, "recordedAt": 1, "summary": "goal updated"}
                    self.wfile.write(b": connected\n\nid: 4\nevent: signal\ndata: " + json.dumps(sig).encode() + b"\n\n")
                self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pruned)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        with Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=1) as stream:
            events = iter(stream)
            gap = next(events)
            self.assertIsInstance(gap, t.HistoryGap)
            self.assertEqual((gap.requested, gap.pruned_watermark, gap.resume_after), (1, 3, 3))
            self.assertEqual(first(events, t.LogEvent).sequence, 4)
        self.assertEqual(asked[:2], ["1", "3"])

    def test_close_from_another_thread_ends_a_stream_whose_answer_ends_with_its_connection(self) -> None:
        # An HTTP/1.0 answer (a proxy's, say) has no length: its body ends
        # when the connection does.
        asked, done = threading.Event(), threading.Event()

        class Quiet(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b": connected\n\n")
                self.wfile.flush()
                asked.set()
                done.wait(20)  # then a bookmark, for a stream close() did not end
                self.wfile.write(b'id: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        self.addCleanup(done.set)
        stream = Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=1, idle_timeout=3600)
        threading.Thread(target=lambda: (asked.wait(20), stream.close()), daemon=True).start()
        self.assertEqual(list(stream), [])

    def test_an_event_larger_than_any_the_gateway_sends_twice_at_one_position_ends_the_stream(self) -> None:
        opened = []

        class Huge(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                opened.append(self.headers.get("Last-Event-ID"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                try:
                    self.wfile.write(b'id: 7\nevent: bookmark\ndata: {"sequence":7}\n\nevent: signal\ndata: ')
                    self.wfile.write(b"x" * (5 << 20))
                    self.wfile.write(b"\n\n")
                except OSError:
                    pass  # the client hung up

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Huge)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        got: list = []

        def read() -> None:
            try:
                for ev in Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=1):
                    got.append(ev)
            except vc.TransportError as e:
                got.append(e)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(20)
        self.assertFalse(reader.is_alive(), f"the stream is still resuming into the event ({len(opened)} connections)")
        self.assertEqual(got[0], t.Bookmark(position=7))
        self.assertIsInstance(got[1], t.Resumed)
        self.assertEqual(got[2], t.Bookmark(position=7))
        self.assertIsInstance(got[-1], vc.TransportError)
        self.assertRegex(str(got[-1]), "larger than 4 MiB after position 7")
        self.assertEqual(opened, ["1", "7"])

    def test_an_idle_timeout_of_0_is_the_default_as_in_the_go_client_and_a_negative_one_is_refused(self) -> None:
        class OneBookmark(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b': connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')
                self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), OneBookmark)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        client = Client(f"http://127.0.0.1:{srv.server_address[1]}")
        got: list = []
        with client.events(after=1, idle_timeout=0) as stream:
            # Read on a thread: a stream that never yields fails the test
            # instead of holding it.
            reader = threading.Thread(target=lambda: got.append(next(iter(stream))), daemon=True)
            reader.start()
            reader.join(20)
        self.assertEqual(got, [t.Bookmark(position=7)])
        for bad in (-1, float("nan"), "45"):
            with self.assertRaisesRegex(vc.InvalidArgumentError, "idle_timeout"):
                client.events(after=1, idle_timeout=bad)

    def test_a_silent_connection_is_dropped_as_silent_and_resumed_from_its_position(self) -> None:
        asked, done = [], threading.Event()

        class Silent(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked.append(self.headers.get("Last-Event-ID"))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                self.wfile.write(b": connected\n\n")
                if len(asked) == 1:
                    self.wfile.write(b'id: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')
                self.wfile.flush()
                done.wait(20)  # and never a keepalive

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Silent)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        self.addCleanup(done.set)
        with Client(f"http://127.0.0.1:{srv.server_address[1]}").events(idle_timeout=0.5) as stream:
            events = iter(stream)
            self.assertEqual(next(events), t.Bookmark(position=7))
            resumed = next(events)
            self.assertIsInstance(resumed, t.Resumed)
            self.assertEqual((resumed.position, str(resumed.cause)), (7, "vigil: log events: nothing heard for 0.5s"))
        self.assertEqual(asked, [None, "7"])

    def test_a_refusal_worth_retrying_whose_answer_stalls_is_retried(self) -> None:
        # A 503 whose body stops coming is still a 503, as in the other
        # clients: the stream drops it after its idle timeout, waits and
        # reconnects, rather than ending with the socket's timeout.
        asked: list = []
        done = threading.Event()
        self.addCleanup(done.set)

        class Stalls(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                asked.append(self.headers.get("Last-Event-ID"))
                if len(asked) == 1:
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100")
                    self.end_headers()
                    self.wfile.write(b'{"error":')  # and nothing more
                    self.wfile.flush()
                    done.wait()
                    return
                body = b': connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n'
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Stalls)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        with Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=5, idle_timeout=0.5) as stream:
            events = iter(stream)
            resumed = next(events)
            self.assertIsInstance(resumed, t.Resumed)
            self.assertEqual((resumed.position, resumed.cause.status), (5, 503))
            self.assertEqual(next(events), t.Bookmark(position=7))
        self.assertEqual(asked, ["5", "5"])

    def test_a_history_gap_that_leaves_nothing_to_resume_from_ends_the_stream_with_an_error(self) -> None:
        # A gateway never answers so; something else in its place might,
        # and reconnecting at once to the same gap would never end.
        class SameGap(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = b': connected\n\nevent: history_gap\ndata: {"requested":5,"prunedWatermark":5,"message":"pruned"}\n\n'
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), SameGap)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        with Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=5, idle_timeout=3600) as stream:
            events = iter(stream)
            self.assertIsInstance(next(events), t.HistoryGap)
            with self.assertRaisesRegex(vc.TransportError, "nothing retained to resume from"):
                next(events)

    def test_an_event_too_large_for_any_the_gateway_sends_is_a_dropped_connection(self) -> None:
        # What answers is not the gateway (a proxy's page, a wrong URL): a
        # line that never ends. The stream drops the connection and
        # reconnects, rather than holding memory without bound.
        opened, done = [], threading.Event()

        class Endless(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                opened.append(1)
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                if len(opened) == 1:
                    self.wfile.write(b"data: " + b"x" * (5 << 20))  # and never a line's end
                    self.wfile.flush()
                    done.wait()
                else:
                    self.wfile.write(b': connected\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')
                    self.wfile.flush()

            def log_message(self, *args) -> None:
                pass

        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        self.addCleanup(srv.server_close)
        self.addCleanup(srv.shutdown)
        self.addCleanup(done.set)
        with Client(f"http://127.0.0.1:{srv.server_address[1]}").events(after=1, idle_timeout=3600) as stream:
            guard = threading.Timer(20, stream.close)  # a client that waits for the line's end hangs here
            guard.start()
            self.addCleanup(guard.cancel)
            events = iter(stream)
            resumed = next(events)
            self.assertIsInstance(resumed, t.Resumed)
            self.assertIn("larger than 4 MiB", str(resumed.cause))
            self.assertEqual(next(events), t.Bookmark(position=7))


# The tools' input parameters and output types, checked against the
# published OpenAPI document (docs/openapi.json) so they cannot drift.
TOOL_TYPES = {
    "sessions_list": (Client.sessions_list, t.ListOutput),
    "sessions_history": (Client.sessions_history, t.HistoryOutput),
    "sessions_send": (Client.sessions_send, t.SendOutput),
    "sessions_spawn": (Client.sessions_spawn, t.SpawnOutput),
    "session_status": (Client.session_status, t.StatusOutput),
    "sessions_unwatch": (Client.sessions_unwatch, t.UnwatchOutput),
    "session_goal": (Client.session_goal, t.GoalOutput),
    "session_wait": (Client.session_wait, t.TurnOutput),
    "session_pending": (Client.session_pending, t.PendingOutput),
    "sessions_graph": (Client.sessions_graph, t.GraphOutput),
    "session_turn": (Client.session_turn, t.TurnOutput),
    "session_reply": (Client.session_reply, t.ReplyOutput),
    "session_reset": (Client.session_reset, t.ResetOutput),
    "session_delete": (Client.session_delete, t.DeleteOutput),
    "run_end": (Client.run_end, t.RunEndOutput),
    "session_compact": (Client.session_compact, t.CompactOutput),
    "session_record": (Client.session_record, t.RecordOutput),
    "session_adopt": (Client.session_adopt, t.AdoptOutput),
    "session_upstream_links": (Client.session_upstream_links, t.UpstreamLinksOutput),
}


def stream_server(test: unittest.TestCase, answer) -> str:
    """A server answering a stream's nth connection (from 1) with
    answer(n, handler); its URL."""
    count = itertools.count(1)

    class Answer(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            answer(next(count), self)

        def log_message(self, *args) -> None:
            pass

    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    test.addCleanup(srv.server_close)
    test.addCleanup(srv.shutdown)
    return f"http://127.0.0.1:{srv.server_address[1]}"


def send(handler: http.server.BaseHTTPRequestHandler, status: int, content_type: str, body: bytes) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


class StreamsAgainstAnyServer(unittest.TestCase):
    def test_a_stream_refused_at_its_limit_is_reported_as_dropped_when_asked(self) -> None:
        def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> None:
            if n == 1:
                send(h, 429, "application/json", b'{"error":{"code":"too_many_requests","message":"stream limit reached"}}')
            else:
                send(h, 200, "text/event-stream", b'id: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')

        with Client(stream_server(self, answer)).events(after=1, report_drops=True) as stream:
            events = iter(stream)
            dropped = next(events)
            self.assertIsInstance(dropped, vc.Dropped)
            self.assertIsInstance(dropped.cause, vc.TooManyRequestsError)
            self.assertIsInstance(next(events), t.Resumed)
            self.assertEqual(next(events), t.Bookmark(position=7))

    def test_an_event_whose_data_is_corrupt_ends_the_stream_naming_its_id(self) -> None:
        opened = []

        def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> None:
            opened.append(n)
            send(h, 200, "text/event-stream",
                 b'id: 7\nevent: bookmark\ndata: {"sequence":7}\n\nid: 8\nevent: signal\ndata: {"sequence":8,\n\n')

        got = []
        with self.assertRaisesRegex(vc.TransportError, r"a corrupt signal event \(last event id 8\)"):
            with Client(stream_server(self, answer)).events() as stream:
                got.extend(itertools.islice(stream, 3))  # a stream that goes on fails rather than hangs
        self.assertEqual((got, opened), ([t.Bookmark(position=7)], [1]))

    def test_a_bookmark_without_a_position_ends_the_stream_as_corrupt_as_in_the_go_client(self) -> None:
        def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> None:
            send(h, 200, "text/event-stream", b"id: 7\nevent: bookmark\ndata: {}\n\n")

        with Client(stream_server(self, answer)).events() as stream:
            with self.assertRaisesRegex(vc.TransportError, r"a corrupt bookmark event \(last event id 7\): no position"):
                list(itertools.islice(stream, 3))  # a stream that goes on fails rather than hangs

    def test_an_event_of_a_type_the_client_does_not_know_is_skipped_whatever_its_data(self) -> None:
        def answer(n: int, h: http.server.BaseHTTPRequestHandler) -> None:
            send(h, 200, "text/event-stream", b'event: forecast\ndata: rain\n\nid: 7\nevent: bookmark\ndata: {"sequence":7}\n\n')

        with Client(stream_server(self, answer)).events() as stream:
            self.assertEqual(next(iter(stream)), t.Bookmark(position=7))

    def test_close_from_another_thread_ends_a_stream_still_connecting(self) -> None:
        # A listener whose backlog is full: a connection to it is neither
        # accepted nor refused, as at an address that never answers.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        held = socket.create_connection(("127.0.0.1", port))
        self.addCleanup(held.close)
        connecting = threading.Event()
        real = socket.create_connection

        def create_connection(*args, **kwargs):
            connecting.set()
            return real(*args, **kwargs)

        patched = mock.patch("socket.create_connection", create_connection)
        patched.start()
        self.addCleanup(patched.stop)
        stream = Client(f"http://127.0.0.1:{port}").events(idle_timeout=3600)
        got: list = []
        reader = threading.Thread(target=lambda: got.extend(stream), daemon=True)
        reader.start()
        self.assertTrue(connecting.wait(20))
        stream.close()
        reader.join(20)
        self.assertFalse(reader.is_alive(), "close() did not end a stream still connecting")
        self.assertEqual(got, [])

    def test_a_base_url_not_written_as_a_url_is_refused_when_the_client_is_made(self) -> None:
        for bad in ("http://127.0.0.1:1/#", "http://127.0.0.1:1/a b", "http://127.0.0.1:1/a\tb", "http://127.0.0.1:1/é",
                    "http://127.0.0.1:1/a%zz"):
            with self.subTest(url=bad), self.assertRaisesRegex(ValueError, "base URL"):
                Client(bad)
        Client("http://127.0.0.1:1/a%20b/")


class Types(unittest.TestCase):
    def _schemas(self) -> dict:
        doc = json.loads((REPO / "docs" / "openapi.json").read_text())
        return doc["components"]["schemas"]

    def _fields(self, cls) -> set[str]:
        return {t.camel(f.name) for f in dataclasses.fields(cls) if f.init}

    def test_every_tool_has_the_documents_inputs_and_outputs(self) -> None:
        schemas = self._schemas()
        documented = {n.removesuffix("Input") for n in schemas if n.endswith("Input") and "ByKey" not in n}
        camel = {"".join(p.capitalize() for p in name.split("_")): name for name in TOOL_TYPES}
        self.assertEqual(documented, set(camel))
        for base, name in camel.items():
            method, out = TOOL_TYPES[name]
            params = {t.camel(p) for p in inspect.signature(method).parameters if p != "self"}
            with self.subTest(tool=name):
                self.assertEqual(params, set(schemas[base + "Input"]["properties"]))
                self.assertEqual(self._fields(out), set(schemas[base + "Output"]["properties"]))

    def test_nested_types_have_the_documents_fields(self) -> None:
        s = self._schemas()
        props = lambda schema: schema["properties"]  # noqa: E731
        status = props(s["SessionStatusOutput"])
        turn = props(s["SessionTurnOutput"])
        for cls, schema in [
            (t.GoalView, status["goal"]),
            (t.StateChanges, status["stateChanges"]),
            (t.AgentEvent, props(status["stateChanges"])["events"]["items"]),
            (t.SessionRow, props(s["SessionsListOutput"])["sessions"]["items"]),
            (t.MessageView, turn["messages"]["items"]),
            (t.TurnBookmark, turn["bookmark"]),
            (t.SystemEventView, props(s["SessionPendingOutput"])["events"]["items"]),
            (t.SystemEventView, turn["events"]["items"]),
            (t.NoticeData, props(props(s["SessionPendingOutput"])["events"]["items"])["data"]),
            (t.NoticeActor, props(props(props(s["SessionPendingOutput"])["events"]["items"])["data"])["actors"]["items"]),
            (t.GraphCursor, props(s["SessionsGraphOutput"])["cursors"]["items"]),
        ]:
            with self.subTest(type=cls.__name__):
                self.assertEqual(self._fields(cls), set(props(schema)))

    def test_the_streams_events_have_the_documents_fields(self) -> None:
        doc = json.loads((REPO / "docs" / "openapi.json").read_text())
        log = doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]["x-vigil-events"]
        session = doc["paths"]["/v1/sessions/{key}/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]["x-vigil-events"]
        of_log = {e: group["data"] for group in log for e in group["events"]}
        of_session = {e: group["data"] for group in session for e in group["events"]}
        self.assertEqual(self._fields(t.LogEvent), set(of_log["signal"]["properties"]))
        self.assertEqual(self._fields(t.AgentEvent), set(of_session["signal"]["properties"]))
        self.assertEqual(self._fields(t.LiveEvent), set(of_session["wake"]["properties"]))
        self.assertEqual(self._fields(t.NoticeView), set(of_session["wake"]["properties"]["notice"]["properties"]))
        self.assertEqual(self._fields(t.SessionDeleted), set(of_session["deleted"]["properties"]))
        self.assertTrue(set(of_log["history_gap"]["properties"]) <= self._fields(t.HistoryGap))
        self.assertTrue(set(of_session["history_gap"]["properties"]) <= self._fields(t.HistoryGap))


if __name__ == "__main__":
    unittest.main()
