/**
 * Keys (orq serve --api-keys): a worker key limited to one queue cannot lease another, a tenant
 * key cannot lease at all, a missing or unknown key is Unauthorized, and a Worker whose lease is
 * refused stops with the error.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, Forbidden, Unauthorized, Worker } from "../src/index.js";
import { keysFile, memoryLogger, newKey, startServer, uniqueQueue, waitFor, within, type OrqServer } from "./fixture.js";

let server: OrqServer;
let removeKeys: () => void = () => undefined;
let admin: Client;
let keys: { admin: string; worker: string; tenant: string; twoTenants: string };
const allowed = uniqueQueue("allowed");
const other = uniqueQueue("other");

before(async () => {
  const a = await newKey("--admin");
  const w = await newKey("--worker", "--queues", allowed);
  const t = await newKey("--tenant", "acme");
  const two = await newKey("--worker", "--tenants", "acme,globex");
  const file = keysFile([a.entry, w.entry, t.entry, two.entry]);
  removeKeys = file.remove;
  keys = { admin: a.key, worker: w.key, tenant: t.key, twoTenants: two.key };
  server = await startServer(["--api-keys", file.path]);
  admin = new Client({ url: server.url, apiKey: keys.admin });
  await admin.submit("a", {}, { queue: allowed });
  await admin.submit("b", {}, { queue: other });
});
after(async () => {
  await server?.stop();
  removeKeys();
});

test("no key or an unknown key is Unauthorized", async () => {
  await assert.rejects(new Client({ url: server.url }).queues(), (e: unknown) => e instanceof Unauthorized && e.status === 401);
  await assert.rejects(new Client({ url: server.url, apiKey: "orq_nope" }).get("01ARZ3NDEKTSV4RRFFQ69G5FAV"), Unauthorized);
});

test("a worker key limited to a queue leases it, but not another queue, and cannot submit", async () => {
  const worker = new Client({ url: server.url, apiKey: keys.worker });
  const leased = await worker.lease({ worker: "keyed", queues: [allowed], count: 1, waitMs: 10_000 });
  assert.equal(leased.length, 1);
  assert.equal((await worker.complete(leased[0]!.id, allowed, leased[0]!.token, "ok")).reported, "applied");
  await assert.rejects(worker.lease({ worker: "keyed", queues: [other] }), (e: unknown) => e instanceof Forbidden && e.code === "forbidden" && e.status === 403);
  await assert.rejects(worker.submit("x", {}, { queue: allowed }), Forbidden);
});

test("a tenant key cannot lease at all", async () => {
  const tenant = new Client({ url: server.url, apiKey: keys.tenant });
  const mine = await tenant.submit("t", {}, { queue: allowed });
  assert.equal(mine.tenant, "acme");
  await assert.rejects(tenant.lease({ worker: "tenant", queues: [allowed] }), Forbidden);
});

test("a Worker whose lease is refused stops, logging and rejecting with Forbidden", async () => {
  const logger = memoryLogger();
  const worker = new Worker({ url: server.url, apiKey: keys.tenant, queues: [allowed], handleSignals: false, logger });
  worker.handle("t", () => 1);
  await assert.rejects(within("run() to reject", worker.run()), Forbidden);
  assert.ok(logger.entries.some((e) => e.level === "error" && /lease refused/.test(e.message)));
});

test("a Worker with a worker key completes tasks of its queue", async () => {
  const t = await admin.submit("keyed-job", { n: 2 }, { queue: allowed });
  const worker = new Worker({ url: server.url, apiKey: keys.worker, queues: [allowed], handleSignals: false, logger: memoryLogger() });
  worker.handle("keyed-job", (job) => job.payload);
  worker.handle("t", () => "tenant task done");
  const run = worker.run();
  try {
    const done = await waitFor(`task ${t.id} completed`, async () => {
      const task = await admin.get(t.id);
      return task.status === "completed" ? task : undefined;
    });
    assert.deepEqual(done.result, { n: 2 });
  } finally {
    await within("the worker to stop", worker.stop());
    await within("run() to resolve", run);
  }
});

test("a worker key limited to tenants leases only theirs; a Worker may narrow it further", async () => {
  const q = uniqueQueue("tenants");
  const ids: Record<string, string[]> = {};
  for (const tenant of ["acme", "globex", "initech"]) {
    ids[tenant] = [];
    for (let i = 0; i < 2; i++) ids[tenant]!.push((await admin.submit("who", {}, { queue: q, tenant })).id);
  }
  const client = new Client({ url: server.url, apiKey: keys.twoTenants });
  await assert.rejects(client.lease({ worker: "w", queues: [q], tenants: ["initech"] }), Forbidden);
  const completed = (id: string) =>
    waitFor(`task ${id} completed`, async () => {
      const task = await admin.get(id);
      return task.status === "completed" ? task : undefined;
    });
  for (const [tenants, served] of [[["acme"], "acme"], [undefined, "globex"]] as const) {
    const worker = new Worker({ url: server.url, apiKey: keys.twoTenants, queues: [q], tenants: tenants ? [...tenants] : undefined, waitMs: 500, handleSignals: false, logger: memoryLogger() });
    worker.handle("who", (job) => `${served}-worker:${job.tenant}`);
    const run = worker.run();
    try {
      for (const id of ids[served]!) assert.equal((await completed(id)).result, `${served}-worker:${served}`);
    } finally {
      await within("the worker to stop", worker.stop());
      await within("run() to resolve", run);
    }
  }
  for (const id of ids.initech!) assert.equal((await admin.get(id)).status, "queued");
});
