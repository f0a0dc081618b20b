#!/usr/bin/env python3
"""A toy vigil agent runtime in plain Python (standard library only).

It attaches to one session of a running vigil gateway and loops taking
turns. Each turn's system events (stale-state notices among them) and
inbound messages go into a prompt, which it prints. Before "thinking" it
reconciles every notice: it reads the changesSince number out of the
notice text and asks session_status for exactly those changes. Then a
trivial rule-based responder (no model) answers each inbound message with
session_reply.

    python3 runtime.py --session agent:main:main
    python3 runtime.py --addr http://127.0.0.1:7317 --token "$TOKEN" \\
        --session agent:main:subagent:5f0c... --turns 2

See README.md next to this file.
"""

import argparse
import json
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

# The exact text of a stale-state notice. The gateway keeps it byte-stable,
# so a runtime may parse it.
NOTICE = re.compile(
    r'^Session "(?P<target>[^"]+)" changed \(other actor\)\. '
    r'Reconcile before acting: session_status sessionKey "(?P<key>[^"]+)" '
    r"changesSince (?P<since>\d+)\.$"
)

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


class VigilError(Exception):
    """An error answer from the gateway ({"error": {"code", "message"}})."""

    def __init__(self, status, code, message):
        super().__init__(f"HTTP {status} {code}: {message}")
        self.status, self.code = status, code


class Client:
    """The few calls a runtime needs, as the session it acts for."""

    def __init__(self, addr, token, session):
        if "://" not in addr:
            addr = "http://" + addr
        self.base = addr.rstrip("/")
        self.token = token
        self.session = session

    def post(self, path, body, timeout):
        req = urllib.request.Request(
            self.base + path,
            data=json.dumps(body).encode("utf-8"),
            method="POST",
            headers={"Content-Type": "application/json", "Vigil-Session": self.session},
        )
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as e:
            try:
                err = json.load(e)["error"]
                raise VigilError(e.code, err["code"], err["message"]) from None
            except (ValueError, KeyError, TypeError):
                raise VigilError(e.code, "http", e.reason) from None

    def _own(self, what):
        return "/v1/sessions/" + urllib.parse.quote(self.session, safe="") + "/" + what

    def turn(self, wait):
        # The HTTP timeout must outlast the long poll.
        return self.post(self._own("turn"), {"waitSeconds": wait}, timeout=wait + 30)

    def reply(self, text, reply_to):
        body = {"text": text}
        if reply_to:
            body["replyTo"] = reply_to
        return self.post(self._own("reply"), body, timeout=30)

    def status(self, key, changes_since):
        return self.post(
            "/v1/tools/session_status",
            {"sessionKey": key, "changesSince": changes_since},
            timeout=30,
        )


def say(text):
    print("[runtime] " + text, flush=True)


def build_prompt(turn):
    """The lines a real runtime would put in its model's prompt: system
    events first (oldest first), then the new inbound messages."""
    lines = []
    for event in turn["systemEvents"]:
        lines.append("System: " + event)
    for m in turn["messages"]:
        who = m["actorType"] + (" " + m["actorId"] if m.get("actorId") else "")
        if m.get("channel"):
            who += " via " + m["channel"]
        lines.append(f"User [{who}] (message {m['id']}): {m['content']}")
    return lines


def reconcile(client, event):
    """Reconciles one notice: session_status changesSince <from the notice>.
    Returns a one-line account of the delta, or None for other events."""
    match = NOTICE.match(event)
    if not match:
        return None
    key, since = match.group("key"), int(match.group("since"))
    say(f'reconcile: session_status sessionKey "{key}" changesSince {since}')
    changes = []
    while True:
        st = client.status(key, since)
        sc = st["stateChanges"]
        if sc["historyGap"]:
            say("  historyGap: the log after that version was pruned; re-read the whole session instead")
        for e in sc["events"]:
            actor = e["actorType"] + (" " + e["actorId"] if e.get("actorId") else "")
            extra = ""
            if e.get("payload"):
                extra = " " + json.dumps(e["payload"], sort_keys=True)
            say(f"  #{e['sequence']} {e['kind']} by {actor}: {e['summary']}{extra}")
            changes.append(e["kind"])
        if not sc["truncated"]:
            break
        since = sc["nextChangesSince"]
    say(f"  stateVersion {st['stateVersion']}, {len(changes)} change(s)")
    kinds = ", ".join(changes) if changes else "nothing new"
    return f"{key} changed: {kinds}"


def respond(message, turn_no, reconciled):
    """The 'model': a few fixed rules."""
    text = message["content"].strip()
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
    client = Client(args.addr, args.token, args.session)
    limit = 1 if args.once else args.turns
    say(f"attached to {args.session} at {client.base} (long poll waitSeconds {args.wait})")
    taken = 0
    failures = 0
    while limit == 0 or taken < limit:
        try:
            turn = client.turn(args.wait)
        except (urllib.error.URLError, ConnectionError, TimeoutError, VigilError) as e:
            # The gateway restarting (503 unavailable, or no connection) or a
            # dropped connection: back off and retry. Any other refusal ends
            # the runtime.
            if isinstance(e, VigilError) and e.status != 503:
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
        if turn["timedOut"]:
            continue  # no work within waitSeconds: poll again
        taken += 1
        handle(client, turn, taken)
    say(f"done after {taken} turn(s)")
    return 0


def handle(client, turn, turn_no):
    say(f"turn {turn_no} ({turn['turnId']}): {len(turn['systemEvents'])} system event(s), "
        f"{len(turn['messages'])} message(s)")
    print("----- prompt -----", flush=True)
    for line in build_prompt(turn):
        print(line, flush=True)
    print("------------------", flush=True)
    if turn["acknowledged"]:
        say("taking this turn acknowledged the notices about: " + ", ".join(turn["acknowledged"]))
    for f in turn["followUps"]:
        say("follow-up queued for the next turn: " + f)

    # Reconcile before acting.
    reconciled = []
    for event in turn["systemEvents"]:
        account = reconcile(client, event)
        if account:
            reconciled.append(account)

    if not turn["messages"]:
        say("no inbound messages: nothing to reply to")
        return
    for m in turn["messages"]:
        answer = respond(m, turn_no, reconciled)
        out = client.reply(answer, m["id"])
        note = " (delivered to the waiting sender)" if out["delivered"] else ""
        say(f"reply to message {m['id']}: {answer}{note}")


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
                   help="consecutive failed turns (gateway unreachable or 503) before giving up (default 5)")
    args = p.parse_args(argv)
    args.addr = args.addr or gateway_address()
    if not 0 <= args.wait <= MAX_WAIT:
        p.error(f"--wait must be from 0 to {MAX_WAIT}")
    if args.turns < 0:
        p.error("--turns must not be negative")
    # SIGTERM stops the runtime like Ctrl-C does.
    signal.signal(signal.SIGTERM, stop)
    try:
        return run(args)
    except KeyboardInterrupt:
        say("interrupted: stopping")
        return 0
    except VigilError as e:
        say(f"the gateway refused: {e}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
