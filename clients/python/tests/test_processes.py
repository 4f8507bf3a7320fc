"""Workers as real processes: one killed with SIGKILL mid-task (its task then completed by
another worker, with the next attempt and fencing epoch), one stopped with SIGTERM mid-task
(the handler finishes, the task completes, the process exits 0)."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from orq import Client

from conftest import WAIT_S, OrqServer, Procs, wait_for

HERE = Path(__file__).resolve().parent
PROC = str(HERE / "worker_proc.py")


def started(marks: Path, pid: int) -> bool:
    return (marks / f"started-{pid}").exists()


def test_a_killed_workers_task_is_completed_by_another(server: OrqServer, client: Client, procs: Procs, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    t = client.submit("job", {}, queue="chaos", lease_ms=2000, backoff={"initial_ms": 10, "max_ms": 10})
    a = procs.python(PROC, server.url, "chaos", "hang", str(marks), log=tmp_path / "a.log")
    wait_for(lambda: started(marks, a.pid), "worker A to start the task")
    assert client.get(t.id).lease["worker"].endswith(str(a.pid))
    a.send_signal(signal.SIGKILL)
    a.wait(WAIT_S)
    b = procs.python(PROC, server.url, "chaos", "work", str(marks), log=tmp_path / "b.log")
    done = wait_for(lambda: (lambda x: x if x.status == "completed" else None)(client.get(t.id)), "worker B to complete the task")
    assert done.result == {"by": b.pid, "attempt": 2, "epoch": 2}, done
    assert done.attempt == 2
    # The first attempt is recorded as the killed worker's expired lease, the second as B's
    # success.
    assert [x.outcome for x in done.attempts] == ["expired", "completed"], done.attempts
    first, second = done.attempts
    assert first.attempt == 1 and first.worker.endswith(f"-{a.pid}"), done.attempts
    assert second.attempt == 2 and second.worker.endswith(f"-{b.pid}") and second.error is None


def test_sigterm_lets_the_running_handler_finish(server: OrqServer, client: Client, procs: Procs, tmp_path: Path) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    t = client.submit("job", {}, queue="calm")
    w = procs.python(PROC, server.url, "calm", "slow", str(marks), log=tmp_path / "w.log")
    wait_for(lambda: started(marks, w.pid), "the worker to start the task")
    w.send_signal(signal.SIGTERM)
    assert w.wait(WAIT_S) == 0, (tmp_path / "w.log").read_text()
    done = client.get(t.id)
    assert done.status == "completed", done
    assert done.result["by"] == w.pid
    assert "worker exited cleanly" in (tmp_path / "w.log").read_text()
    # Nothing left leased to the stopped worker: a new task goes to nobody until a worker comes.
    later = client.submit("job", {}, queue="calm")
    assert client.get(later.id).status == "queued"


def test_a_task_submitted_as_a_worker_stops_is_not_left_leased_to_it(
    server: OrqServer, client: Client, procs: Procs, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    first = client.submit("job", {}, queue="race")
    w = procs.python(PROC, server.url, "race", "work", str(marks), log=tmp_path / "w.log", env={"WAIT_MS": "3000"})
    wait_for(lambda: client.get(first.id).status == "completed", "the worker to be running")
    # The worker is idle in a lease call now; stop it and submit at once. Whatever its call
    # brings after the stop began is given back (a ten-minute lease would otherwise hold it).
    w.send_signal(signal.SIGTERM)
    late = client.submit("job", {}, queue="race", lease_ms=600_000)
    assert w.wait(WAIT_S) == 0, (tmp_path / "w.log").read_text()
    t = client.get(late.id)
    assert t.status == "queued" and t.lease is None, t


def test_a_handler_deaf_to_cancellation_does_not_keep_the_process_alive(
    server: OrqServer, client: Client, procs: Procs, tmp_path: Path
) -> None:
    marks = tmp_path / "marks"
    marks.mkdir()
    t = client.submit("job", {}, queue="deaf")
    w = procs.python(PROC, server.url, "deaf", "stuck", str(marks), log=tmp_path / "w.log")
    wait_for(lambda: started(marks, w.pid), "the handler to start")
    w.send_signal(signal.SIGTERM)
    assert w.wait(WAIT_S) == 0, (tmp_path / "w.log").read_text()
    after = client.get(t.id)
    assert after.status == "queued" and after.attempt == 0, after  # given back at the grace's end
