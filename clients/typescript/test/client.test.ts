/** The Client against a live `orq serve`: tasks, batches, listing, DLQ, queues, protocol calls, typed errors. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  BadRequest,
  Client,
  Conflict,
  ERROR_CLASSES,
  LeaseLost,
  NotFound,
  OrqError,
  PayloadTooLarge,
  TaskCancelled,
  errorFromAnswer,
  type ErrorCode,
  type LeasedTask,
} from "../src/index.js";
import { startServer, uniqueQueue, type OrqServer } from "./fixture.js";

let server: OrqServer;
let client: Client;

before(async () => {
  server = await startServer();
  client = new Client({ url: server.url });
});
after(async () => {
  await server?.stop();
});

/** Lease the one task of `queue` (it must be ready). */
async function leaseOne(queue: string): Promise<LeasedTask> {
  const tasks = await client.lease({ worker: "test-worker", queues: [queue], count: 1, waitMs: 10_000 });
  assert.equal(tasks.length, 1, "one task leased");
  return tasks[0]!;
}

/** Assert that `p` rejects with an instance of `cls` carrying `code` and `status`. */
async function rejectsWith(p: Promise<unknown>, cls: abstract new (...a: never[]) => OrqError, code: string, status: number): Promise<OrqError> {
  const err = await p.then(
    () => assert.fail(`expected ${cls.name}`),
    (e: unknown) => e,
  );
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
  assert.equal(err.code, code);
  assert.equal(err.status, status);
  assert.ok(err.message.length > 0);
  return err;
}

describe("tasks", () => {
  test("submit, then get by id with and without its queue", async () => {
    const queue = uniqueQueue("submit");
    const task = await client.submit("resize", { w: 640 }, { queue, priority: 5, max_retries: 2, tenant: "acme" });
    assert.match(task.id, /^[0-9A-HJKMNP-TV-Z]{26}$/);
    assert.equal(task.status, "queued");
    assert.equal(task.type, "resize");
    assert.equal(task.queue, queue);
    assert.equal(task.tenant, "acme");
    assert.equal(task.priority, 5);
    assert.equal(task.max_retries, 2);
    assert.deepEqual(task.payload, { w: 640 });
    const byQueue = await client.get(task.id, { queue });
    assert.deepEqual(byQueue.payload, { w: 640 });
    const anywhere = await client.get(task.id.toLowerCase());
    assert.equal(anywhere.id, task.id);
  });

  test("a submit with an idempotency key answers the first task", async () => {
    const queue = uniqueQueue("idem");
    const a = await client.submit("x", 1, { queue, idempotency_key: "order-1" });
    const b = await client.submit("x", 1, { queue, idempotency_key: "order-1" });
    assert.equal(b.id, a.id);
    assert.equal(b.idempotency_key, "order-1");
  });

  test("list pages through a queue with filters", async () => {
    const queue = uniqueQueue("list");
    const ids = new Set<string>();
    for (let i = 0; i < 3; i++) ids.add((await client.submit("page", { i }, { queue })).id);
    await client.submit("other", {}, { queue });
    const first = await client.list({ queue, type: "page", limit: 2 });
    assert.equal(first.tasks.length, 2);
    assert.ok(first.nextCursor, "a cursor for the next page");
    const second = await client.list({ queue, type: "page", limit: 2, cursor: first.nextCursor });
    assert.equal(second.tasks.length, 1);
    assert.equal(second.nextCursor, null);
    const seen = new Set([...first.tasks, ...second.tasks].map((t) => t.id));
    assert.deepEqual(seen, ids);
    const queued = await client.list({ queue, status: "queued" });
    assert.equal(queued.tasks.length, 4);
    const none = await client.list({ queue, status: "completed" });
    assert.equal(none.tasks.length, 0);
  });

  test("submitMany creates tasks in order, then finds them by idempotency key", async () => {
    const queue = uniqueQueue("batch");
    const items = [0, 1, 2].map((i) => ({ type: "b", payload: { i }, queue, idempotency_key: `batch-${i}` }));
    const first = await client.submitMany(items);
    assert.deepEqual(first.created, [true, true, true]);
    assert.deepEqual(first.tasks.map((t) => (t.payload as { i: number }).i), [0, 1, 2]);
    const again = await client.submitMany(items);
    assert.deepEqual(again.created, [false, false, false]);
    assert.deepEqual(again.tasks.map((t) => t.id), first.tasks.map((t) => t.id));
  });

  test("cancel a scheduled task; cancelling again returns it", async () => {
    const queue = uniqueQueue("cancel");
    const task = await client.submit("later", {}, { queue, delay_ms: 600_000 });
    assert.equal(task.status, "scheduled");
    const cancelled = await client.cancel(task.id);
    assert.equal(cancelled.status, "cancelled");
    assert.ok(cancelled.finished_at);
    const again = await client.cancel(task.id, { queue });
    assert.equal(again.status, "cancelled");
  });

  test("queues and queue show counts", async () => {
    const queue = uniqueQueue("stats");
    await client.submit("s", 1, { queue });
    await client.submit("s", 2, { queue, delay_ms: 600_000 });
    const stats = await client.queue(queue);
    assert.equal(stats.queue, queue);
    assert.equal(stats.counts.queued, 1);
    assert.equal(stats.counts.scheduled, 1);
    const all = await client.queues();
    assert.ok(all.some((q) => q.queue === queue));
  });
});

