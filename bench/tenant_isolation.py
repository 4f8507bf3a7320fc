#!/usr/bin/env python3
"""Can one tenant slow the others? The attack of issue 42, item 1, measured (bench/README.md).

    python3 bench/tenant_isolation.py [--orq target/release/orq] [--spray 10000]
        [--lookups 36] [--lookup-pause-ms 100] [--samples 60] [--idle-s 5] [--json FILE]

`orq serve --redis <private redis-server> --api-keys <keys>` with an admin key and two tenant
keys, `acme` (the attacker) and `globex` (the victim), both allowed every queue, and the submit
rate limit off (so the spray meets the queue allowance, not the rate limit). Figures:

  victim_queue_ms     globex's GET /api/v1/queues/default, one at a time (p50 / p99 / max)
  victim_task_ms      globex's submit-to-completed time of an echo task (submit, then poll its
                      GET /tasks/{id}?queue=default every 2 ms)
  idle_cmds_per_s     Redis commands per second with nothing submitted (INFO stats, over
                      --idle-s), which the per-queue background loops cost

measured three times: at rest; after acme sprays --spray queue names (`spray0000`...) in
batches of 1,000 single-task submits, each task to its own queue (how many queues it got is
printed: at most --tenant-queues-max); and while --lookups threads of acme's each look up a task
id without `?queue=`, pause --lookup-pause-ms, and again. No thresholds: the figures are for
docs/measurements.md.
Needs redis-server and a built orq.
"""

import argparse
import hashlib
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import Child, free_port, percentiles, start_redis, wait_ready  # noqa: E402
from resp import Redis  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# A well-formed task id that no task has (the lookups' target).
ABSENT_ID = "01HZZZZZZZZZZZZZZZZZZZZZZZ"


def call(base, key, method, path, body=None, timeout=30):
    """(status, JSON body) of one request as `key`."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method)
    req.add_header("authorization", f"Bearer {key}")
    if data is not None:
        req.add_header("content-type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def keys_file(path):
    """Write a keys file of an admin and tenant keys acme and globex; the keys by name."""
    keys = {name: "orq_" + secrets.token_hex(16) for name in ("ops", "acme", "globex")}
    lines = []
    for name, key in keys.items():
        digest = hashlib.sha256(key.encode()).hexdigest()
        scope = 'role = "admin"' if name == "ops" else f'tenant = "{name}"'
        lines.append(f'[[key]]\nname = "{name}"\nsha256 = "{digest}"\n{scope}\n')
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return keys


def victim_figures(base, key, samples):
    """globex's queue read and submit-to-completed times, ms."""
    queue_ms, task_ms = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        status, _ = call(base, key, "GET", "/api/v1/queues/default")
        queue_ms.append((time.perf_counter() - t0) * 1000)
        assert status in (200, 404), status
        t0 = time.perf_counter()
        status, task = call(base, key, "POST", "/api/v1/tasks", {"payload": {"n": 1}})
        assert status == 201, (status, task)
        while True:
            _, t = call(base, key, "GET", f"/api/v1/tasks/{task['id']}?queue=default")
            if t["status"] == "completed":
                break
            time.sleep(0.002)
        task_ms.append((time.perf_counter() - t0) * 1000)
    return {"victim_queue_ms": percentiles(queue_ms), "victim_task_ms": percentiles(task_ms)}


def idle_commands_per_s(r, seconds):
    before = int(r.info("stats")["total_commands_processed"])
    time.sleep(seconds)
    after = int(r.info("stats")["total_commands_processed"])
    return (after - before - 2) / seconds  # less the two INFO calls


def spray(base, key, n):
    """acme's batch submits to n queue names; (created queues, refused batches)."""
    refused = 0
    for start in range(0, n, 1000):
        tasks = [{"queue": f"spray{i:04d}", "payload": 1}
                 for i in range(start, min(n, start + 1000))]
        status, _ = call(base, key, "POST", "/api/v1/tasks/batch", {"tasks": tasks}, timeout=120)
        if status != 201:
            refused += 1
    return refused


