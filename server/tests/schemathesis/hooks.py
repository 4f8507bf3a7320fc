"""schemathesis hooks for the API run of run.sh (loaded through SCHEMATHESIS_HOOKS).

They adjust positive cases only (the ones schemathesis expects to be accepted), for the request
rules that depend on state or time the OpenAPI document cannot describe, and for one that would
make the run slow. Negative cases are left alone.

- `cursor` is opaque: only a `next_cursor` the server handed out is valid, anything else is a
  400. Positive cases list from the first page (the cursor is dropped).
- `run_at` must lie between 1970 and a year from now (a schema has no clock). A positive case's
  `run_at` outside that range, in a submit or in each task of a batch, becomes a fixed past time
  (a past time means "due now").
- `POST /queues/{queue}/drain` waits up to `timeout_ms` (default 10 s, at most 60 s) while the
  queue holds work, and the run leaves delayed tasks behind: positive cases wait at most
  DRAIN_WAIT_MS.
- `POST /leases` waits up to `wait_ms` (at most 30 s) when no task is ready: positive cases wait
  at most LEASE_WAIT_MS.
- The built-in types (`echo`, `sleep`, `fail`, `http`) check their payloads at submit (and `http`
  its allow-list), which the schema of `payload` (any JSON) cannot say: a positive submit of a
  built-in type other than `echo` gets type BUILTIN_STANDIN instead.
- `DELETE /dlq/{id}` and `POST /dlq/{id}/replay` act on a dead task: positive cases name one of
  the dead tasks run.sh made (ORQ_SCHEMATHESIS_DEAD_IDS, in the default queue), in turn, so their
  logic runs and not only their 404 (a replayed one dies again; a purged one is gone).
- A by-id route without `queue` (`GET /tasks/{id}`, its cancel, the DLQ's replay and purge)
  searches at most 64 queues and asks for `queue` (400) once more exist, which the run's own
  submits bring about: positive cases without `queue` name the queue `default`.
- `POST /simulations` takes fault families and a planted bug from the simulator's own lists
  (`GET /simulations`; the stand-in simulator of run.sh offers SIM_FAMILIES and SIM_PLANTED), so
  a positive case's unknown ones are dropped (a family named twice counts once).
"""

import datetime
import itertools
import os

import schemathesis
from schemathesis import GenerationMode

RUN_AT_IN_RANGE = "2020-02-29T23:59:59.999+02:00"
YEAR = datetime.timedelta(days=365)
DRAIN_WAIT_MS = 100
LEASE_WAIT_MS = 100
CHECKED_TYPES = ("sleep", "fail", "http")
BUILTIN_STANDIN = "schemathesis"
DEAD_IDS = [i for i in os.environ.get("ORQ_SCHEMATHESIS_DEAD_IDS", "").split(",") if i]
DEAD_PATHS = ("/api/v1/dlq/{id}", "/api/v1/dlq/{id}/replay")
BY_ID_PATHS = ("/api/v1/tasks/{id}", "/api/v1/tasks/{id}/cancel") + DEAD_PATHS
SIM_FAMILIES = ("crash", "stall", "clock", "restart", "network", "refusal")
SIM_PLANTED = ("none", "complete_ignores_token")
_turn = itertools.count()


def _run_at_ok(value) -> bool:
    if not isinstance(value, str):
        return True  # null, or a type error the server rejects whatever the mode
    try:
        at = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return True  # not a date-time: not a positive value, leave it to the server
    if at.tzinfo is None:
        return True
    now = datetime.datetime.now(datetime.timezone.utc)
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) <= at <= now + YEAR


def _fix_submit(body) -> None:
    if isinstance(body, dict) and not _run_at_ok(body.get("run_at")):
        body["run_at"] = RUN_AT_IN_RANGE
    if isinstance(body, dict) and body.get("type") in CHECKED_TYPES:
        body["type"] = BUILTIN_STANDIN


@schemathesis.hook
def map_case(context, case):
    meta = case.meta
    if meta is None or meta.generation.mode != GenerationMode.POSITIVE:
        return case
    if isinstance(case.query, dict):
        case.query.pop("cursor", None)
    if DEAD_IDS and case.path in DEAD_PATHS and isinstance(case.path_parameters, dict):
        case.path_parameters["id"] = DEAD_IDS[next(_turn) % len(DEAD_IDS)]
        case.query = dict(case.query or {}, queue="default")  # the dead tasks' queue
    if case.path in BY_ID_PATHS:
        query = case.query if isinstance(case.query, dict) else {}
        query.setdefault("queue", "default")
        case.query = query
    if case.path.endswith("/drain"):
        query = case.query if isinstance(case.query, dict) else {}
        timeout_ms = query.get("timeout_ms", DRAIN_WAIT_MS)  # absent: the server waits 10 s
        try:
            query["timeout_ms"] = min(int(timeout_ms), DRAIN_WAIT_MS)
        except (TypeError, ValueError):
            pass  # not an integer: a 400 without waiting
        case.query = query
    body = case.body
    if case.path.endswith("/leases") and isinstance(body, dict):
        wait_ms = body.get("wait_ms")
        if isinstance(wait_ms, int) and not isinstance(wait_ms, bool) and wait_ms > LEASE_WAIT_MS:
            body["wait_ms"] = LEASE_WAIT_MS
    if case.path.endswith("/simulations") and isinstance(body, dict):
        if isinstance(body.get("faults"), list):
            known = [f for f in SIM_FAMILIES if f in body["faults"]]
            body["faults"] = known
        if isinstance(body.get("planted"), str) and body["planted"] not in SIM_PLANTED:
            body["planted"] = "none"
    if isinstance(body, dict):
        _fix_submit(body)
        tasks = body.get("tasks")
        if isinstance(tasks, list):
            for task in tasks:
                _fix_submit(task)
    return case
