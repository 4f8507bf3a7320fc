"""The in-flight tasks of a worker: each :class:`Running` entry holds its :class:`Job`, its
lease's deadline and heartbeat schedule by the local monotonic clock, and :class:`InFlight` is
the set of them, guarded by one lock whose condition wakes the lease loop when a slot frees."""

from __future__ import annotations

import threading
import time
from typing import Dict, List, Optional

from .job import Job


class Running:
    """One in-flight task (times are ``time.monotonic()`` seconds)."""

    def __init__(self, job: Job) -> None:
        now = time.monotonic()
        t = job.task
        self.job = job
        #: When the handler started.
        self.started = now
        #: The lease's deadline by this clock: the lease call just answered, so at most now
        #: plus the lease (moved on by every heartbeat that succeeds).
        self.deadline = now + t.lease_ms / 1000.0
        #: How often to heartbeat (seconds).
        self.interval = max(0.1, t.heartbeat_ms / 1000.0)
        #: When the next heartbeat is due.
        self.next_beat = now + self.interval
        #: Transient heartbeat failures in a row.
        self.failures = 0
        #: The handler's time limit (seconds), or None.
        self.timeout: Optional[float] = t.timeout_ms / 1000.0 if t.timeout_ms else None
        #: A report of this lease was applied (later heartbeats are expected to be refused).
        self.reported = False
        #: When the job was told to stop while its handler ran on (for one warning), or None.
        self.stuck_since: Optional[float] = None
        #: Clear while a heartbeat of this lease is out: a report waits for its answer before
        #: giving up on a lease that looks expired (the answer may say it lives on).
        self.beat_idle = threading.Event()
        self.beat_idle.set()


class InFlight:
    """The in-flight tasks, at most ``capacity``."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.lock = threading.Lock()
        #: Notified when a task leaves (a slot frees) or the worker stops.
        self.changed = threading.Condition(self.lock)
        self._by_id: Dict[str, Running] = {}

    def free(self) -> int:
        """Free slots now."""
        with self.lock:
            return self.capacity - len(self._by_id)

    def wait_free(self, stopping: threading.Event, timeout_s: float = 0.5) -> int:
        """Wait until a slot is free or ``stopping`` is set; the free slots then."""
        with self.changed:
            while len(self._by_id) >= self.capacity and not stopping.is_set():
                self.changed.wait(timeout_s)
            return self.capacity - len(self._by_id)

    def add(self, r: Running) -> None:
        """Track ``r``."""
        with self.lock:
            self._by_id[r.job.id] = r

    def remove(self, job_id: str) -> None:
        """Stop tracking a task; wakes the lease loop and a waiting shutdown."""
        with self.changed:
            self._by_id.pop(job_id, None)
            self.changed.notify_all()

    def snapshot(self) -> List[Running]:
        """The entries now."""
        with self.lock:
            return list(self._by_id.values())

    def wait_empty(self, until: float) -> bool:
        """Wait until no task is in flight or ``until`` (monotonic) passes; True when empty."""
        with self.changed:
            while self._by_id:
                left = until - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
            return True
