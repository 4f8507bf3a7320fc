"""Sending a lease's reports (complete, fail, release) until orq has them: a transient failure
(503, no connection) is sent again with backoff for as long as the lease can still be live, as
orq applies a report with the same token once; ``lease_lost`` and ``cancelled`` mean the task is
no longer this worker's, and the report is dropped with a log line. Nothing is swallowed
silently."""

from __future__ import annotations

import logging
import time
from typing import Callable, Optional, Union

from ._http import backoff_s
from ._running import Running
from .errors import LeaseLost, NotFound, OrqError, TaskCancelled

log = logging.getLogger("orq.worker")

#: How long after the lease's deadline (by the local clock) a report is still sent again
#: (seconds): the local deadline is an estimate, and the store may still hold the lease.
GRACE_AFTER_DEADLINE_S = 1.0
#: Longest wait for the answer of a heartbeat in flight before a report gives up (seconds).
BEAT_ANSWER_WAIT_S = 30.0


def send_report(
    what: str,
    entry: Running,
    call: Callable[[], str],
    stopping_hard: Optional[Callable[[], bool]] = None,
) -> Union[str, OrqError, None]:
    """Run ``call`` (one report, no retries of its own) until it is answered. Returns
    ``"applied"`` / ``"already_applied"`` (and marks the entry reported); the error when orq
    refused the report itself for good (a 400 or 413: the caller may send another); None when
    the task is no longer this worker's or the report was given up (logged)."""
    job = entry.job
    attempt = 0
    while True:
        attempt += 1
        try:
            answer = call()
            entry.reported = True
            if attempt > 1:
                log.info("task %s: %s recorded after %d tries", job.id, what, attempt)
            return answer
        except TaskCancelled:
            log.info("task %s: cancelled while running; its %s was not recorded", job.id, what)
            return None
        except (LeaseLost, NotFound) as e:
            log.warning("task %s: lease lost before its %s was recorded (%s); dropped", job.id, what, e)
            return None
        except OrqError as e:
            late = time.monotonic() > entry.deadline + GRACE_AFTER_DEADLINE_S
            if late and e.transient and not entry.beat_idle.is_set():
                # A heartbeat is out: its answer may say the lease lives on (the deadline here
                # is an estimate); give up only if it does not.
                entry.beat_idle.wait(BEAT_ANSWER_WAIT_S)
                late = time.monotonic() > entry.deadline + GRACE_AFTER_DEADLINE_S
            if not e.transient and e.status in (400, 413):
                log.warning("task %s: orq refused its %s: %s", job.id, what, e)
                return e
            if not e.transient or late or (stopping_hard and stopping_hard()):
                why = "its lease has expired" if late else str(e)
                log.error(
                    "task %s: giving up on its %s (%s); orq retries the task once its lease expires",
                    job.id, what, why,
                )
                return None
            wait = backoff_s(attempt, e.retry_after_s)
            if attempt == 1:
                log.warning("task %s: %s refused (%s); sending it again", job.id, what, e)
            time.sleep(wait)
