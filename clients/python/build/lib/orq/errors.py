"""The errors of the orq client: one class per family of the server's error codes.

Every error answer of orq is ``{"error": {"code": "...", "message": "..."}}``; :func:`from_answer`
turns it into the class of its code (:data:`CODES`), keeping the code, the HTTP status, the
message and the ``Retry-After`` delay. A test compares :data:`CODES` with the ``ErrorCode`` enum
of the server's OpenAPI document, so the two cannot drift.
"""

from __future__ import annotations

from typing import Dict, Optional, Type


class OrqError(Exception):
    """An error answered by orq, or a failure to reach it.

    Attributes:
        code: the server's stable error code (``"bad_request"``, ``"lease_lost"``, ...), or
            ``"connection_failed"`` when no answer came.
        status: the HTTP status (0 when no answer came).
        message: what went wrong, naming the field when there is one.
        retry_after_s: the server's ``Retry-After`` (seconds), when it sent one.
    """

    #: Whether sending the same request again later may succeed.
    transient = False

    def __init__(
        self,
        message: str,
        *,
        code: str = "",
        status: int = 0,
        retry_after_s: Optional[float] = None,
    ) -> None:
        super().__init__(f"{code}: {message}" if code else message)
        self.code = code
        self.status = status
        self.message = message
        self.retry_after_s = retry_after_s


class BadRequest(OrqError):
    """400: a malformed body, field, parameter or query (the message names it)."""


class Unauthorized(OrqError):
    """401: no API key, or an unknown one."""


class Forbidden(OrqError):
    """403: the key is known but lacks the right (a tenant key leasing, another queue, ...)."""


class NotFound(OrqError):
    """404: no such task, queue or route (another tenant's task too)."""


class MethodNotAllowed(OrqError):
    """405: the route exists but not with this method."""


class Conflict(OrqError):
    """409: the task or queue is not in a state that allows this."""


class LeaseLost(Conflict):
    """409 ``lease_lost``: the lease token no longer holds the task (its lease expired and it was
    leased again, or it was reported already): drop the work."""


class TaskCancelled(Conflict):
    """409 ``cancelled``: the task was cancelled while leased: abort the handler."""


class PayloadTooLarge(OrqError):
    """413: the body, a payload or a result is over its limit."""


class Unprocessable(OrqError):
    """422: a payload its handler refuses."""


class RateLimited(OrqError):
    """429: over a rate or a tenant's limit; retry after ``retry_after_s``."""

    transient = True


class RequestTimeout(OrqError):
    """408: the request body did not arrive in time."""

    transient = True


class Unavailable(OrqError):
    """503: the store refused the call for a reason that passes (out of memory, failover,
    loading) or the server cannot serve now; nothing was lost, retry after ``retry_after_s``."""

    transient = True


class ServerError(OrqError):
    """500 (or an answer that is not orq's error JSON)."""


class ConnectionFailed(OrqError):
    """No answer: the connection failed or timed out. ``sent`` says whether the request may have
    reached the server (then a retry of a submit without idempotency key may run it twice)."""

    transient = True

    def __init__(self, message: str, *, sent: bool) -> None:
        super().__init__(message, code="connection_failed")
        self.sent = sent


#: The class of each error code the server answers.
CODES: Dict[str, Type[OrqError]] = {
    "bad_request": BadRequest,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "method_not_allowed": MethodNotAllowed,
    "request_timeout": RequestTimeout,
    "conflict": Conflict,
    "lease_lost": LeaseLost,
    "cancelled": TaskCancelled,
    "payload_too_large": PayloadTooLarge,
    "unprocessable": Unprocessable,
    "limited": RateLimited,
    "unavailable": Unavailable,
    "store_unavailable": Unavailable,
    "internal": ServerError,
}


def from_answer(
    status: int, body: object, retry_after: Optional[str] = None
) -> OrqError:
    """The error of an answer with HTTP ``status``, JSON ``body`` (anything when it was not
    JSON) and ``Retry-After`` header value ``retry_after`` (seconds, or None)."""
    code, message = "", f"HTTP {status}"
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        code = str(body["error"].get("code", ""))
        message = str(body["error"].get("message", message))
    cls = CODES.get(code)
    if cls is None:
        cls = Unavailable if status == 503 else ServerError if status >= 500 else OrqError
    after: Optional[float] = None
    if retry_after is not None:
        try:
            after = max(0.0, float(retry_after))
        except ValueError:
            after = None
    return cls(message, code=code, status=status, retry_after_s=after)
