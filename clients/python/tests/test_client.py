"""`Client` against a live orq: submit, read, list, cancel, batches, the DLQ, queue counts, the
protocol's calls one by one, and typed errors for bad input (nothing changed by them)."""

from __future__ import annotations

import datetime

import httpx
import pytest

import orq
from orq import Client


def test_submit_get_list_and_cancel(client: Client) -> None:
    t = client.submit("resize", {"src": "a.png", "w": [1, 2.5]}, queue="images", tenant="acme", priority=3, max_retries=1)
    assert (t.type, t.queue, t.tenant, t.priority, t.status) == ("resize", "images", "acme", 3, "queued")
    assert t.payload == {"src": "a.png", "w": [1, 2.5]}
    assert client.get(t.id).id == t.id
    assert client.get(t.id, queue="images").payload == t.payload
    later = client.submit("resize", {}, queue="images", run_at=datetime.datetime.now() + datetime.timedelta(hours=1))
    assert later.status == "scheduled"
    page = client.list(queue="images", limit=1)
    assert len(page.tasks) == 1 and page.next_cursor
    assert {x.id for x in client.iter_tasks(queue="images", limit=1)} == {t.id, later.id}
    assert [x.id for x in client.list(queue="images", status="scheduled").tasks] == [later.id]
    cancelled = client.cancel(later.id)
    assert cancelled.status == "cancelled"
    with pytest.raises(orq.Conflict):
        client.purge(t.id)  # not dead


def test_idempotency_key_answers_the_same_task(client: Client) -> None:
    a = client.submit("send", {"n": 1}, idempotency_key="order-42")
    b = client.submit("send", {"n": 2}, idempotency_key="order-42")
    assert a.id == b.id and b.payload == {"n": 1}


def test_batches_are_all_or_nothing(client: Client) -> None:
    ts = client.submit_many([{"type": "a", "payload": i, "queue": "bulk"} for i in range(5)])
    assert [t.payload for t in ts] == list(range(5))
    with pytest.raises(orq.BadRequest) as e:
        client.submit_many([{"type": "a", "payload": 1, "queue": "bulk"}, {"type": "a", "payload": 2, "priority": 99}])
    assert "priority" in e.value.message
    assert len(client.list(queue="bulk", limit=100).tasks) == 5


def test_dead_tasks_are_listed_replayed_and_purged(client: Client) -> None:
    ids = [client.submit("charge", {"n": i}, queue="pay").id for i in range(2)]
    for _ in ids:
        (t,) = client.lease("py-test", ["pay"])
        assert client.fail(t.id, t.queue, t.token, "card declined", permanent=True) == "applied"
    dead = client.dlq(queue="pay")
    assert sorted(t.id for t in dead.tasks) == sorted(ids)
    assert all(t.status == "dead" and t.last_error == "card declined" for t in dead.tasks)
    replayed = client.replay(ids[0])
    assert replayed.status == "queued" and replayed.attempt == 0
    assert client.purge(ids[1])
    with pytest.raises(orq.NotFound):
        client.get(ids[1])
    assert client.dlq(queue="pay").tasks == []
    q = client.queue("pay")
    assert q["counts"]["queued"] == 1, q
    assert any(x["queue"] == "pay" for x in client.queues())


def test_protocol_calls_one_by_one(client: Client) -> None:
    t0 = client.submit("crop", {"x": 1}, queue="img", lease_ms=5000)
    (t,) = client.lease("py-1", ["img"], count=10)
    assert (t.id, t.attempt, t.epoch, t.lease_ms, t.payload) == (t0.id, 1, 1, 5000, {"x": 1})
    assert t.token.startswith("1-") and t.heartbeat_ms > 0
    hb = client.heartbeat(t.id, t.queue, t.token, extend_ms=60_000)
    assert 5000 < hb["lease_left_ms"] <= 60_000
    assert client.complete(t.id, t.queue, t.token, {"ok": True}) == "applied"
    assert client.complete(t.id, t.queue, t.token, {"ok": True}) == "already_applied"
    done = client.get(t.id)
    assert (done.status, done.result) == ("completed", {"ok": True})
    assert client.lease("py-1", ["img"], wait_ms=50) == []


