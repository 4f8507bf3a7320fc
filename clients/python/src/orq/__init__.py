"""orq's Python client: :class:`Client` submits and inspects tasks; :class:`Worker` runs Python
handlers over orq's HTTP worker protocol (leases, heartbeats, fencing epochs, at-least-once).

    from orq import Client, Worker

    Client("http://127.0.0.1:8080").submit("resize", {"src": "a.png"}, queue="images")

    worker = Worker("http://127.0.0.1:8080", queues=["images"], concurrency=8)

    @worker.handler("resize")
    def resize(job):
        return {"thumb": make_thumb(job.payload["src"])}

    worker.run()
"""

from .client import Client, task_body
from .errors import (
    CODES,
    BadRequest,
    Conflict,
    ConnectionFailed,
    Forbidden,
    LeaseLost,
    MethodNotAllowed,
    NotFound,
    OrqError,
    PayloadTooLarge,
    RateLimited,
    RequestTimeout,
    ServerError,
    TaskCancelled,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from .job import Job, Permanent
from .types import Attempt, LeasedTask, Page, Task
from .worker import Worker

__all__ = [
    "CODES",
    "Attempt",
    "BadRequest",
    "Client",
    "Conflict",
    "ConnectionFailed",
    "Forbidden",
    "Job",
    "LeaseLost",
    "LeasedTask",
    "MethodNotAllowed",
    "NotFound",
    "OrqError",
    "Page",
    "PayloadTooLarge",
    "Permanent",
    "RateLimited",
    "RequestTimeout",
    "ServerError",
    "Task",
    "TaskCancelled",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "Worker",
    "task_body",
]
