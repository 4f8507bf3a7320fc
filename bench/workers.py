#!/usr/bin/env python3
"""Workers in Python side by side (issue 24, item 5): how fast a no-op task runs through orq's
Python worker (clients/python, over the HTTP worker protocol), through RQ's worker, and through
orq's Rust worker, on the same machine and the same private Redis.

    python3 bench/workers.py [--tasks 5000] [--runs 3] [--concurrency 8] [--orq PATH]
        [--json FILE] [--only orq-python,orq-ts,orq-rust,rq]

Each run of each worker: a fresh private redis-server (no persistence); --tasks no-op tasks put
in the queue first (orq: POST /api/v1/tasks/batch of 1,000 through `orq api`; RQ:
`Queue.enqueue_many`), then one worker process is started, and the clock runs from its start
until every task is finished (its start-up included, the same for all). Figures per worker:
tasks/s, the worker process's CPU per task (us), Redis's CPU per task (us).

  orq-python  one process of orq's Python Worker, --concurrency handler threads, long-poll
              leases of up to that many tasks; `orq api` (Rust) between it and Redis, its CPU
              reported apart.
  orq-ts      one Node process of orq's TypeScript Worker (clients/typescript, built here with
              `npm ci && npm run build` when its dist/ is missing), --concurrency async slots,
              through `orq api` as orq-python.
  orq-rust    `orq worker --concurrency C` (no-op `echo` handler), straight on Redis.
  rq          `rq worker --burst` of RQ (rq.readthedocs.io) with its SimpleWorker class (no
              fork per job: RQ's fastest mode; the default forks a process per job); one job at
              a time, which is RQ's model (more throughput means more processes).

Needs redis-server, target/release/orq (or --orq), node and npm, and Python packages it installs
on first use into target/bench-workers-venv (this repository's clients/python, rq).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
VENV = os.path.join(ROOT, "target", "bench-workers-venv")
RQ_VERSION = "3.0.0"

sys.path.insert(0, HERE)
from compare import Child, cpu_s, start_redis, wait_ready  # noqa: E402
from resp import Redis  # noqa: E402

NOOP_MODULE = "def noop(n):\n    return None\n"

TS_DIR = os.path.join(ROOT, "clients", "typescript")

TS_WORKER = """
const { Worker } = await import(process.argv[1]);
const w = new Worker({ url: process.argv[2], queues: [process.argv[3]],
                       concurrency: Number(process.argv[4]), waitMs: 2000, shutdownGraceMs: 5000 });
w.handle("noop", async () => null);
await w.run();
"""

PY_WORKER = """
import sys
from orq import Worker
w = Worker(sys.argv[1], queues=[sys.argv[2]], concurrency=int(sys.argv[3]), wait_ms=2000,
           shutdown_grace_s=5)
w.register("noop", lambda job: None)
w.run()
"""


def ensure_venv():
    """Re-run this script in a virtualenv holding orq's client and RQ (made on first use)."""
    py = os.path.join(VENV, "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(VENV):
        return
    stamp = os.path.join(VENV, ".installed")
    if not os.path.exists(stamp):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               os.path.join(ROOT, "clients", "python"), f"rq=={RQ_VERSION}"])
        open(stamp, "w").close()
    else:
        subprocess.check_call([py, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                               "--no-deps", "--force-reinstall", os.path.join(ROOT, "clients", "python")])
    os.execv(py, [py, os.path.abspath(__file__), *sys.argv[1:]])


def redis_cpu_s(r):
    cpu = r.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def wait_until(pred, what, timeout=600):
    deadline = time.time() + timeout
    while not pred():
        if time.time() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def run_orq(a, kind, redis_url, work):
    from orq import Client

    log = open(os.path.join(work, f"api-{kind}.log"), "w")
    api = Child([a.orq, "api", "--redis", redis_url, "--listen", "127.0.0.1:0",
                 "--submit-rate-per-tenant", "0"], log=log)
    try:
        line = api.wait_line("orq API listening on")
        url = line.split("listening on ", 1)[1].strip().rsplit("/api/v1", 1)[0]
        wait_ready(url)
        client = Client(url)
        queue = f"bench-{kind}"
        task_type = "echo" if kind == "rust" else "noop"
        for start in range(0, a.tasks, 1000):
            n = min(1000, a.tasks - start)
            client.submit_many([{"type": task_type, "payload": i, "queue": queue}
                                for i in range(start, start + n)])
        r = Redis(redis_url)

        def completed():
            return client.queue(queue)["counts"]["completed"]

        api_cpu0, redis0 = api.cpu_s(), redis_cpu_s(r)
        t0 = time.time()
        if kind == "python":
            worker = Child([sys.executable, "-c", PY_WORKER, url, queue, str(a.concurrency)],
                           log=open(os.path.join(work, "py-worker.log"), "w"))
        elif kind == "ts":
            entry = os.path.join(TS_DIR, "dist", "src", "index.js")
            worker = Child(["node", "--input-type=module", "-e", TS_WORKER, entry, url, queue,
                            str(a.concurrency)],
                           log=open(os.path.join(work, "ts-worker.log"), "w"))
        else:
            worker = Child([a.orq, "worker", "--redis", redis_url, "--queues", queue,
                            "--concurrency", str(a.concurrency)],
                           log=open(os.path.join(work, "rust-worker.log"), "w"))
        wait_until(lambda: completed() >= a.tasks, f"orq {kind} worker to finish")
        secs = time.time() - t0
        out = {
            "tasks_per_s": a.tasks / secs,
            "worker_cpu_us": worker.cpu_s() * 1e6 / a.tasks,
            "redis_cpu_us": (redis_cpu_s(r) - redis0) * 1e6 / a.tasks,
            "api_cpu_us": (api.cpu_s() - api_cpu0) * 1e6 / a.tasks if kind != "rust" else None,
        }
        worker.stop()
        client.close()
        r.close()
        return out
    finally:
        api.stop()


