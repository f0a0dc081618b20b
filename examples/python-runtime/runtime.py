#!/usr/bin/env python3
"""A toy vigil agent runtime in plain Python, on vigil's Python client.

It attaches to one session of a running vigil gateway and loops taking
turns. Each turn's system events (stale-state notices among them) and
inbound messages go into a prompt, which it prints. Before "thinking" it
reconciles every session the turn's notices were about, asking
session_status for exactly the changes after the version each notice
gives as data (changes_since). Then a trivial rule-based responder (no model) answers each inbound
message with session_reply.

    python3 runtime.py --session agent:main:main
    python3 runtime.py --addr http://127.0.0.1:7317 --token "$TOKEN" \\
        --session agent:main:subagent:5f0c... --turns 2

The client (clients/python/src/vigil_client in the vigil repository) is
used in place, without installing it: the path below puts it on
sys.path. Standard library only. See README.md next to this file.
"""

import argparse
import json
import os
import signal
import sys
import time

# The client, vendored by path: clients/python/src, two levels up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

from vigil_client import APIError, Client, TransportError  # noqa: E402

MAX_WAIT = 60  # the gateway's limit on session_turn waitSeconds
DEFAULT_ADDR = "http://127.0.0.1:7317"


def gateway_address(environ=os.environ):
    """The gateway's address from the environment: VIGIL_ADDR, the name the
    vigil CLI reads too, or else VIGIL_URL, this example's older name, which
    still works but says (on stderr) that it is deprecated."""
    if environ.get("VIGIL_ADDR"):
        return environ["VIGIL_ADDR"]
    if environ.get("VIGIL_URL"):
        print("VIGIL_URL is deprecated; set VIGIL_ADDR instead", file=sys.stderr)
        return environ["VIGIL_URL"]
    return DEFAULT_ADDR


def connect(addr, token, session):
    """A client of the gateway at addr (host:port or a URL) acting as session."""
    if "://" not in addr:
        addr = "http://" + addr
    return Client(addr.rstrip("/"), token=token or None, session=session)


def refused(e):
    """How a refusal of the gateway is said: its status, code and message."""
    return f"HTTP {e.status} {e.code}: {e.message}"


def say(text):
    print("[runtime] " + text, flush=True)


def build_prompt(turn):
    """The lines a real runtime would put in its model's prompt: system
    events first (oldest first), then the new inbound messages."""
    lines = []
    for event in turn.system_events:
        lines.append("System: " + event)
    for m in turn.messages:
        who = m.actor_type + (" " + m.actor_id if m.actor_id else "")
        if m.channel:
            who += " via " + m.channel
        lines.append(f"User [{who}] (message {m.id}): {m.content}")
    return lines


class Runtime:
    """One session's runtime: its client and the session it acts for."""

    def __init__(self, client, session):
        self.client = client
        self.session = session

    def turn(self, wait):
        """Takes the session's turn: the client's timeout outlasts the long
        poll by itself."""
        return self.client.session_turn(self.session, wait_seconds=wait)

    def reconcile(self, key, since):
        """Reconciles one session a notice was about: session_status with
        changesSince the version the notice gives as data. Returns a
        one-line account of the delta."""
        say(f'reconcile: session_status sessionKey "{key}" changesSince {since}')
        changes = []
        while True:
            st = self.client.session_status(key, changes_since=since)
            sc = st.state_changes
            if sc.history_gap:
                say("  historyGap: the log after that version was pruned; re-read the whole session instead")
            for e in sc.events:
                actor = e.actor_type + (" " + e.actor_id if e.actor_id else "")
                extra = " " + json.dumps(e.payload, sort_keys=True) if e.payload else ""
                say(f"  #{e.sequence} {e.kind} by {actor}: {e.summary}{extra}")
                changes.append(e.kind)
            if not sc.truncated:
                break
            since = sc.next_changes_since
        say(f"  stateVersion {st.state_version}, {len(changes)} change(s)")
        kinds = ", ".join(changes) if changes else "nothing new"
        return f"{key} changed: {kinds}"

    def handle(self, turn, turn_no):
        say(f"turn {turn_no} ({turn.turn_id}): {len(turn.system_events)} system event(s), "
            f"{len(turn.messages)} message(s)")
        print("----- prompt -----", flush=True)
        for line in build_prompt(turn):
            print(line, flush=True)
        print("------------------", flush=True)
        if turn.acknowledged:
            say("taking this turn acknowledged the notices about: " + ", ".join(turn.acknowledged))
        for f in turn.follow_ups:
            say("follow-up queued for the next turn: " + f)

        # Reconcile before acting: each session a notice of this turn says
        # changed, from the version the notice gives as data (its text says
        # the same to a model; a program never parses it).
        reconciled = []
        for event in turn.events:
            notice = event.data
            if notice is None:
                continue
            if notice.type == "changed":
                say(f"notice: {notice.target} changed ({', '.join(notice.kinds)} by "
                    f"{', '.join(a.type + (' ' + a.id if a.id else '') for a in notice.actors)})")
                reconciled.append(self.reconcile(notice.target, notice.changes_since))
            elif notice.type == "deleted":
                reconciled.append(f"{notice.target} was deleted")

        if not turn.messages:
            say("no inbound messages: nothing to reply to")
            return
        for m in turn.messages:
            answer = respond(m, turn_no, reconciled)
            out = self.client.session_reply(self.session, answer, reply_to=m.id)
            note = " (delivered to the waiting sender)" if out.delivered else ""
            say(f"reply to message {m.id}: {answer}{note}")


