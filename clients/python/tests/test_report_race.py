"""A report refused while a heartbeat of the same lease is out: the worker must not give the
outcome up at its own estimate of the deadline while that heartbeat may still answer that the
lease lives on (the simulator's pull worker found this, seeds 729 and 1574). A local HTTP server
plays orq: it leases one task with a short lease, holds the first heartbeat's answer until after
the worker's deadline, refuses ``complete`` with 503 until then, and counts what arrives."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict

from orq import Worker
from orq._reports import GRACE_AFTER_DEADLINE_S

ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV"
LEASE_MS = 600


def leased_task() -> Dict[str, Any]:
    now = int(time.time() * 1000)
    return {
        "id": ID, "queue": "q", "tenant": "default", "type": "t", "payload": {}, "priority": 0,
        "attempt": 1, "max_retries": 3, "epoch": 1, "token": "1-00ff",
        "lease_expires_at": now + LEASE_MS, "lease_ms": LEASE_MS, "heartbeat_ms": 150,
        "timeout_ms": None, "created_at": now,
    }


class FakeOrq:
    """What the fake server saw and decided."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leased = False
        self.beat_answered = threading.Event()
        self.beat_held = False
        self.refused = 0
        self.applied = 0


def serve(state: FakeOrq) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def answer(self, status: int, body: Any) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("retry-after", "0")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            path = self.path
            if path == "/api/v1/leases":
                with state.lock:
                    first = not state.leased
                    state.leased = True
                if not first:
                    time.sleep(0.1)
                return self.answer(200, {"tasks": [leased_task()] if first else []})
            if path.endswith("/heartbeat"):
                with state.lock:
                    hold = not state.beat_held
                    state.beat_held = True
                if hold:
                    # Answered only once the worker's estimate of the deadline (and the grace
                    # its reports get beyond it) has passed.
                    time.sleep(LEASE_MS / 1000 + GRACE_AFTER_DEADLINE_S + 0.6)
                    state.beat_answered.set()
                now = int(time.time() * 1000)
                return self.answer(200, {"lease_expires_at": now + 5000, "lease_left_ms": 5000})
            if path.endswith("/complete"):
                with state.lock:
                    if not state.beat_answered.is_set():
                        state.refused += 1
                        refuse = True
                    else:
                        state.applied += 1
                        refuse = False
                if refuse:
                    return self.answer(503, {"error": {"code": "store_unavailable", "message": "BUSY"}})
                return self.answer(200, {"id": ID, "reported": "applied"})
            self.answer(404, {"error": {"code": "not_found", "message": path}})

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_refused_complete_waits_for_the_heartbeat_in_flight() -> None:
    state = FakeOrq()
    server = serve(state)
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        worker = Worker(url, queues=["q"], wait_ms=100, shutdown_grace_s=5)

        # Returns after the first heartbeat went out (at 150 ms): the report starts while it is held.
        @worker.handler("t")
        def handle(job: Any) -> Dict[str, bool]:
            time.sleep(0.25)
            return {"ok": True}

        runner = threading.Thread(target=lambda: worker.run(install_signal_handlers=False), daemon=True)
        runner.start()
        deadline = time.monotonic() + 20
        while state.applied == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        worker.stop()
        runner.join(20)
        assert state.refused > 0, "the complete was refused while the heartbeat was held"
        assert state.applied == 1, "the complete was sent again after the heartbeat answered, and applied"
    finally:
        server.shutdown()
