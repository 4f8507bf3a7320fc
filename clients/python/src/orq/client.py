"""`Client`: submit, read, list and cancel tasks, work the dead-letter queue, read queue
counts, and the worker protocol's calls one by one (lease, heartbeat, complete, fail, release)
for programs that drive their own loop; :class:`orq.Worker` drives them for you.

Every method raises a subclass of :class:`orq.OrqError` when orq refuses the call (typed by the
error code: :class:`orq.BadRequest`, :class:`orq.NotFound`, :class:`orq.LeaseLost`, ...) and
retries transient failures (503, 429, no connection) where a retry cannot do a thing twice:
reads, cancels, replays and the protocol's calls always (their reports carry the lease token,
so orq applies one once); a submit only with an ``idempotency_key``.
"""

from __future__ import annotations

import datetime
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import httpx

from ._http import Transport
from .errors import OrqError, from_answer
from .types import LeasedTask, Page, Task

#: Default address of the API (`orq serve`'s default).
DEFAULT_URL = "http://127.0.0.1:8080"
#: Extra time the HTTP client gives a waiting lease call beyond its ``wait_ms`` (seconds).
LEASE_TIMEOUT_MARGIN_S = 30.0
#: The HTTP status each per-item error code of :meth:`Client.complete_many` stands for.
ITEM_STATUS = {"lease_lost": 409, "cancelled": 409, "not_found": 404, "bad_request": 400}