def respond(message, turn_no, reconciled):
    """The 'model': a few fixed rules."""
    text = message.content.strip()
    lower = text.lower()
    if lower.startswith(("hello", "hi ", "hi!", "hey")) or lower == "hi":
        answer = "Hello! I am a toy runtime; ask me how far along I am."
    elif text.endswith("?") or "status" in lower or "how far" in lower:
        answer = f"Working on it (turn {turn_no}); nothing blocking."
    else:
        short = text if len(text) <= 60 else text[:57] + "..."
        answer = f'Noted: "{short}"'
    if reconciled:
        answer += " Before answering I reconciled: " + "; ".join(reconciled) + "."
    return answer


def run(args):
    rt = Runtime(connect(args.addr, args.token, args.session), args.session)
    limit = 1 if args.once else args.turns
    say(f"attached to {args.session} at {rt.client.base_url} (long poll waitSeconds {args.wait})")
    taken = 0
    failures = 0
    while limit == 0 or taken < limit:
        try:
            turn = rt.turn(args.wait)
        except (TransportError, APIError) as e:
            # The gateway restarting (503 unavailable, or no connection) or a
            # dropped connection: back off and retry. Any other refusal ends
            # the runtime.
            if isinstance(e, APIError) and e.status != 503:
                raise
            failures += 1
            if failures > args.retries:
                say(f"giving up after {failures} failed turns: {e}")
                return 1
            delay = min(2 ** failures, 30)
            say(f"turn failed ({e}); retrying in {delay}s")
            time.sleep(delay)
            continue
        failures = 0
        if turn.timed_out:
            continue  # no work within waitSeconds: poll again
        taken += 1
        try:
            rt.handle(turn, taken)
        except (TransportError, APIError) as e:
            # The gateway went away after the turn (a restart): what this
            # turn still had to reconcile or answer is lost, as a sender's
            # wait is. The next turn finds out whether the gateway is back,
            # and backs off if not. Any other refusal ends the runtime.
            if isinstance(e, APIError) and e.status != 503:
                raise
            say(f"turn {taken} failed before it was done: {e}")
    say(f"done after {taken} turn(s)")
    return 0


def stop(signum, frame):
    raise KeyboardInterrupt


def main(argv=None):
    p = argparse.ArgumentParser(description="A toy vigil agent runtime (standard library only).")
    p.add_argument("--addr", help=f"the gateway's address (env VIGIL_ADDR; default {DEFAULT_ADDR})")
    p.add_argument("--token", default=os.environ.get("VIGIL_TOKEN", ""),
                   help="bearer token (env VIGIL_TOKEN; none for a gateway without tokens)")
    p.add_argument("--session", required=True, help="the session key this runtime acts for")
    p.add_argument("--wait", type=int, default=30,
                   help=f"session_turn waitSeconds, 0-{MAX_WAIT} (default 30)")
    p.add_argument("--turns", type=int, default=0,
                   help="stop after this many turns that brought work (default 0: run until Ctrl-C)")
    p.add_argument("--once", action="store_true", help="take one turn with work, then stop (--turns 1)")
    p.add_argument("--retries", type=int, default=5,
                   help="times a failed turn (gateway unreachable or 503) is retried in a row before giving up (default 5)")
    args = p.parse_args(argv)
    args.addr = args.addr or gateway_address()
    if not 0 <= args.wait <= MAX_WAIT:
        p.error(f"--wait must be from 0 to {MAX_WAIT}")
    if args.turns < 0:
        p.error("--turns must not be negative")
    try:
        connect(args.addr, args.token, args.session)
    except ValueError as e:
        p.error(str(e))
    # SIGTERM stops the runtime like Ctrl-C does.
    signal.signal(signal.SIGTERM, stop)
    try:
        return run(args)
    except KeyboardInterrupt:
        say("interrupted: stopping")
        return 0
    except APIError as e:
        say(f"the gateway refused: {refused(e)}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
