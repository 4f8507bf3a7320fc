#!/usr/bin/env python3
"""orq and BullMQ side by side on the same Redis, each engine deployed as applications deploy it:
the producer in one process, the workers in another (orq: `orq worker` and a producer posting
batches to `orq api`). Three phases per engine and run, run alternately several times, then the
median (min-max) of each figure and the orq / BullMQ ratio (bench/README.md).

    python3 bench/compare.py [--runs 3] [--warmup 1] [--tasks 50000] [--batch 1000]
        [--concurrency 50] [--priorities 1] [--delayed 5000 --delay-ms 1000
        --delay-spread-ms 5000] [--redis URL] [--out DIR] [--orq PATH]

Phases, each on a fresh queue:
  1. pre-fill and drain: the producer submits N tasks, no worker running (submit rate; Redis
     used_memory delta / N); then the worker process starts and drains the queue
     (drain rate = completions after the first / first to last completion time).
  2. end to end: the worker process runs (started and connected first); the producer submits N
     tasks (end-to-end rate = N / first submit to last completion; submit rate with workers
     running; submit -> completion latency; Redis script calls, commands and CPU per task).
  3. delayed (--delayed D > 0): the worker runs; D tasks due delay-ms .. delay-ms + spread after
     submit (lateness = completion - due time).
Completion times are the engines' own, read from Redis after each phase (each keeps its completed
tasks by default, as both run here: orq 24 h, BullMQ without removeOnComplete forever); first
submit is the producer's clock just before its first call; one machine, one clock.

Before the measured runs, each engine runs --warmup small rounds (a tenth of the tasks, at most
5,000; not reported), so that what happens once per Redis and engine (loading scripts, Redis's
first allocations, Node's JIT) is in no measured run.

Without --redis it starts a private redis-server (no persistence) on a free port and stops it at
the end; with --redis it uses that server (it writes only keys of its own queues, cmp-*, and
deletes them after each phase; Redis CPU and command counts are the whole server's, so other
clients' work shows in them). Needs target/release/orq (cargo build --release --bin orq; or --orq
PATH), node and npm (it runs `npm ci` in bench/bullmq when node_modules is missing),
redis-server when no --redis is given.
"""

import argparse
import json
import math
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from resp import Redis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORQ = os.path.join(ROOT, "target", "release", "orq")
BULLMQ_DIR = os.path.join(ROOT, "bench", "bullmq")
ORQ_HTTP_PRODUCER = os.path.join(ROOT, "bench", "orq-http", "producer.mjs")

# orq's retention of completed tasks: RETENTION_MS in engine/src/client/mod.rs (24 h).
ORQ_RETENTION = "completed tasks kept 24 h (RETENTION_MS), then trimmed by later calls"
BULLMQ_RETENTION = ("completed jobs kept until removed (BullMQ's default: no removeOnComplete; "
                    "this bench sets none)")

# (label, key in a run's figures, higher is better)
FIGURES = [
    ("submit tasks/s (no worker running)", "submit_per_s", True),
    ("drain tasks/s (pre-filled queue)", "drain_per_s", True),
    ("end-to-end tasks/s", "complete_per_s", True),
    ("submit tasks/s (workers running)", "e2e_submit_per_s", True),
    ("submit -> completion p50 ms", "latency_p50_ms", False),
    ("submit -> completion p99 ms", "latency_p99_ms", False),
    ("delayed lateness p50 ms", "lateness_p50_ms", False),
    ("delayed lateness p99 ms", "lateness_p99_ms", False),
    ("delayed lateness max ms", "lateness_max_ms", False),
    ("Redis bytes per queued task", "mem_bytes_per_task", False),
    ("script calls per task (e2e)", "script_calls_per_task", False),
    ("Redis commands per task, in scripts too (e2e)", "commands_per_task", False),
    ("Redis CPU us per task (e2e)", "redis_cpu_us_per_task", False),
    ("Redis CPU us per task (drain)", "drain_redis_cpu_us_per_task", False),
    ("worker CPU us per task (e2e)", "worker_cpu_us_per_task", False),
    ("producer CPU us per task (e2e)", "producer_cpu_us_per_task", False),
    ("API CPU us per task (e2e)", "api_cpu_us_per_task", False),
]

