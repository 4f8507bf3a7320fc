#!/usr/bin/env python3
"""End-to-end throughput of a running orq: submit N echo tasks in batches over HTTP, then wait
until all are completed. Prints the submit rate and the end-to-end rate (tasks/s).

Usage: bench/throughput.py [--url http://127.0.0.1:8080] [--tasks 10000] [--batch 1000]

Uses a fresh queue name per run so earlier runs do not count. Standard library only.
"""
import argparse
import json
import time
import urllib.request


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.loads(r.read() or b"null")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--tasks", type=int, default=10000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--timeout-s", type=float, default=600)
    a = p.parse_args()
    api = a.url.rstrip("/") + "/api/v1"
    queue = "bench-%d" % int(time.time() * 1000)
    t0 = time.monotonic()
    sent = 0
    while sent < a.tasks:
        n = min(a.batch, a.tasks - sent)
        tasks = [{"queue": queue, "payload": {"i": sent + i}} for i in range(n)]
        call("POST", api + "/tasks/batch", {"tasks": tasks})
        sent += n
    t_submit = time.monotonic() - t0
    completed = 0
    while completed < a.tasks:
        if time.monotonic() - t0 > a.timeout_s:
            raise SystemExit("timed out with %d of %d completed" % (completed, a.tasks))
        time.sleep(0.05)
        completed = call("GET", api + "/queues/" + queue)["counts"]["completed"]
    t_all = time.monotonic() - t0
    print(json.dumps({
        "queue": queue, "tasks": a.tasks, "batch": a.batch,
        "submit_s": round(t_submit, 3), "submit_per_s": round(a.tasks / t_submit),
        "total_s": round(t_all, 3), "complete_per_s": round(a.tasks / t_all),
    }))


if __name__ == "__main__":
    main()
