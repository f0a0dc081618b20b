#!/usr/bin/env python3
"""vigil beside your runtime: awareness for sessions you keep yourself.

A runtime that already keeps its own sessions (transcripts, store) tells
vigil only what happened, with session_record. Here a chat runtime of
agent "ext" reports that its coordinator spawned a worker, then that a
person wrote straight into the worker in its own Telegram channel. The
coordinator's next turn carries exactly one notice, about the worker, and
session_status from the worker's version the coordinator last saw (the
spawn's) gives exactly the person's message.

    python3 beside.py --addr http://127.0.0.1:7317 --token "$TOKEN"

The token is an agent token of agent "ext" with "recordHuman": true (the
right to attribute events to a person). It runs on vigil's Python client
(clients/python/src/vigil_client), used in place: the path below puts it
on sys.path. Standard library only.
"""

import argparse
import os
import sys

# The client, vendored by path: clients/python/src, two levels up.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "clients", "python", "src"))

from vigil_client import APIError, Client, TransportError  # noqa: E402

COORDINATOR = "agent:ext:main"
WORKER = "agent:ext:subagent:research-1"


def gateway_address():
    """VIGIL_ADDR, as the vigil CLI reads it; VIGIL_URL, the name the other
    examples once read, still works but says (on stderr) it is deprecated."""
    if os.environ.get("VIGIL_ADDR"):
        return os.environ["VIGIL_ADDR"]
    if os.environ.get("VIGIL_URL"):
        print("VIGIL_URL is deprecated; set VIGIL_ADDR instead", file=sys.stderr)
        return os.environ["VIGIL_URL"]
    return "http://127.0.0.1:7317"


def story(vigil):
    # Our runtime spawned a worker: the coordinator is its parent, and so
    # its watcher. The dedupe key makes a retried report harmless.
    spawn = vigil.session_record(WORKER, "child_spawned", actor_id=COORDINATOR, run_id="run-research-1",
                                 dedupe_key="child-spawned:run-research-1", parent=COORDINATOR)
    print(f"recorded the spawn of {WORKER} at version {spawn.state_version}")

    # A person wrote into the worker in our Telegram channel. vigil never
    # sees the words: only who did what.
    msg = vigil.session_record(WORKER, "human_direct_message", actor_type="human", actor_id="telegram:42",
                               summary="human message via telegram", payload={"channel": "telegram"},
                               parent=COORDINATOR)
    print(f"recorded the person's message at version {msg.state_version}")

    # The coordinator's turn: its notices, consumed and acknowledged.
    turn = vigil.session_turn(COORDINATOR, wait_seconds=0)
    for line in turn.system_events:
        print("coordinator sees: " + line)
    if turn.acknowledged != [WORKER]:
        raise SystemExit(f"want exactly one notice, about {WORKER}; got {turn.system_events}")

    # It reconciles each session a notice says changed, exactly from the
    # version the notice gives as data (never parsing its text).
    for event in turn.events:
        notice = event.data
        if notice is None or notice.type != "changed":
            continue
        st = vigil.session_status(notice.target, changes_since=notice.changes_since)
        for e in st.state_changes.events:
            print(f"change #{e.sequence}: {e.kind} by {e.actor_type} {e.actor_id or '-'}: {e.summary}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--addr", help="the gateway's address (env VIGIL_ADDR; default http://127.0.0.1:7317)")
    ap.add_argument("--token", default=os.environ.get("VIGIL_TOKEN", ""))
    args = ap.parse_args()
    addr = args.addr or gateway_address()
    if "://" not in addr:
        addr = "http://" + addr
    try:
        vigil = Client(addr.rstrip("/"), token=args.token or None)
    except ValueError as e:
        ap.error(str(e))
    try:
        story(vigil)
    except APIError as e:
        raise SystemExit(f"{e.op}: HTTP {e.status} {e.code}: {e.message}")
    except TransportError as e:
        raise SystemExit(str(e))
    return 0


if __name__ == "__main__":
    sys.exit(main())