def lookups(base, key, threads, stop, counts, pause_s):
    """`threads` of acme's, each looking up an absent task id without `?queue=`, then pausing
    `pause_s`, until `stop` (the issue's attack was 36 such lookups at once)."""
    def loop(i):
        while not stop.is_set():
            call(base, key, "GET", f"/api/v1/tasks/{ABSENT_ID}")
            counts[i] += 1
            stop.wait(pause_s)
    ts = [threading.Thread(target=loop, args=(i,), daemon=True) for i in range(threads)]
    for t in ts:
        t.start()
    return ts


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--orq", default=os.path.join(ROOT, "target/release/orq"))
    p.add_argument("--spray", type=int, default=10_000)
    p.add_argument("--lookups", type=int, default=36)
    p.add_argument("--samples", type=int, default=60)
    p.add_argument("--idle-s", type=float, default=5.0)
    p.add_argument("--lookup-pause-ms", type=float, default=100.0)
    p.add_argument("--json")
    a = p.parse_args()
    work = tempfile.mkdtemp(prefix="orq-isolation-")
    redis_proc, url = start_redis(work)
    keys = keys_file(os.path.join(work, "keys.toml"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    orq = Child([a.orq, "serve", "--redis", url, "--api-keys", os.path.join(work, "keys.toml"),
                 "--listen", f"127.0.0.1:{port}", "--submit-rate-per-tenant", "0",
                 "--no-dashboard-build"], env={**os.environ, "RUST_LOG": "warn"})
    r = Redis(url)
    out = {}
    try:
        wait_ready(base)
        victim_figures(base, keys["globex"], 5)  # warm-up: connections, script cache
        out["rest"] = victim_figures(base, keys["globex"], a.samples)
        out["rest"]["idle_cmds_per_s"] = idle_commands_per_s(r, a.idle_s)
        refused = spray(base, keys["acme"], a.spray)
        _, qs = call(base, keys["ops"], "GET", "/api/v1/queues")
        out["spray"] = {"queues_named": a.spray, "batches_refused": refused,
                        "queues_after": len(qs["queues"])}
        out["after_spray"] = victim_figures(base, keys["globex"], a.samples)
        out["after_spray"]["idle_cmds_per_s"] = idle_commands_per_s(r, a.idle_s)
        stop, counts = threading.Event(), [0] * a.lookups
        ts = lookups(base, keys["acme"], a.lookups, stop, counts, a.lookup_pause_ms / 1000)
        time.sleep(1)
        t0, c0 = time.time(), sum(counts)
        out["under_lookups"] = victim_figures(base, keys["globex"], a.samples)
        out["under_lookups"]["attacker_lookups_per_s"] = (sum(counts) - c0) / (time.time() - t0)
        stop.set()
        for t in ts:
            t.join(timeout=60)
    finally:
        orq.stop()
        redis_proc.kill()
        redis_proc.wait()
    print(f"spray: {a.spray} queue names in batches of 1,000 -> {out['spray']['queues_after']} "
          f"queues exist, {out['spray']['batches_refused']} batches refused")
    print(f"{'figure':<34}{'at rest':>22}{'after the spray':>22}{'under lookups':>22}")
    for name in ("victim_queue_ms", "victim_task_ms"):
        cells = [f"{out[ph][name]['p50']:.1f} / {out[ph][name]['p99']:.1f}"
                 for ph in ("rest", "after_spray", "under_lookups")]
        print(f"{name + ' p50 / p99':<34}" + "".join(f"{c:>22}" for c in cells))
    cells = [f"{out['rest']['idle_cmds_per_s']:.0f}", f"{out['after_spray']['idle_cmds_per_s']:.0f}",
             f"{out['under_lookups']['attacker_lookups_per_s']:.0f} lookups/s"]
    print(f"{'idle Redis commands/s':<34}" + "".join(f"{c:>22}" for c in cells))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
