"""A worker process for the process tests: `python worker_proc.py URL QUEUE MODE DIR`.

Its handler of type `job` writes `DIR/started-<pid>` when it starts, then by MODE:
`hang` waits (until cancelled, at most 120 s); `work` returns at once; `slow` sleeps 1.5 s;
`stuck` sleeps 600 s, deaf to cancellation (the grace is then 1 s). The worker's lease calls
wait WAIT_MS (env, default 2000) ms.
It returns `{"by": <pid>, "attempt": n, "epoch": e}`. Logs go to stderr."""

import logging
import os
import sys
import time
from pathlib import Path

from orq import Job, Worker

url, queue, mode, marks = sys.argv[1], sys.argv[2], sys.argv[3], Path(sys.argv[4])
logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
worker = Worker(url, queues=[queue], concurrency=2, wait_ms=int(os.environ.get("WAIT_MS", "2000")),
                shutdown_grace_s=1 if mode == "stuck" else 30)


@worker.handler("job")
def job(j: Job):
    (marks / f"started-{os.getpid()}").write_text(j.id)
    if mode == "hang":
        j.cancelled.wait(120)
    elif mode == "slow":
        time.sleep(1.5)
    elif mode == "stuck":
        time.sleep(600)
    return {"by": os.getpid(), "attempt": j.attempt, "epoch": j.epoch}


worker.run()
print("worker exited cleanly", flush=True)