def run_rq(a, redis_url, work):
    from redis import Redis as PyRedis
    from rq import Queue

    with open(os.path.join(work, "bench_noop.py"), "w") as f:
        f.write(NOOP_MODULE)
    sys.path.insert(0, work)
    import bench_noop  # noqa: F401  (RQ enqueues the function by its import path)

    conn = PyRedis.from_url(redis_url)
    q = Queue("bench", connection=conn)
    for start in range(0, a.tasks, 1000):
        n = min(1000, a.tasks - start)
        q.enqueue_many([Queue.prepare_data("bench_noop.noop", args=(i,))
                        for i in range(start, start + n)])
    r = Redis(redis_url)
    redis0 = redis_cpu_s(r)
    env = dict(os.environ, PYTHONPATH=work)
    t0 = time.time()
    proc = subprocess.Popen([os.path.join(os.path.dirname(sys.executable), "rq"), "worker",
                             "--burst", "--url", redis_url, "--worker-class",
                             "rq.worker.SimpleWorker", "--quiet", "bench"],
                            env=env, cwd=work, stdout=subprocess.DEVNULL,
                            stderr=open(os.path.join(work, "rq.log"), "w"))
    _, status, usage = os.wait4(proc.pid, 0)
    secs = time.time() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"rq worker failed; see {work}/rq.log")
    from rq.registry import FinishedJobRegistry

    done = len(FinishedJobRegistry("bench", connection=conn))
    if done != a.tasks:
        raise RuntimeError(f"rq finished {done} of {a.tasks} jobs")
    out = {
        "tasks_per_s": a.tasks / secs,
        "worker_cpu_us": (usage.ru_utime + usage.ru_stime) * 1e6 / a.tasks,
        "redis_cpu_us": (redis_cpu_s(r) - redis0) * 1e6 / a.tasks,
        "api_cpu_us": None,
    }
    r.close()
    return out


def fmt(xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        return "-"
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tasks", type=int, default=5000)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--orq", default=os.path.join(ROOT, "target", "release", "orq"))
    p.add_argument("--json")
    p.add_argument("--only", default="orq-python,orq-ts,orq-rust,rq",
                   help="the workers to run, comma-separated (default: all four)")
    a = p.parse_args()
    ensure_venv()
    if not os.path.exists(os.path.join(TS_DIR, "dist", "src", "index.js")):
        subprocess.check_call(["npm", "ci", "--no-audit", "--no-fund"], cwd=TS_DIR)
        subprocess.check_call(["npm", "run", "build"], cwd=TS_DIR)
    results = {n: [] for n in ("orq-python", "orq-ts", "orq-rust", "rq") if n in a.only.split(",")}
    for run in range(a.runs):
        for name in results:
            with tempfile.TemporaryDirectory() as work:
                redis, url = start_redis(work)
                try:
                    if name == "rq":
                        res = run_rq(a, url, work)
                    else:
                        res = run_orq(a, name.split("-")[1], url, work)
                finally:
                    redis.kill()
                    redis.wait()
            results[name].append(res)
            print(f"run {run + 1} {name}: {res['tasks_per_s']:,.0f} tasks/s", file=sys.stderr)
    print(f"\n{a.tasks} no-op tasks, one worker process each, concurrency {a.concurrency} "
          f"(RQ: one job at a time), median (min-max) of {a.runs} runs\n")
    print("| worker | tasks/s | worker CPU us/task | Redis CPU us/task | orq api CPU us/task |")
    print("|---|---|---|---|---|")
    for name, rs in results.items():
        print(f"| {name} | {fmt([r['tasks_per_s'] for r in rs])} | "
              f"{fmt([r['worker_cpu_us'] for r in rs])} | {fmt([r['redis_cpu_us'] for r in rs])} | "
              f"{fmt([r['api_cpu_us'] for r in rs])} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