CLK_TCK = os.sysconf("SC_CLK_TCK")


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


def wait_ready(api_url, timeout=30):
    """Wait until an orq API at `api_url` answers its readiness probe (GET /api/v1/readyz)."""
    deadline = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(api_url + "/api/v1/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def cpu_s(pid):
    """User + system CPU seconds of a live process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def percentiles(xs):
    """p50 / p99 / max, nearest rank; None when empty."""
    if not xs:
        return None
    s = sorted(xs)

    def rank(q):
        return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))]
    return {"p50": rank(0.5), "p99": rank(0.99), "max": s[-1]}


class Counters:
    """Redis's own counters (INFO commandstats and cpu), whole server."""

    def __init__(self, r):
        stats = r.info("commandstats")
        self.script_calls = 0
        self.commands = 0
        for k, v in stats.items():
            calls = int(v.split(",", 1)[0].split("=", 1)[1])
            self.commands += calls
            if k in ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_evalsha_ro", "cmdstat_eval_ro",
                     "cmdstat_fcall", "cmdstat_fcall_ro"):
                self.script_calls += calls
        cpu = r.info("cpu")
        self.cpu_s = float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class Child:
    """A process of an engine, with its stdout read line by line."""

    def __init__(self, args, cwd=None, env=None, log=None):
        self.proc = subprocess.Popen(args, cwd=cwd, env=env, stdout=subprocess.PIPE,
                                     stderr=log or subprocess.DEVNULL, text=True)
        # Read by a thread, so that waiting for a line has a deadline even when none comes.
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def wait_line(self, needle, timeout=60):
        """Wait for a line of stdout holding ``needle``; the line."""
        deadline = time.time() + timeout
        while True:
            left = deadline - time.time()
            try:
                line = self.lines.get(timeout=max(0.0, left))
            except queue.Empty:
                raise RuntimeError(f"{self.proc.args[0]} did not print {needle!r} within {timeout} s")
            if line is None:
                raise RuntimeError(f"{self.proc.args[0]} exited before printing {needle!r}")
            if needle in line:
                return line

    def cpu_s(self):
        return cpu_s(self.proc.pid)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_producer(args, cwd=None):
    """Run a producer to its end; its JSON line and its CPU seconds."""
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, text=True)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"producer {args} failed ({proc.returncode})")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_utime + usage.ru_stime