def test_a_stale_report_is_refused_as_lease_lost(client: Client) -> None:
    client.submit("crop", {}, queue="img")
    (t,) = client.lease("py-1", ["img"])
    assert client.release(t.id, t.queue, t.token) == "applied"
    (again,) = client.lease("py-2", ["img"])
    assert again.epoch == t.epoch + 1
    with pytest.raises(orq.LeaseLost):
        client.complete(t.id, t.queue, t.token, "late")
    with pytest.raises(orq.LeaseLost):
        client.heartbeat(t.id, t.queue, t.token)
    assert client.get(t.id).status == "leased"
    assert client.complete(again.id, again.queue, again.token, "fresh") == "applied"
    assert client.get(t.id).result == "fresh"


def test_several_completions_in_one_call(client: Client) -> None:
    for i in range(3):
        client.submit("crop", {"i": i}, queue="many")
    a, b, c = client.lease("py-1", ["many"], count=3)
    assert client.release(c.id, c.queue, c.token) == "applied"
    answers = client.complete_many("many", [(a.id, a.token, {"n": 1}), (b.id, b.token, None), (c.id, c.token, "late")])
    assert answers[:2] == ["applied", "applied"]
    assert isinstance(answers[2], orq.LeaseLost) and answers[2].status == 409
    assert client.complete_many("many", [(a.id, a.token, {"n": 1})]) == ["already_applied"]
    assert (client.get(a.id).result, client.get(b.id).status, client.get(c.id).status) == ({"n": 1}, "completed", "queued")
    with pytest.raises(orq.BadRequest):
        client.complete_many("many", [])


def test_bad_input_is_a_typed_error_that_changes_nothing(client: Client) -> None:
    client.submit("crop", {}, queue="img")
    (t,) = client.lease("py-1", ["img"])
    with pytest.raises(orq.NotFound) as e:
        client.lease("py-1", ["nope"])
    assert e.value.status == 404 and e.value.code == "not_found" and "nope" in e.value.message
    for call, field in [
        (lambda: client.lease("py 1", ["img"]), "worker"),
        (lambda: client.lease("py-1", ["img"], count=0), "count"),
        (lambda: client.lease("py-1", ["img"], wait_ms=30_001), "wait_ms"),
        (lambda: client.complete(t.id, t.queue, "not-a-token"), "token"),
        (lambda: client.fail(t.id, t.queue, t.token, ""), "error"),
        (lambda: client.submit("crop", {}, queue="a b"), "queue"),
        (lambda: client.submit("crop", {}, priority=10), "priority"),
    ]:
        with pytest.raises(orq.BadRequest) as e:
            call()
        assert field in e.value.message, e.value
    with pytest.raises(orq.PayloadTooLarge) as e:
        client.complete(t.id, t.queue, t.token, "x" * (1 << 20))
    assert "result" in e.value.message
    with pytest.raises(orq.NotFound):
        client.get("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert client.get(t.id).status == "leased"


def test_every_error_code_of_the_server_has_a_class(server) -> None:
    doc = httpx.get(f"{server.url}/api/v1/openapi.json").json()
    codes = set(doc["components"]["schemas"]["ErrorCode"]["enum"])
    assert codes == set(orq.CODES), "orq.errors.CODES and the server's error codes differ"
    assert orq.CODES["lease_lost"] is orq.LeaseLost
    assert issubclass(orq.LeaseLost, orq.Conflict) and issubclass(orq.TaskCancelled, orq.Conflict)
    assert orq.Unavailable.transient and not orq.BadRequest.transient


def test_an_unreachable_server_is_a_transient_connection_error() -> None:
    c = Client("http://127.0.0.1:9", retries=1, timeout_s=2)
    with pytest.raises(orq.ConnectionFailed) as e:
        c.get("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    assert e.value.transient and not e.value.sent
