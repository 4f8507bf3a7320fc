"""`Worker` in this process against a live orq: results, retries, permanent failures, a
handler told that its task was cancelled, timeouts, async handlers, unknown types, and keys."""

from __future__ import annotations

import threading
from typing import List

import pytest

import orq
from orq import Client, Job, Permanent, Worker

from conftest import OrqServer, make_key, wait_for


class Running:
    """A worker running on a thread (stopped at the end of the `with`)."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.error: List[BaseException] = []

        def run() -> None:
            try:
                worker.run(install_signal_handlers=False)
            except BaseException as e:  # surfaced by the test
                self.error.append(e)

        self.thread = threading.Thread(target=run, daemon=True)

    def __enter__(self) -> Worker:
        self.thread.start()
        return self.worker

    def __exit__(self, *exc: object) -> None:
        self.worker.stop()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the worker did not stop"


def status_is(client: Client, id: str, *want: str):
    def check():
        t = client.get(id)
        return t if t.status in want else None

    return check


def test_handlers_complete_tasks_with_their_results(server: OrqServer, client: Client) -> None:
    seen: List[Job] = []
    w = Worker(server.url, queues=["images"], concurrency=3, wait_ms=1000)

    @w.handler("resize")
    def resize(job: Job):
        seen.append(job)
        return {"thumb": f"{job.payload['src']}-small", "epoch": job.epoch}

    ids = [client.submit("resize", {"src": f"p{i}.png"}, queue="images").id for i in range(6)]
    with Running(w):
        for i, id in enumerate(ids):
            t = wait_for(status_is(client, id, "completed"), f"task {i} completed")
            assert t.result == {"thumb": f"p{i}.png-small", "epoch": 1}
            assert t.attempt == 1
    assert {j.id for j in seen} == set(ids)
    assert all(j.worker_id == w.id and j.attempt == 1 for j in seen)
    assert all(j.traceparent is None and j.tracestate is None for j in seen), "no trace sent"


def test_a_job_carries_the_trace_context_its_task_was_submitted_under(server: OrqServer, client: Client) -> None:
    import httpx

    tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    r = httpx.post(
        f"{server.url}/api/v1/tasks",
        json={"type": "traced", "payload": {}, "queue": "traces"},
        headers={"traceparent": tp, "tracestate": "vendor=1,rojo=2"},
    )
    assert r.status_code == 201, r.text
    seen: List[Job] = []
    w = Worker(server.url, queues=["traces"], wait_ms=1000)

    @w.handler("traced")
    def traced(job: Job):
        seen.append(job)
        return None

    with Running(w):
        wait_for(status_is(client, r.json()["id"], "completed"), "the traced task completed")
    assert [(j.traceparent, j.tracestate) for j in seen] == [(tp, "vendor=1,rojo=2")]


def test_a_failing_handler_is_retried_then_a_permanent_one_is_dead(server: OrqServer, client: Client) -> None:
    tries = {"n": 0}
    w = Worker(server.url, queues=["mail"], wait_ms=1000)

    @w.handler("send")
    def send(job: Job):
        tries["n"] += 1
        if job.attempt < 3:
            raise ConnectionError(f"smtp down (attempt {job.attempt})")
        return "sent"

    @w.handler("bounce")
    def bounce(job: Job):
        raise Permanent("no such mailbox")

    backoff = {"initial_ms": 10, "max_ms": 10}
    sent = client.submit("send", {}, queue="mail", max_retries=5, backoff=backoff)
    bounced = client.submit("bounce", {}, queue="mail", max_retries=5)
    with Running(w):
        done = wait_for(status_is(client, sent.id, "completed"), "the retried task completed")
        dead = wait_for(status_is(client, bounced.id, "dead"), "the permanent failure in the DLQ")
    assert (done.attempt, done.result, tries["n"]) == (3, "sent", 3)
    assert [(a.attempt, a.outcome) for a in done.attempts] == [
        (1, "failed"),
        (2, "failed"),
        (3, "completed"),
    ], done.attempts
    assert "smtp down (attempt 2)" in (done.attempts[1].error or ""), done.attempts
    assert dead.attempt == 1 and dead.last_error == "Permanent: no such mailbox"
    assert [t.id for t in client.dlq(queue="mail").tasks] == [bounced.id]


def test_a_cancelled_task_tells_its_handler_to_stop(server: OrqServer, client: Client) -> None:
    started = threading.Event()
    outcome: List[str] = []
    w = Worker(server.url, queues=["long"], wait_ms=1000)

    @w.handler("crunch")
    def crunch(job: Job):
        started.set()
        stopped = job.cancelled.wait(60)
        outcome.append(f"{stopped}:{job.reason}")
        return "finished anyway"

    t = client.submit("crunch", {}, queue="long", lease_ms=3000)
    with Running(w):
        assert started.wait(60), "the handler never started"
        client.cancel(t.id)
        wait_for(lambda: outcome, "the handler to see the cancellation")
    assert outcome == ["True:cancelled"]
    assert client.get(t.id).status == "cancelled"


def test_heartbeats_keep_a_long_task_leased(server: OrqServer, client: Client) -> None:
    # lease_ms 1000: without heartbeats the lease would expire several times during the run.
    w = Worker(server.url, queues=["slow"], wait_ms=1000)
    release = threading.Event()

    @w.handler("wait")
    def wait(job: Job):
        release.wait(60)
        return {"epoch": job.epoch, "reason": job.reason}

    t = client.submit("wait", {}, queue="slow", lease_ms=1000)
    with Running(w):
        wait_for(status_is(client, t.id, "leased"), "the task leased")
        # Outlive three leases: the deadline must keep moving.
        first = client.get(t.id).lease["expires_at"]
        wait_for(lambda: client.get(t.id).lease["expires_at"] > first, "a heartbeat to move the deadline")
        for _ in range(3):
            seen = client.get(t.id).lease["expires_at"]
            wait_for(lambda: (client.get(t.id).lease or {}).get("expires_at", "") > seen, "another heartbeat")
        release.set()
        done = wait_for(status_is(client, t.id, "completed"), "completed")
    assert done.result == {"epoch": 1, "reason": None} and done.attempt == 1


def test_a_handler_past_its_timeout_fails_the_attempt(server: OrqServer, client: Client) -> None:
    w = Worker(server.url, queues=["t"], wait_ms=1000)
    calls: List[str] = []

    @w.handler("hang")
    def hang(job: Job):
        job.cancelled.wait(60)
        calls.append(str(job.reason))

    t = client.submit("hang", {}, queue="t", timeout_ms=300, max_retries=0)
    with Running(w):
        dead = wait_for(status_is(client, t.id, "dead"), "the timed-out task dead")
        wait_for(lambda: calls, "the handler told to stop")
    assert calls == ["timeout"]
    assert "timed out after 300 ms" in (dead.last_error or ""), dead


def test_async_handlers_and_unknown_types(server: OrqServer, client: Client) -> None:
    import asyncio

    w = Worker(server.url, queues=["mix"], wait_ms=1000)

    @w.handler("double")
    async def double(job: Job):
        await asyncio.sleep(0.01)
        return job.payload * 2

    good = client.submit("double", 21, queue="mix")
    unknown = client.submit("nobody-handles-this", {}, queue="mix", max_retries=0)
    with Running(w):
        assert wait_for(status_is(client, good.id, "completed"), "async handler").result == 42
        dead = wait_for(status_is(client, unknown.id, "dead"), "the unknown type failed")
    assert "no handler for type 'nobody-handles-this'" in (dead.last_error or "")


def test_a_worker_waits_for_a_queue_that_does_not_exist_yet(server: OrqServer, client: Client) -> None:
    w = Worker(server.url, queues=["later"], wait_ms=1000)
    w.register("x", lambda job: "ok")
    with Running(w):
        t = client.submit("x", {}, queue="later")
        assert wait_for(status_is(client, t.id, "completed"), "completed").result == "ok"


def test_worker_keys_lease_their_queues_and_tenant_keys_none(tmp_path) -> None:
    admin, wkey, tkey = make_key("--admin"), make_key("--worker", "--queues", "images"), make_key("--tenant", "acme")
    keys = tmp_path / "keys.toml"
    keys.write_text("\n".join(k["entry"] for k in (admin, wkey, tkey)))
    s = OrqServer(tmp_path, "--api-keys", str(keys))
    try:
        tenant = Client(s.url, tkey["key"])
        t = tenant.submit("resize", {}, queue="images")
        tenant.submit("resize", {}, queue="mail")
        with pytest.raises(orq.Forbidden):
            tenant.lease("w", ["images"])
        worker_client = Client(s.url, wkey["key"])
        with pytest.raises(orq.Forbidden):
            worker_client.lease("w", ["mail"])
        with pytest.raises(orq.Forbidden):
            worker_client.get(t.id)
        w = Worker(client=worker_client, queues=["images"], wait_ms=1000)
        w.register("resize", lambda job: job.tenant)
        with Running(w):
            assert wait_for(status_is(tenant, t.id, "completed"), "completed").result == "acme"
        refused = Worker(client=worker_client, queues=["mail"], wait_ms=1000)
        with pytest.raises(orq.Forbidden):
            refused.run(install_signal_handlers=False)
        with pytest.raises(orq.Unauthorized):
            Client(s.url, "orq_wrong").lease("w", ["images"])
    finally:
        s.stop()


def test_a_worker_key_limited_to_tenants_handles_only_theirs(tmp_path) -> None:
    admin, wkey = make_key("--admin"), make_key("--worker", "--tenants", "acme,globex")
    keys = tmp_path / "keys.toml"
    keys.write_text("\n".join(k["entry"] for k in (admin, wkey)))
    s = OrqServer(tmp_path, "--api-keys", str(keys))
    try:
        ops = Client(s.url, admin["key"])
        ids = {t: [ops.submit("who", {}, queue="q", tenant=t).id for _ in range(3)] for t in ("acme", "globex", "initech")}
        worker_client = Client(s.url, wkey["key"])
        with pytest.raises(orq.Forbidden):
            worker_client.lease("w", ["q"], tenants=["initech"])
        # A worker narrowed to acme of the key's two, then one with the key's own list.
        only_acme = Worker(client=worker_client, queues=["q"], wait_ms=500, tenants=["acme"])
        only_acme.register("who", lambda job: f"acme-worker:{job.tenant}")
        with Running(only_acme):
            for id in ids["acme"]:
                assert wait_for(status_is(ops, id, "completed"), "completed").result == "acme-worker:acme"
        keyed = Worker(client=worker_client, queues=["q"], wait_ms=500)
        keyed.register("who", lambda job: f"key-worker:{job.tenant}")
        with Running(keyed):
            for id in ids["globex"]:
                assert wait_for(status_is(ops, id, "completed"), "completed").result == "key-worker:globex"
        assert all(ops.get(id).status == "queued" for id in ids["initech"])
    finally:
        s.stop()


def test_results_and_errors_orq_cannot_take_fail_the_task_saying_why(server: OrqServer, client: Client) -> None:
    w = Worker(server.url, queues=["odd"], wait_ms=1000)

    @w.handler("nan")
    def nan(job: Job):
        return {"x": float("nan")}

    @w.handler("huge-error")
    def huge_error(job: Job):
        raise RuntimeError("é" * 100_000)

    @w.handler("exit")
    def exits(job: Job):
        raise SystemExit(3)

    @w.handler("surrogate")
    def surrogate(job: Job):
        return "\ud800"

    @w.handler("deep")
    def deep(job: Job):
        v: object = 1
        for _ in range(200):
            v = [v]
        return v  # JSON, but deeper than orq reads back (128)

    ids = {k: client.submit(k, {}, queue="odd", max_retries=0).id for k in ["nan", "huge-error", "exit", "surrogate", "deep"]}
    with Running(w):
        dead = {k: wait_for(status_is(client, id, "dead"), f"{k} dead") for k, id in ids.items()}
    assert "not JSON" in dead["nan"].last_error, dead["nan"]
    assert dead["huge-error"].last_error.startswith("RuntimeError: éé"), dead["huge-error"].last_error[:80]
    assert dead["exit"].last_error == "SystemExit: 3", dead["exit"]
    assert "not JSON" in dead["surrogate"].last_error, dead["surrogate"]
    assert dead["deep"].last_error.startswith("orq refused the handler's result: result:"), dead["deep"]
    for t in dead.values():
        assert "lease expired" not in (t.last_error or ""), t
