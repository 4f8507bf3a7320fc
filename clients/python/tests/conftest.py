"""Fixtures: a live `orq serve` per test (embedded store, no built-in worker, a free port read
from its output), a client of it, worker key files, and `wait_for`. The binary is $ORQ_BIN or
the repository's target/debug/orq. Every process a test starts is stopped by its fixture."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, TypeVar

import pytest

from orq import Client

REPO = Path(__file__).resolve().parents[3]
ORQ_BIN = os.environ.get("ORQ_BIN") or str(REPO / "target" / "debug" / "orq")
#: How long a test waits for a condition before failing (generous: CI machines are loaded).
WAIT_S = 60.0

T = TypeVar("T")


def wait_for(pred: Callable[[], Optional[T]], what: str, timeout_s: float = WAIT_S) -> T:
    """Poll ``pred`` until it answers something truthy; fail naming ``what`` after the wait."""
    deadline = time.monotonic() + timeout_s
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.05)


class OrqServer:
    """A running `orq serve` (stopped by :meth:`stop`)."""

    def __init__(self, tmp: Path, *extra: str) -> None:
        self.log = tmp / "orq-serve.log"
        args = [ORQ_BIN, "serve", "--no-dashboard-build", "--listen", "127.0.0.1:0", "--concurrency", "0", *extra]
        self.proc = subprocess.Popen(
            args, stdout=subprocess.PIPE, stderr=open(self.log, "wb"), text=True
        )
        self._lines: List[str] = []
        found = threading.Event()
        self.url = ""

        def drain() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self._lines.append(line)
                m = re.search(r"orq API listening on (http://\S+)/api/v1", line)
                if m and not found.is_set():
                    self.url = m.group(1)
                    found.set()

        threading.Thread(target=drain, daemon=True).start()
        if not found.wait(WAIT_S):
            self.stop()
            raise RuntimeError(f"orq serve did not start: {self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def server(tmp_path: Path):
    s = OrqServer(tmp_path)
    yield s
    s.stop()


@pytest.fixture
def client(server: OrqServer):
    c = Client(server.url)
    yield c
    c.close()


def make_key(*args: str) -> Dict[str, str]:
    """A new key from `orq key new ARGS`: ``{"key": ..., "entry": <TOML entry>}``."""
    out = subprocess.run([ORQ_BIN, "key", "new", *args], check=True, capture_output=True, text=True).stdout
    key, _, entry = out.partition("\n")
    return {"key": key.strip(), "entry": entry}


class Procs:
    """Python processes started by a test (killed at its end)."""

    def __init__(self) -> None:
        self.all: List[subprocess.Popen] = []

    def python(self, *args: str, log: Path, env: Optional[Dict[str, str]] = None) -> subprocess.Popen:
        env = dict(os.environ, **(env or {}), PYTHONUNBUFFERED="1")
        p = subprocess.Popen([sys.executable, *args], stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)
        self.all.append(p)
        return p


@pytest.fixture
def procs():
    ps = Procs()
    yield ps
    for p in ps.all:
        if p.poll() is None:
            p.kill()
            p.wait()
