"""`Job`: what a handler of :class:`orq.Worker` is given: the leased task's fields, the fencing
epoch, and a cancellation signal; and `Permanent`, the exception that fails a task for good."""

from __future__ import annotations

import threading
from typing import Any, Optional

from .types import LeasedTask


class Permanent(Exception):
    """Raise it from a handler to fail the task permanently: no retry, straight to the
    dead-letter queue. Any other exception fails the attempt and the task is retried with its
    backoff while it has retries left."""


class Job:
    """One leased task in a handler's hands.

    ``cancelled`` is set when the handler should stop: ``reason`` then says why —
    ``"cancelled"`` (someone cancelled the task), ``"lease_lost"`` (the lease expired and the
    task went to another worker; this worker's result will be refused), ``"timeout"`` (the
    task's ``timeout_ms`` passed; the attempt was failed) or ``"shutdown"`` (the worker stopped
    and gave the task back). Python cannot stop a thread from outside: a long handler checks
    ``job.cancelled`` (or waits on it) and returns early.
    """

    def __init__(self, task: LeasedTask, worker_id: str) -> None:
        self.task = task
        #: The id of the worker running it.
        self.worker_id = worker_id
        #: Set when the handler should stop (see the class documentation).
        self.cancelled = threading.Event()
        #: Why ``cancelled`` was set, or None.
        self.reason: Optional[str] = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        """The task id."""
        return self.task.id

    @property
    def queue(self) -> str:
        """The task's queue."""
        return self.task.queue

    @property
    def tenant(self) -> str:
        """The task's tenant."""
        return self.task.tenant

    @property
    def type(self) -> str:
        """The handler type."""
        return self.task.type

    @property
    def payload(self) -> Any:
        """The payload (JSON, as submitted)."""
        return self.task.payload

    @property
    def attempt(self) -> int:
        """This attempt's number (1 for the first run)."""
        return self.task.attempt

    @property
    def max_retries(self) -> int:
        """Retries allowed after the first attempt."""
        return self.task.max_retries

    @property
    def epoch(self) -> int:
        """The fencing epoch of this lease: it grows with every lease of the task. Hand it to
        the systems the handler writes to, so they refuse a write of an older lease."""
        return self.task.epoch

    @property
    def traceparent(self) -> Optional[str]:
        """The W3C ``traceparent`` the task was submitted under (orq's submit span when the API
        exports traces, else the submitter's own), or None. A handler that traces continues it,
        e.g. ``opentelemetry.propagate.extract({"traceparent": job.traceparent, "tracestate":
        job.tracestate or ""})`` as the parent context of its span."""
        return self.task.traceparent

    @property
    def tracestate(self) -> Optional[str]:
        """The ``tracestate`` that came with :attr:`traceparent`, or None."""
        return self.task.tracestate

    @property
    def token(self) -> str:
        """The lease token the worker's reports present."""
        return self.task.token

    def stop(self, reason: str) -> bool:
        """Set ``cancelled`` with ``reason`` (the first reason wins); True when this call set it."""
        with self._lock:
            if self.cancelled.is_set():
                return False
            self.reason = reason
            self.cancelled.set()
            return True

    def __repr__(self) -> str:
        return f"Job(id={self.id!r}, type={self.type!r}, attempt={self.attempt}, epoch={self.epoch})"