describe("dead-letter queue", () => {
  test("a permanent failure lands in the DLQ; replay, bulk replay and purge", async () => {
    const queue = uniqueQueue("dlq");
    const task = await client.submit("doomed", { n: 1 }, { queue, max_retries: 3 });
    let leased = await leaseOne(queue);
    assert.equal(leased.id, task.id);
    assert.equal((await client.fail(leased.id, queue, leased.token, "bad input", { permanent: true })).reported, "applied");
    const dead = await client.dlq({ queue });
    assert.deepEqual(dead.tasks.map((t) => t.id), [task.id]);
    assert.equal(dead.tasks[0]!.status, "dead");
    assert.equal(dead.tasks[0]!.last_error, "bad input");

    const replayed = await client.replay(task.id, { queue });
    assert.equal(replayed.status, "queued");
    assert.equal(replayed.replays, 1);
    await assert.rejects(client.replay(task.id), (e: unknown) => e instanceof Conflict && e.code === "conflict");
    assert.equal((await client.dlq({ queue })).tasks.length, 0);

    leased = await leaseOne(queue);
    await client.fail(leased.id, queue, leased.token, "still bad", { permanent: true });
    const bulk = await client.replayDlq({ queue });
    assert.deepEqual(bulk, { queue, replayed: 1, more: false });

    leased = await leaseOne(queue);
    await client.fail(leased.id, queue, leased.token, "bad for good", { permanent: true });
    const purged = await client.purge(task.id, { queue });
    assert.deepEqual(purged, { id: task.id, purged: true });
    await rejectsWith(client.get(task.id), NotFound, "not_found", 404);
  });
});

describe("worker protocol calls", () => {
  test("lease, heartbeat, complete; a resent complete is already applied", async () => {
    const queue = uniqueQueue("proto");
    const task = await client.submit("p", { a: 1 }, { queue, lease_ms: 5000 });
    const leased = await leaseOne(queue);
    assert.equal(leased.id, task.id);
    assert.equal(leased.attempt, 1);
    assert.equal(leased.lease_ms, 5000);
    assert.ok(leased.heartbeat_ms > 0 && leased.heartbeat_ms < 5000);
    const hb = await client.heartbeat(leased.id, queue, leased.token, 10_000);
    assert.ok(hb.lease_left_ms > 5000, `extended to about 10 s, got ${hb.lease_left_ms}`);
    assert.equal((await client.complete(leased.id, queue, leased.token, { ok: true })).reported, "applied");
    assert.equal((await client.complete(leased.id, queue, leased.token, { ok: true })).reported, "already_applied");
    const done = await client.get(task.id);
    assert.equal(done.status, "completed");
    assert.deepEqual(done.result, { ok: true });
  });

  test("a lease with no work ends empty after its wait", async () => {
    const queue = uniqueQueue("empty");
    await client.submit("e", 1, { queue, delay_ms: 600_000 });
    assert.deepEqual(await client.lease({ worker: "w", queues: [queue], count: 5, waitMs: 200 }), []);
  });

  test("a stale report (lease, release, complete with the old token) throws LeaseLost", async () => {
    const queue = uniqueQueue("stale");
    await client.submit("s", 1, { queue });
    const leased = await leaseOne(queue);
    assert.equal((await client.release(leased.id, queue, leased.token)).reported, "applied");
    assert.equal((await client.release(leased.id, queue, leased.token)).reported, "already_applied");
    const err = await rejectsWith(client.complete(leased.id, queue, leased.token, 1), LeaseLost, "lease_lost", 409);
    assert.ok(err instanceof Conflict, "LeaseLost is a Conflict");
    await rejectsWith(client.heartbeat(leased.id, queue, leased.token), LeaseLost, "lease_lost", 409);
    const again = await leaseOne(queue);
    assert.equal(again.id, leased.id);
    assert.ok(again.epoch > leased.epoch, "a new lease has a higher fencing epoch");
  });

  test("completeMany applies each completion on its own, in order; resent, it is already applied", async () => {
    const queue = uniqueQueue("many");
    for (let i = 0; i < 3; i++) await client.submit("m", i, { queue });
    const [a, b, c] = await client.lease({ worker: "ts-many", queues: [queue], count: 3 });
    assert.ok(a && b && c);
    await client.release(c.id, queue, c.token);
    const got = await client.completeMany(queue, [
      { id: a.id, token: a.token, result: { n: 1 } },
      { id: b.id, token: b.token },
      { id: c.id, token: c.token, result: "late" },
    ]);
    assert.deepEqual(got.slice(0, 2), ["applied", "applied"]);
    assert.ok(got[2] instanceof LeaseLost && got[2].status === 409, String(got[2]));
    assert.deepEqual(await client.completeMany(queue, [{ id: a.id, token: a.token, result: { n: 1 } }]), ["already_applied"]);
    assert.deepEqual((await client.get(a.id)).result, { n: 1 });
    assert.equal((await client.get(c.id)).status, "queued");
    await assert.rejects(client.completeMany(queue, []), BadRequest);
  });

  test("reports on a task cancelled while leased throw TaskCancelled", async () => {
    const queue = uniqueQueue("cancelled");
    await client.submit("c", 1, { queue });
    const leased = await leaseOne(queue);
    await client.cancel(leased.id);
    const err = await rejectsWith(client.heartbeat(leased.id, queue, leased.token), TaskCancelled, "cancelled", 409);
    assert.ok(err instanceof Conflict);
    await rejectsWith(client.complete(leased.id, queue, leased.token), TaskCancelled, "cancelled", 409);
    assert.equal((await client.get(leased.id)).status, "cancelled");
  });
});

