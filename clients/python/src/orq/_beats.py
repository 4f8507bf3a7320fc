"""The heartbeat loop of a worker: one thread that extends each in-flight lease every
``heartbeat_ms`` (as the lease answered), learns from the answers that a task was cancelled or
its lease lost (then sets the job's ``cancelled``), and fails a task whose ``timeout_ms`` passed.
A heartbeat refused transiently is sent again sooner: within half the lease's remaining time,
so a short outage never lets a running task's lease expire."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

from ._http import backoff_s
from ._running import InFlight, Running
from .client import Client
from .errors import LeaseLost, NotFound, OrqError, TaskCancelled

log = logging.getLogger("orq.worker")

#: Longest sleep of the loop (seconds): how late it may notice a handler's timeout.
TICK_MAX_S = 0.25
#: Shortest wait before a refused heartbeat is sent again (seconds).
RETRY_MIN_S = 0.05
#: How long a handler may run on after it was told to stop before the worker warns that it
#: holds its slot (seconds).
STUCK_WARN_S = 30.0


def beat_loop(
    client: Client,
    in_flight: InFlight,
    stop: threading.Event,
    on_timeout: Callable[[Running], None],
) -> None:
    """Heartbeat the tasks of ``in_flight`` until ``stop`` is set."""
    while not stop.is_set():
        now = time.monotonic()
        soonest = now + TICK_MAX_S
        for r in in_flight.snapshot():
            job = r.job
            if job.cancelled.is_set():
                if r.stuck_since is None:
                    r.stuck_since = now
                elif now - r.stuck_since >= STUCK_WARN_S and r.stuck_since > 0:
                    log.warning(
                        "task %s: the handler still runs %.0f s after it was told to stop (%s); "
                        "it holds one of the worker's slots until it returns (check job.cancelled)",
                        job.id, now - r.stuck_since, job.reason,
                    )
                    r.stuck_since = -1.0  # warned
                continue
            if r.timeout is not None and now - r.started >= r.timeout:
                if job.stop("timeout"):
                    on_timeout(r)
                continue
            if r.next_beat <= now:
                beat(client, r)
            soonest = min(soonest, r.next_beat)
        stop.wait(max(0.0, soonest - time.monotonic()))


def beat(client: Client, r: Running) -> None:
    """Send one heartbeat of ``r`` and schedule the next."""
    r.beat_idle.clear()
    try:
        _beat(client, r)
    finally:
        r.beat_idle.set()


def _beat(client: Client, r: Running) -> None:
    job = r.job
    try:
        answer = client.heartbeat(job.id, job.queue, job.token, retries=0)
        now = time.monotonic()
        r.deadline = now + answer["lease_left_ms"] / 1000.0
        r.next_beat = now + r.interval
        if r.failures:
            log.info("task %s: heartbeat answered again after %d refusals", job.id, r.failures)
        r.failures = 0
    except TaskCancelled:
        if job.stop("cancelled"):
            log.info("task %s: cancelled; the handler is told to stop", job.id)
    except (LeaseLost, NotFound) as e:
        if r.reported:
            return  # the worker's own report ended the lease
        if job.stop("lease_lost"):
            log.warning("task %s: lease lost (%s); the handler is told to stop", job.id, e)
    except OrqError as e:
        r.failures += 1
        now = time.monotonic()
        half_left = (r.deadline - now) / 2
        wait = min(r.interval, max(RETRY_MIN_S, half_left), max(RETRY_MIN_S, backoff_s(r.failures, e.retry_after_s)))
        r.next_beat = now + wait
        if r.failures == 1:
            log.warning("task %s: heartbeat refused (%s); sending it again in %.2f s", job.id, e, wait)
