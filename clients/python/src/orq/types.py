"""The shapes the client answers: a task (:class:`Task`) and its ended attempts
(:class:`Attempt`), a page of tasks (:class:`Page`) and a
leased task (:class:`LeasedTask`), read from the API's JSON (``/api/v1/openapi.json`` documents
every field). Each keeps the whole answer in ``raw`` for fields added later."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass
class Attempt:
    """One ended attempt of a task: its number, when it ended (RFC 3339), the worker that ran
    it, how it ended (``failed``, ``expired`` or ``completed``) and its error (None when it
    completed)."""

    attempt: int
    at: str
    worker: str
    outcome: str
    error: Optional[str] = None

    @classmethod
    def from_json(cls, j: Dict[str, Any]) -> "Attempt":
        """The attempt of an API answer."""
        return cls(
            attempt=j["attempt"],
            at=j["at"],
            worker=j["worker"],
            outcome=j["outcome"],
            error=j.get("error"),
        )


@dataclass
class Task:
    """A task as the API answers it (times are RFC 3339 strings, UTC, with milliseconds)."""

    id: str
    queue: str
    tenant: str
    type: str
    payload: Any
    status: str
    attempt: int
    max_retries: int
    priority: int = 0
    run_at: Optional[str] = None
    created_at: Optional[str] = None
    updated_at: Optional[str] = None
    finished_at: Optional[str] = None
    #: The live lease (``worker``, ``expires_at``, ``epoch``), or None.
    lease: Optional[Dict[str, Any]] = None
    #: The handler's result (JSON), or None.
    result: Any = None
    #: Lease length (ms).
    lease_ms: int = 0
    #: Handler time limit (ms), or None.
    timeout_ms: Optional[int] = None
    idempotency_key: Optional[str] = None
    replays: int = 0
    #: The error of the last failed or expired attempt; a completed task keeps an earlier
    #: attempt's error here.
    last_error: Optional[str] = None
    #: The attempts that ended, oldest first (failed and expired ones, then the successful one).
    attempts: List[Attempt] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j: Dict[str, Any]) -> "Task":
        """The task of an API answer."""
        names = {f for f in cls.__dataclass_fields__ if f not in ("raw", "attempts")}
        attempts = [Attempt.from_json(a) for a in j.get("attempts") or []]
        return cls(**{k: v for k, v in j.items() if k in names}, attempts=attempts, raw=j)


@dataclass
class Page:
    """One page of a listing: its tasks and the cursor of the next page (None at the end)."""

    tasks: List[Task]
    next_cursor: Optional[str]


@dataclass
class LeasedTask:
    """A task leased through the worker protocol: what a handler needs, and the lease token its
    reports present."""

    id: str
    queue: str
    tenant: str
    type: str
    payload: Any
    #: This attempt's number (1 for the first run).
    attempt: int
    max_retries: int
    #: The fencing epoch: grows with every lease of the task. Pass it to the systems the handler
    #: writes to, so they can refuse a write of an older lease.
    epoch: int
    #: The lease token (``<epoch>-<hex>``).
    token: str
    #: Lease length (ms): each heartbeat extends the deadline to now plus this.
    lease_ms: int
    #: How often to heartbeat (ms).
    heartbeat_ms: int
    #: Handler time limit (ms), or None.
    timeout_ms: Optional[int] = None
    priority: int = 0
    lease_expires_at: Optional[str] = None
    created_at: Optional[str] = None
    #: The W3C ``traceparent`` the task was submitted under, or None.
    traceparent: Optional[str] = None
    #: Its ``tracestate``, or None.
    tracestate: Optional[str] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @classmethod
    def from_json(cls, j: Dict[str, Any]) -> "LeasedTask":
        """The leased task of a lease answer."""
        names = {f for f in cls.__dataclass_fields__ if f != "raw"}
        return cls(**{k: v for k, v in j.items() if k in names}, raw=j)