describe("typed errors", () => {
  test("bad input is BadRequest, a missing task or queue NotFound, an oversized payload PayloadTooLarge", async () => {
    const queue = uniqueQueue("errors");
    await rejectsWith(client.submit("x", 1, { queue: "not a queue" }), BadRequest, "bad_request", 400);
    await rejectsWith(client.submit("x", 1, { queue, priority: 42 }), BadRequest, "bad_request", 400);
    await rejectsWith(client.submit("x", 1, { queue, delay_ms: 10, run_at: new Date().toISOString() } as never), BadRequest, "bad_request", 400);
    await rejectsWith(client.get("01ARZ3NDEKTSV4RRFFQ69G5FAV"), NotFound, "not_found", 404);
    await rejectsWith(client.queue(uniqueQueue("nowhere")), NotFound, "not_found", 404);
    await rejectsWith(client.lease({ worker: "w", queues: [uniqueQueue("nowhere")] }), NotFound, "not_found", 404);
    await rejectsWith(client.lease({ worker: "w", queues: [queue], count: 0 }), BadRequest, "bad_request", 400);
    await rejectsWith(client.lease({ worker: "bad id!", queues: [queue] }), BadRequest, "bad_request", 400);
    await rejectsWith(client.submit("x", "a".repeat(1024 * 1024 + 10), { queue }), PayloadTooLarge, "payload_too_large", 413);
    const t = await client.submit("x", 1, { queue });
    await rejectsWith(client.purge(t.id), Conflict, "conflict", 409);
    const leased = await leaseOne(queue);
    await rejectsWith(client.fail(leased.id, queue, leased.token, ""), BadRequest, "bad_request", 400);
  });

  test("every code of the served ErrorCode schema maps to an error class", async () => {
    const res = await fetch(`${server.url}/api/v1/openapi.json`);
    assert.equal(res.status, 200);
    const doc = (await res.json()) as { components: { schemas: { ErrorCode: { enum: string[] } } } };
    const served = doc.components.schemas.ErrorCode.enum;
    assert.ok(served.length >= 10, "the served document lists the codes");
    for (const code of served) {
      assert.ok(Object.hasOwn(ERROR_CLASSES, code), `no error class for served code ${code}`);
      const cls = ERROR_CLASSES[code as ErrorCode];
      const err = errorFromAnswer(418, JSON.stringify({ error: { code, message: "m" } }), null);
      assert.ok(err instanceof cls, `${code} becomes ${cls.name}`);
      assert.ok(err instanceof OrqError);
      assert.equal(err.code, code);
    }
    assert.deepEqual(Object.keys(ERROR_CLASSES).sort(), [...served].sort(), "no class for a code the server no longer has");
  });
});
