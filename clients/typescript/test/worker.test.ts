/** The Worker against a live `orq serve`: results, retries, Permanent, cancel, timeout, heartbeats, shutdown. */
import assert from "node:assert/strict";
import { after, afterEach, before, describe, test } from "node:test";
import { Client, Permanent, Worker, type Handler, type Job, type Task, type WorkerOptions } from "../src/index.js";
import { memoryLogger, startServer, uniqueQueue, waitFor, within, type OrqServer } from "./fixture.js";

let server: OrqServer;
let client: Client;
const workers: Worker[] = [];

before(async () => {
  server = await startServer();
  client = new Client({ url: server.url });
});
afterEach(async () => {
  await within("the workers to stop", Promise.all(workers.splice(0).map((w) => w.stop())));
});
after(async () => {
  await server?.stop();
});

/** A running worker of `queue` with `handlers`, its run() promise and its log. */
function startWorker(queue: string, handlers: Record<string, Handler>, opts: Partial<WorkerOptions> = {}) {
  const logger = memoryLogger();
  const worker = new Worker({ url: server.url, queues: [queue], handleSignals: false, shutdownGraceMs: 2000, unknownQueuePauseMs: 200, logger, ...opts });
  for (const [type, h] of Object.entries(handlers)) worker.handle(type, h);
  workers.push(worker);
  const run = worker.run();
  run.catch(() => undefined);
  return { worker, run, logger };
}

/** Wait until task `id` has `status`; returns it. */
function waitStatus(id: string, status: Task["status"]): Promise<Task> {
  return waitFor(`task ${id} ${status}`, async () => {
    const t = await client.get(id);
    return t.status === status ? t : undefined;
  });
}

/** A promise with its resolve function. */
function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves with the signal's reason once it aborts. */
const aborted = (signal: AbortSignal): Promise<unknown> =>
  new Promise((r) => (signal.aborted ? r(signal.reason) : signal.addEventListener("abort", () => r(signal.reason), { once: true })));

const fastRetry = { initial_ms: 10, multiplier: 1, max_ms: 10, jitter: 0 };

describe("outcomes", () => {
  test("completes tasks with their results, never running more than `concurrency` at once", async () => {
    const queue = uniqueQueue("results");
    const jobs: Job[] = [];
    let running = 0;
    let most = 0;
    startWorker(
      queue,
      {
        double: async (job: Job<{ n: number }>) => {
          jobs.push(job);
          most = Math.max(most, ++running);
          await new Promise((r) => setTimeout(r, 50));
          running--;
          return { n: job.payload.n * 2 };
        },
      },
      { concurrency: 2 },
    );
    const tasks = await Promise.all([1, 2, 3, 4, 5].map((n) => client.submit("double", { n }, { queue, tenant: "acme" })));
    for (const [i, t] of tasks.entries()) {
      const done = await waitStatus(t.id, "completed");
      assert.deepEqual(done.result, { n: (i + 1) * 2 });
      assert.equal(done.attempt, 1);
    }
    assert.ok(most <= 2, `at most 2 handlers at once, saw ${most}`);
    const job = jobs.find((j) => j.id === tasks[0]!.id)!;
    assert.equal(job.queue, queue);
    assert.equal(job.tenant, "acme");
    assert.equal(job.type, "double");
    assert.equal(job.attempt, 1);
    assert.equal(job.maxRetries, 3);
    assert.ok(job.epoch >= 1);
    assert.ok(job.token.length > 0);
    assert.equal(job.leaseMs, 30_000);
    assert.equal(job.signal.aborted, false);
    assert.equal(job.traceparent, null, "no trace sent");
    assert.equal(job.tracestate, null);
  });

  test("a job carries the trace context its task was submitted under", async () => {
    const queue = uniqueQueue("traces");
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const r = await fetch(`${server.url}/api/v1/tasks`, {
      method: "POST",
      headers: { "content-type": "application/json", traceparent, tracestate: "vendor=1,rojo=2" },
      body: JSON.stringify({ type: "traced", payload: {}, queue }),
    });
    assert.equal(r.status, 201);
    const { id } = (await r.json()) as { id: string };
    const jobs: Job[] = [];
    startWorker(queue, { traced: (job) => void jobs.push(job) });
    await waitStatus(id, "completed");
    assert.deepEqual(
      jobs.map((j) => [j.traceparent, j.tracestate]),
      [[traceparent, "vendor=1,rojo=2"]],
    );
  });

  test("a thrown error is retried, then the task succeeds", async () => {
    const queue = uniqueQueue("retry");
    const { logger } = startWorker(queue, {
      flaky: (job) => {
        if (job.attempt === 1) throw new Error("boom on the first attempt");
        return `ok on attempt ${job.attempt}`;
      },
    });
    const t = await client.submit("flaky", {}, { queue, max_retries: 3, backoff: fastRetry });
    const done = await waitStatus(t.id, "completed");
    assert.equal(done.attempt, 2);
    assert.equal(done.result, "ok on attempt 2");
    const [first, second] = done.attempts;
    assert.equal(done.attempts.length, 2, JSON.stringify(done.attempts));
    assert.equal(first.outcome, "failed");
    assert.ok(first.error?.includes("boom on the first attempt"), JSON.stringify(first));
    assert.deepEqual([second.attempt, second.outcome, second.error], [2, "completed", null]);
    assert.ok(logger.entries.some((e) => e.level === "warn" && e.fields.task === t.id && String(e.fields.error).includes("boom")));
  });

  test("Permanent sends the task to the DLQ at once", async () => {
    const queue = uniqueQueue("permanent");
    startWorker(queue, {
      broken: () => {
        throw new Permanent("invalid image");
      },
    });
    const t = await client.submit("broken", {}, { queue, max_retries: 5, backoff: fastRetry });
    const dead = await waitStatus(t.id, "dead");
    assert.equal(dead.attempt, 1);
    assert.equal(dead.last_error, "invalid image");
    assert.deepEqual((await client.dlq({ queue })).tasks.map((x) => x.id), [t.id]);
  });

  test("a type with no handler fails (retryable), saying so", async () => {
    const queue = uniqueQueue("nohandler");
    const { logger } = startWorker(queue, { known: () => 1 });
    const t = await client.submit("unknown-type", {}, { queue, max_retries: 1, backoff: fastRetry });
    const dead = await waitStatus(t.id, "dead");
    assert.equal(dead.attempt, 2, "retried once before dying");
    assert.match(dead.last_error ?? "", /no handler for type unknown-type/);
    assert.ok(logger.entries.some((e) => e.fields.task === t.id && /no handler/.test(e.message)));
  });

  test("a result that is not JSON fails the task permanently", async () => {
    const queue = uniqueQueue("notjson");
    const { logger } = startWorker(queue, { big: () => ({ n: 1n }) });
    const t = await client.submit("big", {}, { queue, max_retries: 3 });
    const dead = await waitStatus(t.id, "dead");
    assert.equal(dead.attempt, 1);
    assert.match(dead.last_error ?? "", /not JSON-serialisable/);
    assert.ok(logger.entries.some((e) => e.level === "error" && e.fields.task === t.id));
  });
});

