"""The transport of the client: one ``httpx.Client`` (thread-safe, pooled), the API key, JSON
in and out, errors mapped by :mod:`orq.errors`, and retries of transient failures with
exponential backoff, full jitter and the server's ``Retry-After``, where retrying is safe."""

from __future__ import annotations

import logging
import random
import time
from typing import Any, Dict, Optional

import httpx

from .errors import ConnectionFailed, OrqError, from_answer

log = logging.getLogger("orq")

#: First backoff of a retry (seconds); doubles per retry up to :data:`BACKOFF_MAX_S`.
BACKOFF_INITIAL_S = 0.1
#: Longest backoff between two retries (seconds).
BACKOFF_MAX_S = 5.0


def backoff_s(attempt: int, retry_after_s: Optional[float] = None) -> float:
    """The wait before retry ``attempt`` (1 for the first): full jitter over an exponential
    bound, never below the server's ``Retry-After``."""
    bound = min(BACKOFF_MAX_S, BACKOFF_INITIAL_S * (2 ** max(0, attempt - 1)))
    wait = random.uniform(0, bound)
    if retry_after_s is not None:
        wait = max(wait, retry_after_s)
    return wait


class Transport:
    """Sends requests to one orq API (``url``: its base, e.g. ``http://127.0.0.1:8080``)."""

    def __init__(
        self,
        url: str,
        api_key: Optional[str] = None,
        *,
        timeout_s: float = 30.0,
        retries: int = 3,
        http: Optional[httpx.Client] = None,
    ) -> None:
        base = url.rstrip("/")
        if not base.endswith("/api/v1"):
            base += "/api/v1"
        headers = {"accept": "application/json", "user-agent": "orq-client-python/0.1"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        self.retries = retries
        self.http = http or httpx.Client(base_url=base, headers=headers, timeout=timeout_s)
        if http is not None:
            self.http.base_url = base
            self.http.headers.update(headers)

    def close(self) -> None:
        """Close the connections."""
        self.http.close()

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Optional[Dict[str, Any]] = None,
        idempotent: bool = True,
        timeout_s: Optional[float] = None,
        retries: Optional[int] = None,
    ) -> Any:
        """Send one request and return its JSON answer. Transient failures (429, 503, 408, no
        connection) are retried up to ``retries`` times when ``idempotent``; a request that is
        not is retried only when it surely never reached the server. Raises :class:`OrqError`."""
        params = {k: v for k, v in (params or {}).items() if v is not None}
        tries = self.retries if retries is None else retries
        attempt = 0
        while True:
            attempt += 1
            try:
                return self._once(method, path, json, params, timeout_s)
            except OrqError as e:
                # A 429 stored nothing; a 503 may come after the store applied the call (replicas
                # not acknowledged in time), so only idempotent requests retry it.
                safe = idempotent or (isinstance(e, ConnectionFailed) and not e.sent) or e.status == 429
                if not (e.transient and safe and attempt <= tries):
                    raise
                wait = backoff_s(attempt, e.retry_after_s)
                log.info("orq: %s %s failed (%s); retry %d in %.2f s", method, path, e, attempt, wait)
                time.sleep(wait)

    def _once(self, method: str, path: str, json: Any, params: Dict[str, Any], timeout_s: Optional[float]) -> Any:
        kwargs: Dict[str, Any] = {"params": params}
        if json is not None:
            kwargs["json"] = json
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        try:
            resp = self.http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as e:
            raise ConnectionFailed(f"{method} {path}: {e!r}", sent=False) from e
        except httpx.TransportError as e:
            raise ConnectionFailed(f"{method} {path}: {e!r}", sent=True) from e
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = None
        if resp.status_code >= 400:
            raise from_answer(resp.status_code, body, resp.headers.get("retry-after"))
        return body
