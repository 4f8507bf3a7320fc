#!/usr/bin/env python3
"""Where most applications live: one task per submit, and light load. orq and BullMQ side by side
on the same Redis (issue 23, part 3; bench/README.md).

    python3 bench/light.py [--phase single|light|both] [--runs 3] [--single-tasks 20000]
        [--in-flight 32] [--warmup 1000] [--light-tasks 300] [--interval 20-40] [--concurrency 8]
        [--redis-server PATH] [--orq PATH] [--json FILE] [--no-breakdown]

Phases, each engine alone on a private redis-server (started fresh for every engine and run, so
one engine's leftovers never weigh on the other's figures):

  single  a closed loop of --in-flight single-task submits (bench/bullmq/single.mjs), no worker:
          orq: `orq api --submit-rate-per-tenant 0` and POST /api/v1/tasks with one task;
          BullMQ: Queue.add of one job. After --warmup unreported submits, per submit:
            script_us   Redis time inside scripts (INFO commandstats usec of EVAL*/FCALL*, which
                        includes the commands the scripts run), / submits
            redis_cpu_us  Redis's CPU (INFO cpu, user + sys: its network I/O too), / submits
            script_calls, commands (every command, those inside scripts included), / submits
          and the client's submits/s and per-call latency p50 / p99 (send to answer).
  light   one submit every --interval ms (uniform, seeded), one at a time, with workers running:
          orq: `orq serve --concurrency C` (API, worker pool and scheduler in one process, as the
          README starts it); BullMQ: one Worker of concurrency C in its own process (bench.mjs
          --role worker) and single.mjs adding jobs. Counted from the first submit until every
          task is completed (idle polling in between counts: it is what light load costs), per
          task: script_calls, commands, script_us, redis_cpu_us. Then (unless --no-breakdown) the
          same load again with a MONITOR connection that counts the top-level calls by script
          (orq: FCALL's function name, EVALSHA of `queues` by its mode; BullMQ: EVALSHA by the
          script's first key's suffix), so the figures say which calls a task pays for; MONITOR
          slows Redis, so that pass gives counts only.

The table gives the median (min-max) over --runs and orq / BullMQ. Needs target/release/orq (or
--orq PATH), node and npm (`npm ci` in bench/bullmq when node_modules is missing), redis-server.
"""

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import BULLMQ_DIR, Child, free_port, start_redis, wait_ready  # noqa: E402
from resp import Redis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SINGLE = os.path.join(BULLMQ_DIR, "single.mjs")
SCRIPT_CMDS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_eval_ro",
               "cmdstat_fcall", "cmdstat_fcall_ro")

FIGURES = {
    "single": [
        ("Redis time in scripts per submit, us", "script_us"),
        ("Redis CPU per submit, us", "redis_cpu_us"),
        ("script calls per submit", "script_calls"),
        ("Redis commands per submit", "commands"),
        ("submits/s (client)", "per_s"),
        ("submit latency p50 ms", "latency_p50_ms"),
        ("submit latency p99 ms", "latency_p99_ms"),
    ],
    "light": [
        ("script calls per task", "script_calls"),
        ("Redis commands per task", "commands"),
        ("Redis time in scripts per task, us", "script_us"),
        ("Redis CPU per task, us", "redis_cpu_us"),
    ],
}


class Stats:
    """Redis's own counters, whole server: script calls and their usec, every command, CPU."""

    def __init__(self, r):
        stats = r.info("commandstats")
        self.script_calls = self.script_usec = self.commands = 0
        for k, v in stats.items():
            f = dict(kv.split("=", 1) for kv in v.split(","))
            calls = int(f["calls"])
            self.commands += calls
            if k in SCRIPT_CMDS:
                self.script_calls += calls
                self.script_usec += int(f["usec"])
        cpu = r.info("cpu")
        self.cpu_s = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])

    def per(self, after, n, polls=0):
        """Figures per unit between self and `after`, less `polls` commands of the bench's own."""
        return {
            "script_calls": round((after.script_calls - self.script_calls) / n, 3),
            "script_us": round((after.script_usec - self.script_usec) / n, 2),
            "commands": round((after.commands - self.commands - polls) / n, 3),
            "redis_cpu_us": round((after.cpu_s - self.cpu_s) * 1e6 / n, 2),
        }


class Monitor(threading.Thread):
    """A MONITOR connection counting the top-level calls (not those run inside scripts)."""

    def __init__(self, port, label):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b"MONITOR\r\n")
        self.label = label
        self.counts = {}
        self.stopped = False

    def run(self):
        buf = b""
        while not self.stopped:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            *lines, buf = buf.split(b"\r\n")
            for line in lines:
                # +1700000000.123456 [0 127.0.0.1:5555] "FCALL" "lease" "16" ...
                if b" lua]" in line or b"] " not in line:
                    continue
                words = [w.strip('"') for w in line.decode("utf-8", "replace")
                         .split("] ", 1)[1].split('" "')]
                name = self.label(words)
                if name:
                    self.counts[name] = self.counts.get(name, 0) + 1

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass


def orq_label(words):
    cmd = words[0].upper()
    if cmd in ("FCALL", "FCALL_RO"):
        return f"{words[1]}"
    if cmd in ("EVALSHA", "EVAL"):
        # orq's only EVALSHA script is `queues` (its modes mix reads and writes): its mode is
        # the first ARGV, after the one key.
        return f"queues {words[4]}" if len(words) > 4 else "evalsha"
    if cmd in ("INFO", "ZCARD", "MONITOR", "PING", "CLIENT", "HELLO", "SELECT"):
        return None
    return cmd.lower()


def bullmq_label(words):
    cmd = words[0].upper()
    if cmd in ("EVALSHA", "EVAL"):
        n = int(words[2]) if len(words) > 2 and words[2].isdigit() else 0
        key = words[3] if n > 0 and len(words) > 3 else ""
        return "evalsha(" + key.rsplit(":", 1)[-1] + ")"
    if cmd in ("INFO", "ZCARD", "MONITOR", "PING", "CLIENT", "HELLO", "SELECT"):
        return None
    return cmd.lower()


def node(args):
    """Run single.mjs to its end; its JSON line."""
    out = subprocess.run(["node", SINGLE] + args, cwd=BULLMQ_DIR, check=True,
                         stdout=subprocess.PIPE, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def wait_completed(r, key, n, timeout=300):
    """Poll until the completed set holds n; the number of polls (ZCARD commands) made."""
    deadline = time.time() + timeout
    polls = 0
    while time.time() < deadline:
        polls += 1
        if int(r.call("ZCARD", key)) >= n:
            return polls
        time.sleep(0.01)
    raise RuntimeError(f"{key} did not reach {n} completions in {timeout} s")


class Engine:
    def __init__(self, a, logdir):
        self.a, self.logdir = a, logdir
        self.children = []

    def child(self, args, name, ready, cwd=None):
        with open(os.path.join(self.logdir, name + ".log"), "a") as log:
            c = Child(args, cwd=cwd, env=dict(os.environ, RUST_LOG="warn"), log=log)
        self.children.append(c)
        if ready:
            ready(c)
        return c

    def stop(self):
        for c in self.children:
            c.stop()
        self.children = []


class Orq(Engine):
    name = "orq"
    label = staticmethod(orq_label)

    def start(self, url, phase):
        port = free_port()
        self.http = f"http://127.0.0.1:{port}"
        if phase == "single":
            args = [self.a.orq, "api", "--redis", url, "--listen", f"127.0.0.1:{port}",
                    "--submit-rate-per-tenant", "0"]
        else:
            args = [self.a.orq, "serve", "--redis", url, "--listen", f"127.0.0.1:{port}",
                    "--concurrency", str(self.a.concurrency), "--no-dashboard-build"]
        self.child(args, f"orq-{phase}", None)
        wait_ready(self.http, timeout=60)

    def load(self, url, queue, n, shape):
        return node(["--engine", "orq", "--url", self.http, "--queue", queue,
                     "--tasks", str(n)] + shape)

    @staticmethod
    def completed_key(queue):
        return f"orq:{{{queue}}}:completed"


class BullMQ(Engine):
    name = "BullMQ"
    label = staticmethod(bullmq_label)

    def start(self, url, phase):
        self.url = url
        if phase == "light":
            self.child(["node", "bench.mjs", "--role", "worker", "--redis", url,
                        "--queue", self.a.queue, "--concurrency", str(self.a.concurrency)],
                       "bullmq-worker", lambda c: c.wait_line("ready"), cwd=BULLMQ_DIR)

    def load(self, url, queue, n, shape):
        return node(["--engine", "bullmq", "--redis", url, "--queue", queue,
                     "--tasks", str(n)] + shape)

    @staticmethod
    def completed_key(queue):
        return f"bull:{queue}:completed"


def run_single(e, a, work):
    proc, url = start_redis(work)
    port = int(url.rsplit(":", 1)[1].strip("/"))
    r = Redis(url)
    try:
        e.start(url, "single")
        shape = ["--in-flight", str(a.in_flight)]
        e.load(url, a.queue + "-warm", a.warmup, shape)
        before = Stats(r)
        out = e.load(url, a.queue, a.single_tasks, shape)
        after = Stats(r)
        fig = before.per(after, a.single_tasks)
        fig.update(per_s=out["per_s"], latency_p50_ms=out["latency_ms"]["p50"],
                   latency_p99_ms=out["latency_ms"]["p99"])
        return fig, None
    finally:
        e.stop()
        proc.terminate()
        proc.wait()


def run_light(e, a, work, seed):
    proc, url = start_redis(work)
    port = int(url.rsplit(":", 1)[1].strip("/"))
    r = Redis(url)
    try:
        e.start(url, "light")
        shape = ["--interval", a.interval, "--seed", str(seed)]
        # A first task through, so that what happens once (a queue's registration, loading the
        # scripts) is in no measured figure; then the measured load.
        e.load(url, a.queue, 1, shape)
        wait_completed(r, e.completed_key(a.queue), 1)
        time.sleep(0.5)
        before = Stats(r)
        e.load(url, a.queue, a.light_tasks, shape)
        polls = wait_completed(r, e.completed_key(a.queue), a.light_tasks + 1)
        after = Stats(r)
        fig = before.per(after, a.light_tasks, polls)
        breakdown = None
        if a.breakdown:
            mon = Monitor(port, e.label)
            mon.start()
            time.sleep(0.2)
            e.load(url, a.queue, a.light_tasks, shape)
            wait_completed(r, e.completed_key(a.queue), 2 * a.light_tasks + 1)
            mon.stop()
            breakdown = {k: round(v * 100 / a.light_tasks, 1)
                         for k, v in sorted(mon.counts.items(), key=lambda kv: -kv[1])}
        return fig, breakdown
    finally:
        e.stop()
        proc.terminate()
        proc.wait()


def fmt(xs):
    m = statistics.median(xs)
    lo, hi = min(xs), max(xs)
    if len(xs) == 1 or lo == hi:
        return f"{m:g}"
    return f"{m:g} ({lo:g}-{hi:g})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--phase", choices=["single", "light", "both"], default="both")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--single-tasks", type=int, default=20000)
    p.add_argument("--in-flight", type=int, default=32)
    p.add_argument("--warmup", type=int, default=1000,
                   help="unreported single submits before the measured ones")
    p.add_argument("--light-tasks", type=int, default=300)
    p.add_argument("--interval", default="20-40")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--queue", default="light")
    p.add_argument("--orq", default=os.path.join(ROOT, "target", "release", "orq"))
    p.add_argument("--engines", default="orq,bullmq")
    p.add_argument("--json")
    p.add_argument("--no-breakdown", dest="breakdown", action="store_false")
    a = p.parse_args()
    if min(a.runs, a.single_tasks, a.light_tasks, a.in_flight, a.warmup) < 1:
        sys.exit("--runs, --single-tasks, --light-tasks, --in-flight and --warmup must be at "
                 "least 1")
    if not os.path.exists(os.path.join(BULLMQ_DIR, "node_modules")):
        subprocess.run(["npm", "ci", "--silent"], cwd=BULLMQ_DIR, check=True)
    phases = ["single", "light"] if a.phase == "both" else [a.phase]
    work = tempfile.mkdtemp(prefix="orq-light-")
    kinds = {"orq": Orq, "bullmq": BullMQ}
    engines = [kinds[k](a, work) for k in a.engines.split(",")]
    results = {ph: {e.name: [] for e in engines} for ph in phases}
    breakdowns = {e.name: None for e in engines}
    for run in range(a.runs):
        order = engines if run % 2 == 0 else list(reversed(engines))
        for ph in phases:
            for e in order:
                if ph == "single":
                    fig, _ = run_single(e, a, work)
                else:
                    fig, bd = run_light(e, a, work, seed=run + 1)
                    if bd is not None:
                        breakdowns[e.name] = bd
                results[ph][e.name].append(fig)
                print(f"run {run + 1} {ph} {e.name}: {json.dumps(fig)}", file=sys.stderr)
    names = [e.name for e in engines]
    for ph in phases:
        print(f"\n## {ph}: " + (f"{a.in_flight} single-task submits in flight, {a.single_tasks} "
                                "per run" if ph == "single" else
                                f"one submit every {a.interval} ms, {a.light_tasks} tasks, "
                                f"workers of concurrency {a.concurrency}"))
        print("| figure | " + " | ".join(names) + (" | orq / BullMQ |" if len(names) == 2 else " |"))
        print("|---" * (len(names) + 1 + (len(names) == 2)) + "|")
        for title, key in FIGURES[ph]:
            cols = [fmt([f[key] for f in results[ph][n]]) for n in names]
            row = f"| {title} | " + " | ".join(cols)
            if len(names) == 2:
                o = statistics.median(f[key] for f in results[ph][names[0]])
                b = statistics.median(f[key] for f in results[ph][names[1]])
                row += f" | {o / b:.2f}" if b else " | -"
            print(row + " |")
    if "light" in phases and a.breakdown:
        print("\nTop-level calls per 100 tasks at light load (the MONITOR pass):")
        for n in names:
            print(f"  {n}: " + ", ".join(f"{k} {v:g}" for k, v in (breakdowns[n] or {}).items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"results": results, "breakdown": breakdowns, "args": vars(a)}, f, indent=1)


if __name__ == "__main__":
    main()
