/**
 * Worker processes that die or are told to stop mid-task: SIGKILL leaves the task to be reaped
 * and run again by another worker (attempt 2); SIGTERM lets the handler finish, then exit 0.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, afterEach, before, test } from "node:test";
import { Client, Worker } from "../src/index.js";
import { PACKAGE_ROOT, within, exited, killChild, memoryLogger, spawnTracked, startServer, tail, tempDir, uniqueQueue, waitFor, type OrqServer } from "./fixture.js";
import type { ChildProcess } from "node:child_process";

const CHILD = join(PACKAGE_ROOT, "dist", "test", "worker-child.js");

let server: OrqServer;
let client: Client;
const cleanups: (() => Promise<void> | void)[] = [];

before(async () => {
  server = await startServer();
  client = new Client({ url: server.url });
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});
after(async () => {
  await server?.stop();
});

/** Start worker-child.js on `queue`, writing markers into `dir`. */
function startChild(queue: string, dir: string): { child: ChildProcess; out: () => string; err: () => string } {
  const child = spawnTracked(process.execPath, [CHILD], { ...process.env, ORQ_URL: server.url, ORQ_QUEUE: queue, ORQ_MARKER_DIR: dir });
  cleanups.push(() => killChild(child));
  return { child, out: tail(child.stdout), err: tail(child.stderr) };
}

test("a worker killed with SIGKILL mid-task: its task is reaped and completed by another worker on attempt 2", async () => {
  const queue = uniqueQueue("sigkill");
  const dir = tempDir();
  cleanups.push(dir.remove);
  const t = await client.submit("hang", { step: "resize" }, { queue, lease_ms: 2000, max_retries: 3, backoff: { initial_ms: 10, jitter: 0 } });
  const { child, err } = startChild(queue, dir.path);
  await waitFor(() => `the child to start task ${t.id} (child log: ${err()})`, () => existsSync(join(dir.path, `${t.id}.started`)));
  child.kill("SIGKILL");
  assert.equal(await within("the child to die", exited(child)), "SIGKILL");
  // 1, unless a stall cost the child its first lease and it leased the task again.
  const childAttempt = Number(readFileSync(join(dir.path, `${t.id}.started`), "utf8"));

  const worker = new Worker({ url: server.url, queues: [queue], handleSignals: false, logger: memoryLogger(), shutdownGraceMs: 2000 });
  worker.handle("hang", (job) => ({ attempt: job.attempt, epoch: job.epoch }));
  const run = worker.run();
  cleanups.push(() => worker.stop());
  const done = await waitFor(`task ${t.id} completed`, async () => {
    const task = await client.get(t.id);
    return task.status === "completed" ? task : undefined;
  });
  assert.ok(childAttempt >= 1);
  assert.equal(done.attempt, childAttempt + 1, "the next attempt (2 when the child ran the first)");
  assert.equal((done.result as { attempt: number }).attempt, done.attempt, "run by the other worker");
  assert.ok((done.result as { epoch: number }).epoch >= 2, "a newer fencing epoch");
  const history = JSON.stringify(done.attempts);
  assert.deepEqual(
    done.attempts.map((a) => a.outcome),
    ["expired", "completed"],
    history,
  );
  assert.equal(done.attempts[0].attempt, childAttempt, history);
  assert.equal(done.attempts[1].error, null, history);
  await within("the worker to stop", worker.stop());
  await within("run() to resolve", run);
});

test("SIGTERM mid-task lets the handler finish; the process exits 0 with the task completed", async () => {
  const queue = uniqueQueue("sigterm");
  const dir = tempDir();
  cleanups.push(dir.remove);
  const t = await client.submit("finish-on-go", {}, { queue });
  const { child, out, err } = startChild(queue, dir.path);
  await waitFor(() => `the child to start task ${t.id} (child log: ${err()})`, () => existsSync(join(dir.path, `${t.id}.started`)));
  child.kill("SIGTERM");
  await waitFor(() => `the child to take the signal (child log: ${err()})`, () => err().includes("SIGTERM: stopping"));
  assert.equal((await client.get(t.id)).status, "leased", "still running after SIGTERM");
  writeFileSync(join(dir.path, "go"), "");
  const code = await waitFor(() => `the child to exit (child log: ${err()})`, () => (child.exitCode !== null ? child.exitCode : child.signalCode));
  assert.equal(code, 0, `exit code (child log: ${err()})`);
  assert.match(out(), /run\(\) resolved/);
  const done = await client.get(t.id);
  assert.equal(done.status, "completed");
  assert.deepEqual(done.result, { finishedBy: child.pid });
});
