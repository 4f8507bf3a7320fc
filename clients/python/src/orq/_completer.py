"""Completions sent together: handler threads hand their results to one thread that sends all
that are waiting in one ``POST /api/v1/leases/complete`` (up to 100, and
:data:`BATCH_BYTES_MAX` of results), so a busy worker makes one request for several tasks
instead of one each. Nothing lingers: a completion waits only while the previous call is out.
What the batch does not settle (its call refused, or an item refused) goes back to the task's
own thread, which sends it alone with the usual retries (:func:`orq._reports.send_report`)."""

from __future__ import annotations

import logging
import queue as queues
import threading
from concurrent.futures import Future
from typing import Any, Dict, List, Optional, Tuple, Union

from .client import Client
from .errors import OrqError

log = logging.getLogger("orq.worker")

#: Most completions in one call (the API's limit).
BATCH_MAX = 100
#: Most bytes of results in one call (the API takes 4 MiB of body in all).
BATCH_BYTES_MAX = 3 * 1024 * 1024
#: Results larger than this go alone (bytes).
ALONE_BYTES = 256 * 1024

#: One completion waiting: (queue, id, token, result, size in bytes, its future).
Item = Tuple[str, str, str, Any, int, "Future[Union[str, OrqError, None]]"]


class Completer:
    """The thread that sends waiting completions together."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._waiting: "queues.Queue[Optional[Item]]" = queues.Queue()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="orq-completer", daemon=True)
        self._thread.start()

    def complete(self, queue: str, id: str, token: str, result: Any, size: int) -> Union[str, OrqError, None]:
        """Send one completion with the others waiting; its answer: ``"applied"`` /
        ``"already_applied"``, the item's error, or None when the batch did not settle it (its
        call was refused): the caller then sends it alone."""
        if size > ALONE_BYTES or self._stopped.is_set():
            return None
        f: "Future[Union[str, OrqError, None]]" = Future()
        self._waiting.put((queue, id, token, result, size, f))
        if self._stopped.is_set():
            self._drain()
        return f.result()

    def stop(self) -> None:
        """End the thread once the completions waiting now are sent."""
        self._waiting.put(None)

    def _drain(self) -> None:
        """Answer None to every completion still waiting (the thread has ended)."""
        while True:
            try:
                item = self._waiting.get_nowait()
            except queues.Empty:
                return
            if item is not None and not item[5].done():
                item[5].set_result(None)

    def _loop(self) -> None:
        try:
            self._serve()
        finally:
            self._stopped.set()
            self._drain()

    def _serve(self) -> None:
        pending: List[Item] = []
        while True:
            first = self._waiting.get()
            if first is None:
                return
            pending = [first]
            stop = False
            while len(pending) < BATCH_MAX:
                try:
                    nxt = self._waiting.get_nowait()
                except queues.Empty:
                    break
                if nxt is None:
                    stop = True
                    break
                pending.append(nxt)
            by_queue: Dict[str, List[Item]] = {}
            for item in pending:
                by_queue.setdefault(item[0], []).append(item)
            for q, items in by_queue.items():
                self._send(q, items)
            if stop:
                return

    def _send(self, queue: str, items: List[Item]) -> None:
        """Send ``items`` in calls of at most BATCH_BYTES_MAX of results."""
        chunk: List[Item] = []
        size = 0
        for item in items:
            if chunk and size + item[4] > BATCH_BYTES_MAX:
                self._call(queue, chunk)
                chunk, size = [], 0
            chunk.append(item)
            size += item[4]
        if chunk:
            self._call(queue, chunk)

    def _call(self, queue: str, chunk: List[Item]) -> None:
        try:
            answers: List[Union[str, OrqError, None]] = list(
                self.client.complete_many(queue, [(i[1], i[2], i[3]) for i in chunk], retries=0)
            )
        except OrqError as e:
            log.debug("a batch of %d completions was refused (%s); each is sent alone", len(chunk), e)
            answers = [None] * len(chunk)
        except BaseException:  # never leave a handler thread waiting
            log.exception("a batch of %d completions failed; each is sent alone", len(chunk))
            answers = [None] * len(chunk)
        if len(answers) != len(chunk):
            log.error("a batch of %d completions was answered %d reports; each is sent alone", len(chunk), len(answers))
            answers = [None] * len(chunk)
        for item, answer in zip(chunk, answers):
            item[5].set_result(answer)