class Orq:
    retention = ORQ_RETENTION
    worker = ("`orq worker --queues Q --concurrency C` (its defaults: 2 lanes), the built-in "
              "echo handler")
    PRODUCERS = {
        "http": ("orq, HTTP producer", "HTTP",
                 "`orq api --submit-rate-per-tenant 0` and a Node producer posting batches to "
                 "POST /api/v1/tasks/batch, one in flight (bench/orq-http/producer.mjs)"),
        "rust": ("orq, Rust producer", "Rust",
                 "`orq bench --role producer`: the Rust client's submit_batch straight to Redis, "
                 "one batch in flight"),
    }

    def __init__(self, a, url, logdir, producer):
        self.a, self.url, self.logdir = a, url, logdir
        self.kind = producer
        self.name, self.short, self.producer = self.PRODUCERS[producer]
        self.tag = f"orq{producer}"
        self.api = None

    def version(self):
        return subprocess.run([self.a.orq, "--version"], capture_output=True,
                              text=True).stdout.strip()

    def begin(self):
        """Start `orq api` for this run's phases (HTTP producer only)."""
        if self.kind != "http":
            return
        port = free_port()
        self.api_url = f"http://127.0.0.1:{port}"
        with open(os.path.join(self.logdir, "orq-api.log"), "a") as log:
            self.api = Child([self.a.orq, "api", "--redis", self.url,
                              "--listen", f"127.0.0.1:{port}", "--submit-rate-per-tenant", "0"],
                             env=dict(os.environ, RUST_LOG="warn"), log=log)
        wait_ready(self.api_url)

    def end(self):
        if self.api:
            self.api.stop()
            self.api = None

    def service_cpu_s(self):
        return self.api.cpu_s() if self.api else None

    def start_worker(self, queue):
        with open(os.path.join(self.logdir, "orq-worker.log"), "a") as log:
            w = Child([self.a.orq, "worker", "--redis", self.url, "--queues", queue,
                       "--concurrency", str(self.a.concurrency)],
                      env=dict(os.environ, RUST_LOG="warn"), log=log)
        w.wait_line("started")
        return w

    def produce(self, queue, n, delay):
        if self.kind == "http":
            args = ["node", ORQ_HTTP_PRODUCER, "--url", self.api_url, "--queue", queue,
                    "--tasks", str(n), "--batch", str(self.a.batch),
                    "--priorities", str(self.a.priorities)]
            if delay:
                args += ["--delay", "--delay-ms", str(self.a.delay_ms),
                         "--delay-spread-ms", str(self.a.delay_spread_ms)]
        else:
            args = [self.a.orq, "bench", "--role", "producer", "--redis", self.url,
                    "--queue", queue, "--tasks", str(n), "--batch", str(self.a.batch),
                    "--priorities", str(self.a.priorities)]
            if delay:
                args += ["--delayed", str(n), "--delay-ms", str(self.a.delay_ms),
                         "--delay-spread-ms", str(self.a.delay_spread_ms)]
        return run_producer(args)

    @staticmethod
    def completed_key(queue):
        return f"orq:{{{queue}}}:completed"

    @staticmethod
    def records(r, queue, ids):
        """(created ms, due ms) of each task."""
        rows = r.pipeline([("HMGET", f"orq:{{{queue}}}:task:{i}", "c", "r") for i in ids])
        return [(int(c), int(due) if due else int(c)) for c, due in rows]

    @staticmethod
    def cleanup(r, queue):
        r.scan_delete(f"orq:{{{queue}}}:*")
        r.call("SREM", "orq:queues", queue)


class BullMQ:
    name = "BullMQ"
    tag = "bullmq"
    producer = "Node: Queue.addBulk in batches (bench/bullmq/bench.mjs --role producer)"
    worker = "Node: one Worker, concurrency C, no-op processor (bench.mjs --role worker)"
    retention = BULLMQ_RETENTION

    def __init__(self, a, url, logdir):
        self.a, self.url, self.logdir = a, url, logdir

    def version(self):
        with open(os.path.join(BULLMQ_DIR, "node_modules", "bullmq", "package.json")) as f:
            return "BullMQ " + json.load(f)["version"]

    def begin(self):
        pass

    def end(self):
        pass

    def service_cpu_s(self):
        return None

    def common(self, queue):
        return ["--redis", self.url, "--queue", queue, "--batch", str(self.a.batch),
                "--concurrency", str(self.a.concurrency), "--priorities", str(self.a.priorities)]

    def start_worker(self, queue):
        with open(os.path.join(self.logdir, "bullmq-worker.log"), "a") as log:
            w = Child(["node", "bench.mjs", "--role", "worker"] + self.common(queue),
                      cwd=BULLMQ_DIR, log=log)
        w.wait_line("ready")
        return w

    def produce(self, queue, n, delay):
        args = ["node", "bench.mjs", "--role", "producer", "--tasks", str(n)] + self.common(queue)
        if delay:
            args += ["--delay", "--delay-ms", str(self.a.delay_ms),
                     "--delay-spread-ms", str(self.a.delay_spread_ms)]
        return run_producer(args, cwd=BULLMQ_DIR)

    @staticmethod
    def completed_key(queue):
        return f"bull:{queue}:completed"

    @staticmethod
    def records(r, queue, ids):
        # The hash's `delay` is zeroed when the job is promoted: the delay asked for is in opts.
        rows = r.pipeline([("HMGET", f"bull:{queue}:{i}", "timestamp", "opts") for i in ids])
        return [(int(ts), int(ts) + int(json.loads(o or "{}").get("delay", 0))) for ts, o in rows]

    @staticmethod
    def cleanup(r, queue):
        r.scan_delete(f"bull:{queue}:*")