describe("aborts", () => {
  test("cancelling a running task aborts the handler's signal; the task ends cancelled", async () => {
    const queue = uniqueQueue("cancel");
    const started = deferred<Job>();
    const reason = deferred<unknown>();
    startWorker(queue, {
      long: async (job) => {
        started.resolve(job);
        reason.resolve(await aborted(job.signal));
        throw new Error("stopped");
      },
    });
    const t = await client.submit("long", {}, { queue, lease_ms: 3000 });
    await within("the handler to start", started.promise);
    await client.cancel(t.id);
    assert.equal(await within("the handler's signal to abort", reason.promise), "cancelled");
    const after = await client.get(t.id);
    assert.equal(after.status, "cancelled");
  });

  test("timeout_ms aborts the handler with reason timeout and fails the attempt", async () => {
    const queue = uniqueQueue("timeout");
    const reason = deferred<unknown>();
    startWorker(queue, {
      stuck: async (job) => {
        reason.resolve(await aborted(job.signal));
        throw job.signal.reason;
      },
    });
    const t = await client.submit("stuck", {}, { queue, timeout_ms: 300, max_retries: 0 });
    assert.equal(await within("the handler's signal to abort", reason.promise), "timeout");
    const dead = await waitStatus(t.id, "dead");
    assert.match(dead.last_error ?? "", /timeout/);
  });

  test("heartbeats keep a lease for a handler that runs longer than lease_ms", async () => {
    const queue = uniqueQueue("heartbeat");
    startWorker(queue, {
      slow: async (job) => {
        await new Promise((r) => setTimeout(r, job.leaseMs * 2 + 1000));
        return "slow but done";
      },
    });
    const t = await client.submit("slow", {}, { queue, lease_ms: 4000 });
    const done = await waitStatus(t.id, "completed");
    assert.equal(done.attempt, 1, JSON.stringify(done.attempts));
    assert.equal(done.result, "slow but done");
  });
});

