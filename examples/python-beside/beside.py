#!/usr/bin/env python3
"""vigil beside your runtime: awareness for sessions you keep yourself.

A runtime that already keeps its own sessions (transcripts, store) tells
vigil only what happened, with session_record. Here a chat runtime of
agent "ext" reports that its coordinator spawned a worker, then that a
person wrote straight into the worker in its own Telegram channel. The
coordinator's next turn carries exactly one notice, and session_status
with the notice's changesSince gives exactly the person's message.

    python3 beside.py --addr http://127.0.0.1:7317 --token "$TOKEN"

The token is an agent token of agent "ext" with "recordHuman": true (the
right to attribute events to a person). Standard library only.
"""

import argparse
import json
import os
import re
import sys
import urllib.error
import urllib.request

NOTICE = re.compile(
    r'^Session "(?P<target>[^"]+)" changed \(other actor\)\. '
    r'Reconcile before acting: session_status sessionKey "(?P<key>[^"]+)" '
    r"changesSince (?P<since>\d+)\.$"
)

COORDINATOR = "agent:ext:main"
WORKER = "agent:ext:subagent:research-1"


class Gateway:
    def __init__(self, addr, token):
        self.addr = addr.rstrip("/")
        self.token = token

    def tool(self, name, body, session=None):
        req = urllib.request.Request(
            self.addr + "/v1/tools/" + name,
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        if session:
            req.add_header("Vigil-Session", session)
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return json.load(resp)
        except urllib.error.HTTPError as err:
            detail = json.load(err).get("error", {})
            raise SystemExit(f"{name}: HTTP {err.code} {detail.get('code')}: {detail.get('message')}")


def gateway_address():
    """VIGIL_ADDR, as the vigil CLI reads it; VIGIL_URL, the name the other
    examples once read, still works but says (on stderr) it is deprecated."""
    if os.environ.get("VIGIL_ADDR"):
        return os.environ["VIGIL_ADDR"]
    if os.environ.get("VIGIL_URL"):
        print("VIGIL_URL is deprecated; set VIGIL_ADDR instead", file=sys.stderr)
        return os.environ["VIGIL_URL"]
    return "http://127.0.0.1:7317"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", help="the gateway's address (env VIGIL_ADDR; default http://127.0.0.1:7317)")
    ap.add_argument("--token", default=os.environ.get("VIGIL_TOKEN", ""))
    args = ap.parse_args()
    args.addr = args.addr or gateway_address()
    if "://" not in args.addr:
        args.addr = "http://" + args.addr
    gw = Gateway(args.addr, args.token)

    # Our runtime spawned a worker: the coordinator is its parent, and so
    # its watcher. The dedupe key makes a retried report harmless.
    spawn = gw.tool("session_record", {
        "sessionKey": WORKER, "kind": "child_spawned", "actorId": COORDINATOR,
        "runId": "run-research-1", "dedupeKey": "child-spawned:run-research-1", "parent": COORDINATOR,
    })
    print(f"recorded the spawn of {WORKER} at version {spawn['stateVersion']}")

    # A person wrote into the worker in our Telegram channel. vigil never
    # sees the words: only who did what.
    msg = gw.tool("session_record", {
        "sessionKey": WORKER, "kind": "human_direct_message", "actorType": "human", "actorId": "telegram:42",
        "summary": "human message via telegram", "payload": {"channel": "telegram"}, "parent": COORDINATOR,
    })
    print(f"recorded the person's message at version {msg['stateVersion']}")

    # The coordinator's turn: its notices, consumed and acknowledged.
    turn = gw.tool("session_turn", {"sessionKey": COORDINATOR, "waitSeconds": 0}, session=COORDINATOR)
    notices = [e for e in turn["systemEvents"] if NOTICE.match(e)]
    for line in notices:
        print("coordinator sees: " + line)
    if len(notices) != 1:
        raise SystemExit(f"want exactly one notice, got {turn['systemEvents']}")
    m = NOTICE.match(notices[0])

    # It reconciles exactly from the version the notice names.
    st = gw.tool("session_status", {"sessionKey": m["key"], "changesSince": int(m["since"])})
    for e in st["stateChanges"]["events"]:
        print(f"change #{e['sequence']}: {e['kind']} by {e['actorType']} {e.get('actorId', '-')}: {e['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