def wait_completed(r, key, n, timeout=600):
    """Poll ZCARD of the completed set every 10 ms until it holds n; the polls made."""
    deadline = time.time() + timeout
    polls = 0
    while True:
        polls += 1
        if r.call("ZCARD", key) >= n:
            return polls
        if time.time() > deadline:
            raise RuntimeError(f"{key}: fewer than {n} completed after {timeout} s")
        time.sleep(0.01)


def finished(r, key):
    """(id, finish ms) of every completed task, oldest first."""
    flat = r.call("ZRANGE", key, 0, -1, "WITHSCORES")
    return [(flat[i], int(float(flat[i + 1]))) for i in range(0, len(flat), 2)]


def run_engine(e, r, a, tag, n, delayed):
    """One run of the three phases; a dict of figures."""
    fig = {}
    e.begin()
    try:
        # 1. pre-fill, then drain.
        q = f"cmp-{tag}-drain"
        mem0 = int(r.info("memory")["used_memory"])
        p, _ = e.produce(q, n, False)
        mem1 = int(r.info("memory")["used_memory"])
        fig["submit_per_s"] = n / p["submit_s"]
        fig["mem_bytes_per_task"] = (mem1 - mem0) / n
        c0 = Counters(r)
        w = e.start_worker(q)
        wait_completed(r, e.completed_key(q), n)
        c1 = Counters(r)
        w.stop()
        done = finished(r, e.completed_key(q))
        span = done[-1][1] - done[0][1]
        fig["drain_per_s"] = (n - 1) / (span / 1000) if span > 0 else None
        fig["drain_redis_cpu_us_per_task"] = (c1.cpu_s - c0.cpu_s) * 1e6 / n
        e.cleanup(r, q)

        # 2. end to end.
        q = f"cmp-{tag}-e2e"
        w = e.start_worker(q)
        c0 = Counters(r)
        wcpu0 = w.cpu_s()
        scpu0 = e.service_cpu_s()
        p, pcpu = e.produce(q, n, False)
        polls = wait_completed(r, e.completed_key(q), n)
        c1 = Counters(r)
        wcpu1 = w.cpu_s()
        scpu1 = e.service_cpu_s()
        w.stop()
        done = finished(r, e.completed_key(q))
        end_ms = max(t for _, t in done)
        fig["complete_per_s"] = n / ((end_ms - p["first_submit_ms"]) / 1000)
        fig["e2e_submit_per_s"] = n / p["submit_s"]
        recs = e.records(r, q, [i for i, _ in done])
        lat = percentiles([t - c for (_, t), (c, _) in zip(done, recs)])
        fig["latency_p50_ms"], fig["latency_p99_ms"] = lat["p50"], lat["p99"]
        # The ZCARD polls and the INFO reads after the first are this script's, not the engine's.
        fig["script_calls_per_task"] = (c1.script_calls - c0.script_calls) / n
        fig["commands_per_task"] = (c1.commands - c0.commands - polls - 2) / n
        fig["redis_cpu_us_per_task"] = (c1.cpu_s - c0.cpu_s) * 1e6 / n
        fig["worker_cpu_us_per_task"] = (wcpu1 - wcpu0) * 1e6 / n
        fig["producer_cpu_us_per_task"] = pcpu * 1e6 / n
        fig["api_cpu_us_per_task"] = (scpu1 - scpu0) * 1e6 / n if scpu0 is not None else None
        e.cleanup(r, q)

        # 3. delayed.
        if delayed:
            q = f"cmp-{tag}-delayed"
            w = e.start_worker(q)
            e.produce(q, delayed, True)
            wait_completed(r, e.completed_key(q), delayed)
            w.stop()
            done = finished(r, e.completed_key(q))
            recs = e.records(r, q, [i for i, _ in done])
            late = percentiles([t - due for (_, t), (_, due) in zip(done, recs)])
            fig["lateness_p50_ms"] = late["p50"]
            fig["lateness_p99_ms"] = late["p99"]
            fig["lateness_max_ms"] = late["max"]
            e.cleanup(r, q)
    finally:
        e.end()
    return fig


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-", None
    m = statistics.median(xs)
    d = 0 if m >= 100 else 1 if m >= 1 else 3
    return f"{m:,.{d}f} ({min(xs):,.{d}f}-{max(xs):,.{d}f})", m


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1,
                   help="unreported warm-up rounds of each engine before the runs (0 = none)")
    p.add_argument("--tasks", type=int, default=50000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--concurrency", type=int, default=50)
    p.add_argument("--priorities", type=int, default=1,
                   help="priorities the tasks are spread over on both engines (1 = none)")
    p.add_argument("--delayed", type=int, default=5000)
    p.add_argument("--delay-ms", type=int, default=1000)
    p.add_argument("--delay-spread-ms", type=int, default=5000)
    p.add_argument("--redis")
    p.add_argument("--out", default=None, help="directory for the JSON figures and the logs")
    p.add_argument("--orq", default=ORQ, help="the orq binary (default: target/release/orq)")
    p.add_argument("--orq-producer", choices=["http", "rust", "both"], default="both",
                   help="orq's producer: through `orq api` over HTTP, the Rust client straight "
                        "to Redis (`orq bench --role producer`), or each in turn (default)")
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
    r = Redis(url)
    kinds = ["http", "rust"] if a.orq_producer == "both" else [a.orq_producer]
    orqs = [Orq(a, url, out, k) for k in kinds]
    bull = BullMQ(a, url, out)
    engines = orqs + [bull]
    results = {e.name: [] for e in engines}
    try:
        warm_n = max(1, min(a.tasks // 10, 5000))
        for i in range(a.warmup):
            for e in engines:
                run_engine(e, r, a, f"warm{i + 1}-{e.tag}", warm_n,
                           min(a.delayed, warm_n))
                print(f"warm-up {i + 1} {e.name} done", file=sys.stderr)
        for i in range(a.runs):
            # Alternate which engine goes first, so drift on a shared machine hits both.
            order = engines if i % 2 == 0 else engines[::-1]
            for e in order:
                fig = run_engine(e, r, a, f"run{i + 1}-{e.tag}", a.tasks, a.delayed)
                results[e.name].append(fig)
                with open(os.path.join(out, f"{e.tag}-{i + 1}.json"), "w") as f:
                    json.dump(fig, f, indent=2)
                print(f"run {i + 1} {e.name}: end to end {fig['complete_per_s']:,.0f}/s, "
                      f"drain {fig['drain_per_s'] or 0:,.0f}/s, "
                      f"submit {fig['submit_per_s']:,.0f}/s", file=sys.stderr)
        redis_version = r.info("server")["redis_version"]
    finally:
        r.close()
        if redis_proc:
            redis_proc.terminate()
            redis_proc.wait(timeout=30)
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{a.runs} alternating runs, {a.tasks} tasks, batch {a.batch}, concurrency "
          f"{a.concurrency}, priorities {a.priorities}, {a.delayed} delayed over "
          f"{a.delay_ms}..{a.delay_ms + a.delay_spread_ms} ms; Redis {redis_version}; "
          f"median (min-max); figures and logs in {out}\n")
    print(f"{orqs[0].version()}; {bull.version()}")
    for e in engines:
        print(f"{e.name}:")
        print(f"  producer: {e.producer}")
        print(f"  worker:   {e.worker}")
        print(f"  retention: {e.retention}")
    print()
    print("| figure | " + " | ".join(e.name for e in engines) + " | "
          + " | ".join(f"{o.short} / BullMQ" for o in orqs) + " |")
    print("|---" * (len(engines) + len(orqs) + 1) + "|")
    for label, key, _higher in FIGURES:
        cells, medians = [], []
        for e in engines:
            text, m = fmt([f.get(key) for f in results[e.name]])
            cells.append(text)
            medians.append(m)
        bm = medians[-1]
        ratios = [f"{om / bm:.2f}" if om is not None and bm else "-" for om in medians[:-1]]
        print(f"| {label} | " + " | ".join(cells + ratios) + " |")


if __name__ == "__main__":
    main()