describe("transient failures", () => {
  test("a heartbeat answered 503 is sent again; a completion whose answer was lost is resent and already applied", async () => {
    const queue = uniqueQueue("flaky");
    let failedBeats = 0;
    let beatsAfter = 0;
    let lostCompletes = 0;
    const flaky: typeof fetch = async (input, init) => {
      const path = new URL(String(input)).pathname;
      if (path.endsWith("/heartbeat")) {
        if (failedBeats === 0) {
          failedBeats++;
          const body = JSON.stringify({ error: { code: "store_unavailable", message: "busy (injected)" } });
          return new Response(body, { status: 503, headers: { "content-type": "application/json", "retry-after": "0" } });
        }
        const res = await fetch(input, init);
        if (res.ok) beatsAfter++;
        return res;
      }
      if (path.endsWith("/complete") && lostCompletes === 0) {
        lostCompletes++;
        await (await fetch(input, init)).text();
        throw new TypeError("fetch failed", { cause: Object.assign(new Error("socket hang up (injected)"), { code: "ECONNRESET" }) });
      }
      return fetch(input, init);
    };
    const { logger } = startWorker(queue, { beat: async () => {
      await waitFor("a heartbeat to get through after the failed one", () => beatsAfter > 0);
      return "done";
    } }, { fetch: flaky });
    const t = await client.submit("beat", {}, { queue, lease_ms: 3000 });
    const done = await waitStatus(t.id, "completed");
    assert.equal(done.attempt, 1);
    assert.equal(done.result, "done");
    assert.equal(lostCompletes, 1);
    const mine = logger.entries.filter((e) => e.fields.task === t.id);
    assert.ok(mine.some((e) => e.level === "warn" && /heartbeat failed/.test(e.message)), "the failed heartbeat is logged");
    // The completion went with the worker's batch (POST /leases/complete), whose answer was
    // lost: the task then sent it alone, and orq said it had it already.
    assert.ok(logger.entries.some((e) => /batch of 1 completions was refused; each is sent alone/.test(e.message)), "the lost batch is logged");
    await waitFor("the resent complete to be logged", () => logger.entries.some((e) => e.fields.task === t.id && e.message === "complete already_applied"));
  });
});

describe("shutdown", () => {
  test("stop lets a running handler finish and leases nothing more", async () => {
    const queue = uniqueQueue("stop");
    const started = deferred();
    const go = deferred();
    const { worker, run } = startWorker(queue, {
      wait: async () => {
        started.resolve();
        await go.promise;
        return "finished";
      },
    });
    const t = await client.submit("wait", {}, { queue });
    await within("the handler to start", started.promise);
    let stopped = false;
    const stopping = worker.stop().then(() => (stopped = true));
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(stopped, false, "stop waits for the running handler");
    const later = await client.submit("wait", {}, { queue });
    go.resolve();
    await within("stop() to resolve", stopping);
    await within("run() to resolve", run);
    assert.equal((await client.get(t.id)).status, "completed");
    assert.equal((await client.get(later.id)).status, "queued", "nothing leased after stop");
  });

  test("past the grace, the handler is aborted with reason shutdown and its task released", async () => {
    const queue = uniqueQueue("grace");
    const started = deferred();
    const reason = deferred<unknown>();
    const { worker } = startWorker(
      queue,
      {
        forever: async (job) => {
          started.resolve();
          reason.resolve(await aborted(job.signal));
          throw new Error("aborted");
        },
      },
      { shutdownGraceMs: 300 },
    );
    const t = await client.submit("forever", {}, { queue });
    await within("the handler to start", started.promise);
    await within("stop() to resolve", worker.stop());
    assert.equal(await within("the handler's signal to abort", reason.promise), "shutdown");
    const released = await client.get(t.id);
    assert.equal(released.status, "queued");
    assert.equal(released.lease, null);
  });

  test("a task leased as stop begins is released, not run", async () => {
    const queue = uniqueQueue("late");
    let ran = false;
    let worker!: Worker;
    const leasedThenStop: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      if (!String(input).endsWith("/leases")) return res;
      const text = await res.text();
      if (text.includes('"id"')) void worker.stop();
      return new Response(text, { status: res.status, headers: res.headers });
    };
    const started = startWorker(queue, { job: () => (ran = true) }, { fetch: leasedThenStop });
    worker = started.worker;
    const t = await client.submit("job", {}, { queue });
    await within("run() to resolve", started.run);
    assert.equal(ran, false);
    const task = await client.get(t.id);
    assert.equal(task.status, "queued");
    assert.ok(started.logger.entries.some((e) => e.fields.task === t.id && /released/.test(e.message)));
  });

  test("a queue that does not exist yet is logged and leased again after a pause", async () => {
    const queue = uniqueQueue("later");
    const { logger } = startWorker(queue, { x: () => "done" });
    await waitFor("the unknown queue logged", () => logger.entries.some((e) => e.level === "warn" && /no queue named/.test(e.message)));
    const t = await client.submit("x", {}, { queue });
    assert.equal((await waitStatus(t.id, "completed")).result, "done");
  });
});
