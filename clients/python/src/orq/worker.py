"""`Worker`: runs Python handlers for orq's tasks over the HTTP worker protocol.

One thread long-polls ``POST /api/v1/leases`` for as many tasks as it has free slots (it never
busy-polls: orq answers as soon as work is ready), a pool of ``concurrency`` threads runs the
handlers, one thread heartbeats every running task (see :mod:`orq._beats`), and each outcome is
reported with the lease's token (see :mod:`orq._reports`): the handler's return value completes
the task, :class:`orq.Permanent` sends it to the dead-letter queue, any other exception fails the
attempt (retried with backoff). ``SIGTERM``/``SIGINT`` (or :meth:`Worker.stop`) stop leasing, let
running handlers finish within ``shutdown_grace_s``, and give the others back.

Delivery is at least once: a worker that dies mid-task leaves its lease to expire, and orq then
runs the task again with the next attempt and a higher fencing epoch (``job.epoch``).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import os
import re
import signal
import socket
import threading
import time
from typing import Any, Callable, Dict, Iterable, Optional

from ._beats import beat_loop
from ._completer import Completer
from ._http import backoff_s
from ._reports import send_report
from ._running import InFlight, Running
from .client import DEFAULT_URL, Client
from .errors import BadRequest, Forbidden, NotFound, OrqError, PayloadTooLarge, Unauthorized
from .job import Job, Permanent
from .types import LeasedTask

log = logging.getLogger("orq.worker")

#: A handler: takes the :class:`Job`, returns the result (JSON-serialisable), or raises. May be
#: an ``async def``.
Handler = Callable[[Job], Any]

#: Largest result (bytes of JSON): the server's limit.
RESULT_MAX_BYTES = 1 << 20
#: Longest wait of one lease call (ms): the server's bound.
WAIT_MS_MAX = 30_000
#: Most tasks one lease call asks for: the server's bound.
LEASE_COUNT_MAX = 100
#: Least time between two warnings about queues that do not exist yet, or about failing lease
#: calls (seconds).
LOG_EVERY_S = 30.0
#: Longest error message reported (bytes of UTF-8): the server's limit; longer ones are cut.
ERROR_MAX_BYTES = 64 * 1024
#: How long after the shutdown's grace (or a second signal) a stop waits for the lease call in
#: flight, beyond its ``wait_ms`` (seconds): what it brings is given back.
LEASE_JOIN_MARGIN_S = 5.0


def default_worker_id() -> str:
    """``py-<host>-<pid>``, in the worker id alphabet ``[A-Za-z0-9._-]``, at most 64 bytes."""
    host = re.sub(r"[^A-Za-z0-9._-]", "-", socket.gethostname())[:40] or "host"
    return f"py-{host}-{os.getpid()}"


class Worker:
    """Runs handlers for the tasks of ``queues``.

    Args:
        url: the API's address; api_key: a worker key (``orq key new --worker``) or an admin key.
        queues: the queues to lease from (1..16).
        tenants: take only these tenants' tasks (1..16; default: every tenant's, or those the
            worker key is limited to).
        concurrency: most handlers running at once (threads).
        worker_id: the id recorded on leases and in task histories (default
            :func:`default_worker_id`).
        wait_ms: how long one lease call waits for work (ms, at most 30000). A stop also waits
            for the call in flight to end (at most this) and gives back what it brings, so no
            task is left leased to a worker that is gone.
        shutdown_grace_s: how long a stop waits for running handlers before giving their tasks
            back (seconds); a second SIGTERM / SIGINT ends the wait at once.
        client: a :class:`Client` to use instead of making one.
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        api_key: Optional[str] = None,
        *,
        queues: Iterable[str],
        concurrency: int = 4,
        worker_id: Optional[str] = None,
        wait_ms: int = 5_000,
        shutdown_grace_s: float = 30.0,
        client: Optional[Client] = None,
        tenants: Optional[Iterable[str]] = None,
    ) -> None:
        self.queues = list(queues)
        self.tenants = None if tenants is None else list(tenants)
        if not self.queues:
            raise ValueError("queues: name at least one queue")
        if concurrency < 1:
            raise ValueError("concurrency: at least 1")
        if not 0 <= wait_ms <= WAIT_MS_MAX:
            raise ValueError(f"wait_ms: 0..{WAIT_MS_MAX}")
        self.id = worker_id or default_worker_id()
        self.concurrency = concurrency
        self.wait_ms = wait_ms
        self.shutdown_grace_s = shutdown_grace_s
        self.client = client or Client(url, api_key)
        self._handlers: Dict[str, Handler] = {}
        self._in_flight = InFlight(concurrency)
        self._stopping = threading.Event()
        self._beats_stop = threading.Event()
        #: Set by a second stop (signal): skip what is left of the grace.
        self._hurry = threading.Event()
        self._lease_thread: Optional[threading.Thread] = None
        #: Sends completions together while the worker runs.
        self._completer: Optional[Completer] = None
        #: The error that stopped the worker (a bad key, a refused queue), or None.
        self.fatal: Optional[OrqError] = None

    # Handlers.

    def handler(self, type: str) -> Callable[[Handler], Handler]:
        """Decorator: run ``fn`` for tasks of handler type ``type``."""

        def register(fn: Handler) -> Handler:
            self.register(type, fn)
            return fn

        return register

    def register(self, type: str, fn: Handler) -> None:
        """Run ``fn`` for tasks of handler type ``type``."""
        self._handlers[type] = fn

    # Life cycle.

    def stop(self) -> None:
        """Stop leasing; :meth:`run` then lets running handlers finish within the grace and
        returns. A second call ends the grace at once (running tasks are given back). Safe from
        any thread and from signal handlers."""
        if self._stopping.is_set():
            self._hurry.set()
        self._stopping.set()
        with self._in_flight.changed:
            self._in_flight.changed.notify_all()

    def run(self, *, install_signal_handlers: bool = True) -> None:
        """Lease and run tasks until :meth:`stop` (or SIGTERM / SIGINT when
        ``install_signal_handlers`` and this is the main thread). Raises the fatal error when a
        lease was refused for good (a bad key, a forbidden queue)."""
        previous = {}
        if install_signal_handlers and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                previous[sig] = signal.signal(sig, lambda *_: self.stop())
        beats = threading.Thread(
            target=beat_loop,
            args=(self.client, self._in_flight, self._beats_stop, self._timed_out),
            name="orq-heartbeat",
            daemon=True,
        )
        leases = threading.Thread(target=self._lease_loop, name="orq-lease", daemon=True)
        self._lease_thread = leases
        self._completer = Completer(self.client)
        beats.start()
        leases.start()
        log.info("worker %s started: queues %s, concurrency %d", self.id, self.queues, self.concurrency)
        try:
            while not self._stopping.wait(0.2):
                pass
        finally:
            self._shutdown()
            for sig, h in previous.items():
                signal.signal(sig, h)
        if self.fatal is not None:
            raise self.fatal

    def _shutdown(self) -> None:
        self._stopping.set()
        running = len(self._in_flight.snapshot())
        if running:
            log.info("worker %s stopping: waiting up to %.1f s for %d running handlers", self.id, self.shutdown_grace_s, running)
        until = time.monotonic() + self.shutdown_grace_s
        while not self._in_flight.wait_empty(min(until, time.monotonic() + 0.2)):
            if self._hurry.is_set() or time.monotonic() >= until:
                break
        for r in self._in_flight.snapshot():
            if r.job.stop("shutdown"):
                log.warning("task %s: still running at the end of the grace; giving it back", r.job.id)
                self._release(r.job.task, r)
        # The lease call in flight may still bring tasks: wait for it, and give them back.
        if self._lease_thread is not None and not self._hurry.is_set():
            self._lease_thread.join(self.wait_ms / 1000 + LEASE_JOIN_MARGIN_S)
        if self._completer is not None:
            self._completer.stop()
        self._beats_stop.set()
        log.info("worker %s stopped", self.id)

    # Leasing.

    def _lease_loop(self) -> None:
        failures = 0
        last_log = 0.0
        while not self._stopping.is_set():
            free = self._in_flight.wait_free(self._stopping)
            if self._stopping.is_set():
                break
            try:
                tasks = self.client.lease(
                    self.id,
                    self.queues,
                    count=min(free, LEASE_COUNT_MAX),
                    wait_ms=self.wait_ms,
                    tenants=self.tenants,
                    retries=0,
                )
            except NotFound as e:
                if not e.message.startswith("queues:"):
                    # Not a missing queue: the route itself (an orq without the protocol).
                    log.error("worker %s: the lease route answered 404 (%s); stopping", self.id, e)
                    self.fatal = e
                    self.stop()
                    break
                # A queue exists once a task was submitted to it: wait for that.
                if time.monotonic() - last_log >= LOG_EVERY_S:
                    log.warning("worker %s: %s; asking again until it exists", self.id, e.message)
                    last_log = time.monotonic()
                failures += 1
                self._stopping.wait(min(2.0, 0.25 * failures))
                continue
            except (Unauthorized, Forbidden, BadRequest) as e:
                log.error("worker %s: the lease call was refused (%s); stopping", self.id, e)
                self.fatal = e
                self.stop()
                break
            except OrqError as e:
                failures += 1
                wait = backoff_s(failures, e.retry_after_s)
                if failures == 1 or time.monotonic() - last_log >= LOG_EVERY_S:
                    log.warning("worker %s: lease call failed (%s); asking again with backoff", self.id, e)
                    last_log = time.monotonic()
                self._stopping.wait(wait)
                continue
            if failures:
                log.info("worker %s: lease calls answered again after %d failures", self.id, failures)
                failures = 0
            for t in tasks:
                if self._stopping.is_set():
                    # Leased while stopping: back at once, no attempt spent.
                    self._release(t, Running(Job(t, self.id)))
                else:
                    self._start(t)

    def _start(self, t: LeasedTask) -> None:
        job = Job(t, self.id)
        entry = Running(job)
        self._in_flight.add(entry)
        # A daemon thread per task: a handler that never returns cannot keep the process alive
        # after run() (its task was given back at the end of the grace).
        threading.Thread(target=self._execute, args=(entry,), name=f"orq-task-{job.id}", daemon=True).start()

    # Running and reporting.

    def _execute(self, entry: Running) -> None:
        job = entry.job
        try:
            outcome = self._call_handler(job)
            if job.cancelled.is_set():
                # Cancelled, lease lost, timed out (already failed) or given back: orq would
                # refuse this outcome.
                log.info("task %s: handler ended after it was told to stop (%s); outcome dropped", job.id, job.reason)
                return
            kind, value, permanent, size = outcome
            if kind == "complete" and self._completed_together(entry, value, size):
                return
            if kind == "complete":
                done = send_report("completion", entry, lambda: self.client.complete(job.id, job.queue, job.token, value, retries=0))
                if isinstance(done, (BadRequest, PayloadTooLarge)):
                    # orq refused the result itself (JSON it cannot read back, too large):
                    # the task fails for good, saying why, rather than wait out its lease.
                    kind, value, permanent = "fail", f"orq refused the handler's result: {done.message}", True
            if kind == "fail":
                self._report_failure(entry, value, permanent)
        except BaseException:  # a bug here must not end the thread silently
            log.exception("task %s: unexpected error while running or reporting", job.id)
        finally:
            self._in_flight.remove(job.id)

    def _completed_together(self, entry: Running, value: Any, size: int) -> bool:
        """Complete with the other completions waiting (:mod:`orq._completer`); False when the
        batch did not apply it (its call or the item refused): the caller sends it alone, with
        retries, and learns why."""
        completer = self._completer
        if completer is None:
            return False
        job = entry.job
        answer = completer.complete(job.queue, job.id, job.token, value, size)
        if isinstance(answer, str):
            entry.reported = True
            return True
        return False

    def _report_failure(self, entry: Running, error: str, permanent: bool) -> None:
        job = entry.job
        msg = _cut(error)
        done = send_report("failure", entry, lambda: self.client.fail(job.id, job.queue, job.token, msg, permanent=permanent, retries=0))
        if isinstance(done, BadRequest):
            # The message itself was refused (text orq cannot store): send a plain one.
            plain = _cut(msg.encode("ascii", "backslashreplace").decode("ascii")) or "error"
            send_report("failure", entry, lambda: self.client.fail(job.id, job.queue, job.token, plain, permanent=permanent, retries=0))

    def _call_handler(self, job: Job) -> "tuple[str, Any, bool, int]":
        """Run the handler: ``(kind, value, permanent, size)``, kind ``complete`` (value the
        result, size its bytes as JSON) or ``fail`` (value the error)."""
        fn = self._handlers.get(job.type)
        if fn is None:
            msg = f"no handler for type {job.type!r} on worker {self.id}"
            log.warning("task %s: %s", job.id, msg)
            return ("fail", msg, False, 0)
        try:
            result = _run_async(fn, job) if inspect.iscoroutinefunction(fn) else fn(job)
        except Permanent as e:
            log.info("task %s: failed permanently: %s", job.id, _describe(e))
            return ("fail", _describe(e), True, 0)
        except BaseException as e:  # SystemExit, KeyboardInterrupt, CancelledError too
            log.warning("task %s: attempt %d failed: %s", job.id, job.attempt, _describe(e))
            return ("fail", _describe(e), False, 0)
        try:
            # As the transport will send it: no NaN or infinity, UTF-8 (no lone surrogates).
            size = len(json.dumps(result, allow_nan=False, ensure_ascii=False).encode("utf-8"))
        except Exception as e:  # TypeError, ValueError (NaN), RecursionError, UnicodeEncodeError
            log.warning("task %s: the handler's result is not JSON: %s", job.id, _describe(e))
            return ("fail", f"the handler's result is not JSON: {_describe(e)}", True, 0)
        if size > RESULT_MAX_BYTES:
            return ("fail", f"the handler's result is {size} bytes, over the {RESULT_MAX_BYTES} limit", True, 0)
        return ("complete", result, False, size)

    def _timed_out(self, entry: Running) -> None:
        job = entry.job
        ms = int((entry.timeout or 0) * 1000)
        log.warning("task %s: handler still running after its timeout (%d ms); failing the attempt", job.id, ms)
        msg = f"handler timed out after {ms} ms"
        send_report("timeout", entry, lambda: self.client.fail(job.id, job.queue, job.token, msg, retries=0))

    def _release(self, t: LeasedTask, entry: Running) -> None:
        send_report("release", entry, lambda: self.client.release(t.id, t.queue, t.token, retries=0))


def _describe(e: BaseException) -> str:
    """``Type: message`` of an exception (its ``str`` may itself raise)."""
    name = type(e).__name__
    try:
        text = str(e)
    except Exception:
        text = "<unprintable>"
    return f"{name}: {text}" if text else name


def _cut(text: str) -> str:
    """``text`` within :data:`ERROR_MAX_BYTES` of UTF-8, cut on a character boundary, with lone
    surrogates (which UTF-8 cannot carry) escaped."""
    data = text.encode("utf-8", "backslashreplace")
    if len(data) <= ERROR_MAX_BYTES:
        return data.decode("utf-8")
    return data[: ERROR_MAX_BYTES - 3].decode("utf-8", "ignore") + "..."



def _run_async(fn: Handler, job: Job) -> Any:
    """Run an ``async def`` handler on this thread's own event loop; cancel it when the job is
    told to stop."""

    async def main() -> Any:
        task = asyncio.ensure_future(fn(job))
        while not task.done():
            await asyncio.wait({task}, timeout=0.1)
            if job.cancelled.is_set() and not task.done():
                task.cancel()
        return task.result()

    return asyncio.run(main())