def _time(v: Any) -> Any:
    """A ``datetime`` as RFC 3339 (naive ones are taken as UTC); anything else as given."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is None:
            v = v.replace(tzinfo=datetime.timezone.utc)
        return v.isoformat()
    return v


def task_body(
    type: str,
    payload: Any,
    *,
    queue: Optional[str] = None,
    tenant: Optional[str] = None,
    priority: Optional[int] = None,
    delay_ms: Optional[int] = None,
    run_at: Any = None,
    max_retries: Optional[int] = None,
    backoff: Optional[Dict[str, Any]] = None,
    lease_ms: Optional[int] = None,
    timeout_ms: Optional[int] = None,
    idempotency_key: Optional[str] = None,
) -> Dict[str, Any]:
    """The JSON body of one submit (``SubmitBody`` in the OpenAPI document); None is left out."""
    body = {
        "type": type,
        "payload": payload,
        "queue": queue,
        "tenant": tenant,
        "priority": priority,
        "delay_ms": delay_ms,
        "run_at": _time(run_at),
        "max_retries": max_retries,
        "backoff": backoff,
        "lease_ms": lease_ms,
        "timeout_ms": timeout_ms,
        "idempotency_key": idempotency_key,
    }
    return {k: v for k, v in body.items() if v is not None or k == "payload"}


class Client:
    """A client of one orq API.

    Args:
        url: the API's address (``http://host:port``; ``/api/v1`` is added).
        api_key: the bearer key, when the server has ``--api-keys``.
        timeout_s: time limit of one request (seconds; a waiting lease gets its wait on top).
        retries: most retries of a transient failure per call.
        http: an ``httpx.Client`` to send through (its base URL and headers are set).
    """

    def __init__(
        self,
        url: str = DEFAULT_URL,
        api_key: Optional[str] = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        http: Optional[httpx.Client] = None,
    ) -> None:
        self._t = Transport(url, api_key, timeout_s=timeout_s, retries=retries, http=http)

    def close(self) -> None:
        """Close the connections."""
        self._t.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # Tasks.

    def submit(self, type: str, payload: Any, **options: Any) -> Task:
        """Submit one task of handler ``type`` with ``payload`` (any JSON, at most 1 MiB).
        Options: ``queue``, ``tenant``, ``priority`` (0..9), ``delay_ms`` or ``run_at``
        (datetime or RFC 3339), ``max_retries``, ``backoff`` (``initial_ms``, ``multiplier``,
        ``max_ms``, ``jitter``), ``lease_ms``, ``timeout_ms``, ``idempotency_key`` (a submit
        with a key used in the last 24 h answers the existing task, and is retried safely)."""
        body = task_body(type, payload, **options)
        answer = self._t.request(
            "POST", "/tasks", json=body, idempotent="idempotency_key" in body
        )
        return Task.from_json(answer)

    def submit_many(self, tasks: Sequence[Dict[str, Any]]) -> List[Task]:
        """Submit 1..1000 tasks in one call, all or none. Each item is a dict of
        :func:`task_body`'s arguments (``type``, ``payload`` and the options)."""
        items = [task_body(**t) for t in tasks]
        keyed = all("idempotency_key" in i for i in items)
        answer = self._t.request("POST", "/tasks/batch", json={"tasks": items}, idempotent=keyed)
        return [Task.from_json(t) for t in answer["tasks"]]

    def get(self, id: str, *, queue: Optional[str] = None) -> Task:
        """The task ``id`` (``queue`` spares the server a search). :class:`orq.NotFound` when
        there is none."""
        return Task.from_json(self._t.request("GET", f"/tasks/{id}", params={"queue": queue}))

    def list(
        self,
        *,
        queue: Optional[str] = None,
        status: Optional[str] = None,
        tenant: Optional[str] = None,
        type: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Page:
        """One page of ``queue``'s tasks (default queue ``default``), newest first, filtered by
        ``status``, ``tenant`` and ``type``; pass the page's ``next_cursor`` for the next."""
        params = {"queue": queue, "status": status, "tenant": tenant, "type": type, "limit": limit, "cursor": cursor}
        return self._page(self._t.request("GET", "/tasks", params=params))

    def iter_tasks(self, **filters: Any) -> Iterator[Task]:
        """Every task :meth:`list` finds with ``filters``, page after page."""
        cursor = None
        while True:
            page = self.list(cursor=cursor, **filters)
            yield from page.tasks
            if not page.next_cursor:
                return
            cursor = page.next_cursor

    def cancel(self, id: str, *, queue: Optional[str] = None) -> Task:
        """Cancel a scheduled, queued, retrying or leased task (its worker learns it at its next
        heartbeat). :class:`orq.Conflict` when it already finished."""
        return Task.from_json(self._t.request("POST", f"/tasks/{id}/cancel", params={"queue": queue}))

    # The dead-letter queue.

    def dlq(
        self,
        *,
        queue: Optional[str] = None,
        tenant: Optional[str] = None,
        type: Optional[str] = None,
        limit: Optional[int] = None,
        cursor: Optional[str] = None,
    ) -> Page:
        """One page of ``queue``'s dead tasks."""
        params = {"queue": queue, "tenant": tenant, "type": type, "limit": limit, "cursor": cursor}
        return self._page(self._t.request("GET", "/dlq", params=params))

    def replay(self, id: str, *, queue: Optional[str] = None) -> Task:
        """Put dead task ``id`` back in its queue (attempts start again)."""
        return Task.from_json(self._t.request("POST", f"/dlq/{id}/replay", params={"queue": queue}))

    def replay_dlq(
        self,
        *,
        queue: Optional[str] = None,
        tenant: Optional[str] = None,
        type: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> Dict[str, Any]:
        """Replay up to ``limit`` dead tasks of ``queue`` (filtered); answers the server's count."""
        body = {k: v for k, v in {"queue": queue, "tenant": tenant, "type": type, "limit": limit}.items() if v is not None}
        return self._t.request("POST", "/dlq/replay", json=body)

    def purge(self, id: str, *, queue: Optional[str] = None) -> Dict[str, Any]:
        """Delete dead task ``id`` (admin keys only)."""
        return self._t.request("DELETE", f"/dlq/{id}", params={"queue": queue})

    # Queues.

    def queues(self) -> List[Dict[str, Any]]:
        """Every queue with its counts."""
        return self._t.request("GET", "/queues")["queues"]

    def queue(self, name: str) -> Dict[str, Any]:
        """One queue's counts and settings."""
        return self._t.request("GET", f"/queues/{name}")

    # The worker protocol, one call at a time.

    def lease(
        self,
        worker: str,
        queues: Iterable[str],
        *,
        count: int = 1,
        wait_ms: int = 0,
        tenants: Optional[Iterable[str]] = None,
        retries: Optional[int] = None,
    ) -> List[LeasedTask]:
        """Lease up to ``count`` (1..100) tasks of ``queues`` for worker id ``worker``; when none
        is ready, wait up to ``wait_ms`` (at most 30000) for one. ``tenants``: only these
        tenants' tasks (1..16 names; default every tenant's, or those a worker key is limited to,
        which may name only those). An empty list when the wait ended without work.
        :class:`orq.NotFound` for a queue that does not exist yet."""
        body: Dict[str, Any] = {"worker": worker, "queues": list(queues), "count": count, "wait_ms": wait_ms}
        if tenants is not None:
            body["tenants"] = list(tenants)
        answer = self._t.request(
            "POST",
            "/leases",
            json=body,
            timeout_s=wait_ms / 1000 + LEASE_TIMEOUT_MARGIN_S,
            retries=retries,
        )
        return [LeasedTask.from_json(t) for t in answer["tasks"]]

    def heartbeat(
        self, id: str, queue: str, token: str, *, extend_ms: Optional[int] = None, retries: Optional[int] = None
    ) -> Dict[str, Any]:
        """Extend a lease to now plus ``extend_ms`` (default the task's ``lease_ms``); answers
        ``lease_expires_at`` and ``lease_left_ms``. :class:`orq.TaskCancelled` when the task was
        cancelled, :class:`orq.LeaseLost` when the token no longer holds it."""
        body = {"queue": queue, "token": token, "extend_ms": extend_ms}
        return self._t.request("POST", f"/leases/{id}/heartbeat", json=body, retries=retries)

    def complete(self, id: str, queue: str, token: str, result: Any = None, *, retries: Optional[int] = None) -> str:
        """Complete a leased task with ``result`` (JSON, at most 1 MiB). Answers ``"applied"``,
        or ``"already_applied"`` when an earlier call with this token did it."""
        body = {"queue": queue, "token": token, "result": result}
        return self._t.request("POST", f"/leases/{id}/complete", json=body, retries=retries)["reported"]

    def complete_many(
        self, queue: str, completions: Sequence[Tuple[str, str, Any]], *, retries: Optional[int] = None
    ) -> List[Union[str, OrqError]]:
        """Complete several leased tasks of ``queue`` in one call: ``completions`` are
        ``(id, token, result)`` (1..100; each result at most 1 MiB, 4 MiB in all). Each is
        applied or refused on its own: the answer holds, in order, ``"applied"`` /
        ``"already_applied"`` or the error its own :meth:`complete` would have raised
        (:class:`orq.LeaseLost`, :class:`orq.TaskCancelled`, :class:`orq.NotFound`). A refusal
        of the whole call (503, 400, 413, ...) raises, and applied nothing."""
        body = {
            "queue": queue,
            "completions": [{"id": i, "token": t, "result": r} for i, t, r in completions],
        }
        answer = self._t.request("POST", "/leases/complete", json=body, retries=retries)
        out: List[Union[str, OrqError]] = []
        for item in answer["reports"]:
            if "reported" in item:
                out.append(item["reported"])
            else:
                code = str(item.get("error", {}).get("code", ""))
                out.append(from_answer(ITEM_STATUS.get(code, 409), item))
        return out

    def fail(
        self, id: str, queue: str, token: str, error: str, *, permanent: bool = False, retries: Optional[int] = None
    ) -> str:
        """Fail a leased task with ``error`` (1..65536 bytes): retried with backoff while it has
        retries left, or (``permanent``) sent to the dead-letter queue now."""
        body = {"queue": queue, "token": token, "error": error, "permanent": permanent}
        return self._t.request("POST", f"/leases/{id}/fail", json=body, retries=retries)["reported"]

    def release(self, id: str, queue: str, token: str, *, retries: Optional[int] = None) -> str:
        """Give a leased task back without spending an attempt (it is ready again at once)."""
        body = {"queue": queue, "token": token}
        return self._t.request("POST", f"/leases/{id}/release", json=body, retries=retries)["reported"]

    @staticmethod
    def _page(answer: Dict[str, Any]) -> Page:
        return Page([Task.from_json(t) for t in answer["tasks"]], answer.get("next_cursor"))
