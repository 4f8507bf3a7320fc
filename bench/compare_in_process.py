#!/usr/bin/env python3
"""orq and BullMQ side by side on the same Redis, each engine's producer and workers in ONE
process (`orq bench`; `bench.mjs --role both`): the earlier paired benchmark, kept so its figures
can be reproduced (bench/README.md). The fair one, producers and workers in separate processes as
applications deploy them, is bench/compare.py. The same workload, run alternately several times,
then the median (min-max) of each figure and the orq / BullMQ ratio.

    python3 bench/compare_in_process.py [--runs 3] [--warmup 1] [--tasks 50000] [--batch 1000]
        [--concurrency 50] [--delayed 5000 --delay-ms 1000 --delay-spread-ms 5000]
        [--redis URL] [--out DIR]

Before the measured runs, each engine runs --warmup small rounds (a tenth of the tasks, at most
5,000; not reported), so that what happens once per Redis and per engine (loading the engine's
scripts into Redis, Redis's first allocations, Node's JIT warming up) is in no measured run
(without it, orq's first run on a fresh Redis measured 223 bytes per queued task, the next two
208 and 209: docs/measurements.md, eighth session).

Without --redis it starts a private redis-server (no persistence) on a free port and stops it at
the end; with --redis it uses that server (only keys of its own bench queues are written and
deleted). Needs: target/release/orq (cargo build --release --bin orq; or --orq PATH), node and npm (it runs
`npm ci` in bench/bullmq when node_modules is missing), redis-server when no --redis is given.
"""

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORQ = os.path.join(ROOT, "target", "release", "orq")
BULLMQ_DIR = os.path.join(ROOT, "bench", "bullmq")

# (label, json path, higher is better)
FIGURES = [
    ("submit tasks/s", ("submit_per_s",), True),
    ("end-to-end tasks/s", ("complete_per_s",), True),
    ("queue wait p50 ms", ("wait_ms", "p50"), False),
    ("queue wait p99 ms", ("wait_ms", "p99"), False),
    ("delayed lateness p50 ms", ("lateness_ms", "p50"), False),
    ("delayed lateness p99 ms", ("lateness_ms", "p99"), False),
    ("delayed lateness max ms", ("lateness_ms", "max"), False),
    ("Redis bytes per queued task", ("mem_bytes_per_task",), False),
    ("script calls per task", ("script_calls_per_task",), False),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_redis(workdir):
    port = free_port()
    proc = subprocess.Popen(
        ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                c.sendall(b"PING\r\n")
                if c.recv(16).startswith(b"+PONG"):
                    return proc, f"redis://127.0.0.1:{port}/"
        except OSError:
            time.sleep(0.1)
    proc.kill()
    sys.exit("redis-server did not start")


def get(report, path):
    v = report
    for p in path:
        if v is None:
            return None
        v = v.get(p)
    return v


def workload(a):
    w = ["--tasks", str(a.tasks), "--batch", str(a.batch), "--concurrency", str(a.concurrency),
         "--priorities", str(a.priorities)]
    if a.delayed:
        w += ["--delayed", str(a.delayed), "--delay-ms", str(a.delay_ms),
              "--delay-spread-ms", str(a.delay_spread_ms)]
    return w


def run_orq(a, url, out):
    subprocess.run([a.orq, "bench", "--redis", url, "--no-progress", "--json", out] + workload(a),
                   check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, RUST_LOG="warn"))
    with open(out) as f:
        return json.load(f)


def run_bullmq(a, url, out):
    subprocess.run(["node", "bench.mjs", "--role", "both", "--redis", url, "--json", out] + workload(a),
                   check=True, cwd=BULLMQ_DIR, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-", None
    m = statistics.median(xs)
    return f"{m:,.1f} ({min(xs):,.1f}-{max(xs):,.1f})", m


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1,
                   help="unreported warm-up rounds of each engine before the runs (0 = none)")
    p.add_argument("--tasks", type=int, default=50000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--priorities", type=int, default=1,
                   help="priorities the tasks are spread over on both engines (1 = none: "
                        "the same plain tasks on both; orq bench's own default is 10)")
    p.add_argument("--delayed", type=int, default=5000)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--delay-spread-ms", type=int, default=5000)
    p.add_argument("--redis")
    p.add_argument("--out", default=None, help="directory for the JSON reports")
    p.add_argument("--orq", default=ORQ, help="the orq binary (default: target/release/orq)")
    a = p.parse_args()
    if not os.path.exists(a.orq):
        sys.exit(f"{a.orq} is missing: cargo build --release --bin orq")
    if not os.path.isdir(os.path.join(BULLMQ_DIR, "node_modules")):
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=BULLMQ_DIR, check=True)
    out = a.out or tempfile.mkdtemp(prefix="orq-compare-")
    os.makedirs(out, exist_ok=True)
    redis_proc, workdir = None, None
    url = a.redis
    if not url:
        workdir = tempfile.mkdtemp(prefix="orq-compare-redis-")
        redis_proc, url = start_redis(workdir)
    results = {"orq": [], "bullmq": []}
    try:
        warm = argparse.Namespace(**vars(a))
        warm.tasks = max(1, min(a.tasks // 10, 5000))
        warm.delayed = min(a.delayed, warm.tasks)
        for i in range(a.warmup):
            for name, fn in [("orq", run_orq), ("bullmq", run_bullmq)]:
                fn(warm, url, os.path.join(out, f"warmup-{name}-{i + 1}.json"))
                print(f"warm-up {i + 1} {name} done", file=sys.stderr)
        for i in range(a.runs):
            # Alternate which engine goes first, so drift on a shared machine hits both.
            order = [("orq", run_orq), ("bullmq", run_bullmq)]
            if i % 2:
                order.reverse()
            for name, fn in order:
                r = fn(a, url, os.path.join(out, f"{name}-{i + 1}.json"))
                results[name].append(r)
                print(f"run {i + 1} {name}: {r['complete_per_s']:,.0f} tasks/s end to end, "
                      f"submit {r['submit_per_s']:,.0f}/s", file=sys.stderr)
    finally:
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=30)
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{a.runs} alternating runs, {a.tasks} tasks, batch {a.batch}, concurrency "
          f"{a.concurrency}, {a.delayed} delayed over {a.delay_ms}..{a.delay_ms + a.delay_spread_ms}"
          f" ms; median (min-max); reports in {out}\n")
    print(f"| figure | orq | BullMQ {results['bullmq'][0].get('version', '')} | orq / BullMQ |")
    print("|---|---|---|---|")
    for label, path, _higher in FIGURES:
        o, om = fmt([get(r, path) for r in results["orq"]])
        b, bm = fmt([get(r, path) for r in results["bullmq"]])
        ratio = f"{om / bm:.2f}" if om is not None and bm else "-"
        print(f"| {label} | {o} | {b} | {ratio} |")


if __name__ == "__main__":
    main()
