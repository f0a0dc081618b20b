#!/usr/bin/env python3
"""Receives vigil's wake webhooks and takes a turn for each (standard library only).

A runtime that is not kept running can have its agent's wakes POSTed to it.
This receiver checks each delivery as the Standard Webhooks specification
says (webhook-id, webhook-timestamp, webhook-signature), refuses anything
unsigned, forged, stale or replayed, answers at once, and then takes one
turn (waitSeconds 0) for the woken session as runtime.py does, on vigil's
Python client (used in place: runtime.py puts clients/python/src on
sys.path).

    python3 webhook_receiver.py --listen 127.0.0.1:8040 --secret "$SECRET" \\
        --addr http://127.0.0.1:7317 --token "$VIGIL_TOKEN"

--secret is the webhook's secret exactly as in vigil's configuration file:
either a "whsec_..." secret, or any other string, whose bytes are the key.
"""

import argparse
import base64
import hashlib
import hmac
import http.server
import json
import os
import sys
import threading
import time

import runtime

DEFAULT_TOLERANCE = 300  # seconds either way, as vigil's webhook.Verify
# A wake is a few hundred bytes (a session key is at most 512); a larger
# body is refused before it is read.
MAX_BODY = 64 * 1024


class Refused(Exception):
    """Why a delivery does not verify."""


def signing_key(secret):
    """The HMAC key a configured secret stands for."""
    if secret.startswith("whsec_"):
        return base64.b64decode(secret[len("whsec_"):], validate=True)
    return secret.encode("utf-8")


def verify(secret, headers, body, tolerance=DEFAULT_TOLERANCE, now=None):
    """Checks one delivery against its raw body; returns its webhook-id.

    headers is any mapping with case-insensitive get (http.server's is).
    Raises Refused naming what is wrong."""
    msg_id = headers.get("webhook-id") or ""
    stamp = headers.get("webhook-timestamp") or ""
    signatures = headers.get("webhook-signature") or ""
    if not (msg_id and stamp and signatures):
        raise Refused("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent = int(stamp)
    except ValueError:
        raise Refused(f"webhook-timestamp {stamp!r} is not Unix seconds") from None
    now = int(time.time()) if now is None else now
    if abs(now - sent) > tolerance:
        raise Refused(f"webhook-timestamp is {now - sent}s off, beyond {tolerance}s")
    signed = f"{msg_id}.{stamp}.".encode("utf-8") + body
    want = base64.b64encode(hmac.new(signing_key(secret), signed, hashlib.sha256).digest())
    for entry in signatures.split():
        version, _, sig = entry.partition(",")
        if version == "v1" and hmac.compare_digest(sig.encode("ascii", "replace"), want):
            return msg_id
    raise Refused("no v1 signature matches")


class Seen:
    """webhook-ids already handled, kept for the tolerance window: a replay
    inside the window is dropped, one after it fails the timestamp check."""

    def __init__(self, keep):
        self.keep, self.ids, self.lock = keep, {}, threading.Lock()

    def first_time(self, msg_id):
        now = time.monotonic()
        with self.lock:
            self.ids = {i: t for i, t in self.ids.items() if now - t <= self.keep}
            if msg_id in self.ids:
                return False
            self.ids[msg_id] = now
            return True


def say(text):
    print("[receiver] " + text, flush=True)


def serve(args):
    seen = Seen(2 * args.tolerance)
    handled = []
    done = threading.Event()
    lock = threading.Lock()
    runtimes = {}  # session key -> its runtime.Runtime

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, fmt, *a):
            pass  # the receiver says what matters itself

        def answer(self, status, text=""):
            data = text.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()

        def do_POST(self):
            # Anyone can reach this port, so nothing is read (or made room
            # for) before the declared length is known to fit a wake.
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if length < 0:
                    raise ValueError
            except ValueError:
                say("refused a delivery: Content-Length is not a number of bytes")
                self.answer(400, "Content-Length must be a number of bytes\n")
                return
            if length > MAX_BODY:
                say(f"refused a delivery: a body of {length} bytes, more than a wake's {MAX_BODY}")
                self.answer(413, "too large for a wake\n")
                return
            body = self.rfile.read(length)
            try:
                msg_id = verify(args.secret, self.headers, body, args.tolerance)
            except (Refused, ValueError) as e:
                say(f"refused a delivery: {e}")
                self.answer(401, "refused\n")
                return
            if not seen.first_time(msg_id):
                say(f"dropped a repeat of delivery {msg_id}")
                self.answer(200, "already handled\n")
                return
            wake = json.loads(body)
            # Answer first: vigil retries a slow receiver, and the turn may
            # take a while.
            self.answer(204)
            key = wake["sessionKey"]
            say(f"verified wake {msg_id} for {key}")
            with lock:
                handled.append(msg_id)
                n = len(handled)
                try:
                    rt = runtimes.get(key)
                    if rt is None:
                        rt = runtime.Runtime(runtime.connect(args.addr, args.token, key), key)
                        runtimes[key] = rt
                    turn = rt.turn(0)
                    if turn.timed_out:
                        say("the turn found no work (the wake was only a hint)")
                    else:
                        rt.handle(turn, n)
                except (runtime.APIError, runtime.TransportError) as e:
                    say(f"the turn failed: {e}")
                if args.wakes and n >= args.wakes:
                    done.set()

    server = http.server.ThreadingHTTPServer(args.listen, Handler)
    host, port = server.server_address[:2]
    say(f"listening on http://{host}:{port}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        done.wait()
    finally:
        server.shutdown()
    say(f"done after {len(handled)} wake(s)")
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(description="Receive vigil wake webhooks and take a turn for each.")
    p.add_argument("--listen", default="127.0.0.1:8040", help="host:port to listen on (port 0 picks one)")
    p.add_argument("--secret", default=os.environ.get("VIGIL_WEBHOOK_SECRET", ""),
                   help="the webhook's secret as configured in vigil (env VIGIL_WEBHOOK_SECRET)")
    p.add_argument("--tolerance", type=int, default=DEFAULT_TOLERANCE,
                   help="seconds a webhook-timestamp may be off, either way (default 300)")
    p.add_argument("--addr", help=f"the gateway's address (env VIGIL_ADDR; default {runtime.DEFAULT_ADDR})")
    p.add_argument("--token", default=os.environ.get("VIGIL_TOKEN", ""),
                   help="the agent's bearer token (env VIGIL_TOKEN)")
    p.add_argument("--wakes", type=int, default=0, help="stop after this many wakes (default 0: run until Ctrl-C)")
    args = p.parse_args(argv)
    args.addr = args.addr or runtime.gateway_address()
    if not args.secret:
        p.error("--secret (or VIGIL_WEBHOOK_SECRET) is required")
    try:
        signing_key(args.secret)
    except ValueError:
        p.error("a whsec_ secret must be base64 after the prefix")
    host, _, port = args.listen.rpartition(":")
    args.listen = (host or "127.0.0.1", int(port))
    try:
        return serve(args)
    except KeyboardInterrupt:
        say("interrupted: stopping")
        return 0


if __name__ == "__main__":
    sys.exit(main())
