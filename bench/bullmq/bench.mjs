// The orq benchmark workload, run with BullMQ against the same Redis, so the two can be compared
// side by side (bench/compare.py, bench/README.md). Written by the orq developers. Three roles:
//
//   --role producer  (what bench/compare.py runs): N jobs added in batches of B (Queue.addBulk),
//                    one batch in flight, then exit; prints JSON on stdout: first_submit_ms
//                    (epoch ms just before the first addBulk), last_submit_ms (epoch ms after the
//                    last answer), submit_s. With --delay, job k is delayed by MS + S * k / (N - 1).
//   --role worker    (what bench/compare.py runs): one Worker, concurrency C, no-op processor,
//                    BullMQ's defaults (completed jobs kept: no removeOnComplete); prints
//                    "ready" on stdout once connected, runs until SIGTERM or SIGINT, then closes.
//   --role both      (the earlier benchmark: producer and worker in this one process, one JS
//                    thread submitting and processing; the phases and JSON of `orq bench`):
//     1. submit:  N tasks in batches of B (Queue.addBulk), no worker running.
//                 -> submit_per_s, mem_bytes_per_task (INFO memory used_memory delta / N)
//     2. e2e:     the queue is emptied; C workers (one Worker, concurrency C, no-op processor) run
//                 while N tasks are submitted in batches of B.
//                 -> complete_per_s (N / first submit to last completion), wait_ms (handler start
//                    minus submit time), script_calls_per_task (EVAL + EVALSHA calls / N)
//     3. delayed: D tasks with delays spread evenly over [MS, MS + S], workers running.
//                 -> lateness_ms (handler start minus due time)
//
// Usage: node bench.mjs --role producer|worker|both --redis redis://127.0.0.1:6379/ --tasks N
//          --batch B --concurrency C [--priorities P] [--delay] [--delayed D --delay-ms MS
//          --delay-spread-ms S] [--json FILE] [--queue NAME]
// --priorities P (1..10, default 1): task k gets orq's priority k mod P, as `orq bench
// --priorities P` gives it; with P > 1 every job is prioritized (BullMQ priority 10 - p, so
// orq's most urgent 9 is BullMQ's 1); with 1 no job has a priority (the plain wait list).
// Every key it writes lives under the queue name's prefix (default "orqbench"). The role both
// obliterates that queue before and after; producer and worker leave it to their caller. Point
// it only at a Redis you own.

import { Queue, Worker } from 'bullmq';
import IORedis from 'ioredis';
import { readFileSync, writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    role: { type: 'string', default: 'both' },
    redis: { type: 'string', default: 'redis://127.0.0.1:6379/' },
    tasks: { type: 'string', default: '10000' },
    batch: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '50' },
    delayed: { type: 'string', default: '0' },
    'delay-ms': { type: 'string', default: '1000' },
    'delay-spread-ms': { type: 'string', default: '0' },
    priorities: { type: 'string', default: '1' },
    delay: { type: 'boolean', default: false },
    json: { type: 'string' },
    queue: { type: 'string', default: 'orqbench' },
  },
});

function int(name, min) {
  const v = Number(args[name]);
  if (!Number.isInteger(v) || v < min) {
    console.error(`--${name} must be an integer >= ${min}, got ${args[name]}`);
    process.exit(2);
  }
  return v;
}

const N = int('tasks', 1);
const B = int('batch', 1);
const C = int('concurrency', 1);
const D = int('delayed', 0);
const DELAY_MS = int('delay-ms', 0);
const SPREAD_MS = int('delay-spread-ms', 0);
const P = int('priorities', 1);
if (P > 10) {
  console.error(`--priorities must be 1..10, got ${P}`);
  process.exit(2);
}
const url = new URL(args.redis);
const connection = {
  host: url.hostname,
  port: Number(url.port || 6379),
  db: Number((url.pathname || '/0').slice(1) || 0),
  maxRetriesPerRequest: null,
};

/** p50 / p99 / max of a list of numbers (ms), nearest-rank; null when empty. */
function summary(xs) {
  if (xs.length === 0) return null;
  const s = Float64Array.from(xs).sort();
  const rank = (q) => s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
  return { p50: rank(0.5), p99: rank(0.99), max: s[s.length - 1] };
}

async function usedMemory(redis) {
  const info = await redis.info('memory');
  return Number(/used_memory:(\d+)/.exec(info)[1]);
}

async function scriptCalls(redis) {
  const info = await redis.info('commandstats');
  let n = 0;
  for (const m of info.matchAll(/cmdstat_(evalsha|eval|evalsha_ro|eval_ro|fcall):calls=(\d+)/g)) {
    n += Number(m[2]);
  }
  return n;
}

async function submit(queue, count, opts = () => ({})) {
  for (let i = 0; i < count; i += B) {
    const jobs = [];
    for (let j = i; j < Math.min(count, i + B); j++) {
      const o = opts(j);
      if (P > 1) o.priority = 10 - (j % P);
      jobs.push({ name: 'noop', data: { i: j }, opts: o });
    }
    await queue.addBulk(jobs);
  }
}

/** Run a worker until `count` jobs completed; returns their (start, job) timings. */
function startWorker(name, count) {
  const starts = [];
  let done = 0;
  let resolve;
  const finished = new Promise((r) => {
    resolve = r;
  });
  const worker = new Worker(
    name,
    async (job) => {
      starts.push({ start: Date.now(), ts: job.timestamp, delay: job.opts.delay || 0 });
    },
    { connection, concurrency: C, autorun: true },
  );
  worker.on('completed', () => {
    done += 1;
    if (done === count) resolve(Date.now());
  });
  worker.on('failed', (job, err) => {
    console.error('job failed', job && job.id, err);
  });
  return { worker, starts, finished };
}

/** --role producer: add N jobs in batches, one in flight; report the submit times. */
async function runProducer() {
  const queue = new Queue(args.queue, { connection });
  await queue.waitUntilReady();
  const delay = (j) => (N === 1 ? DELAY_MS : DELAY_MS + Math.round((SPREAD_MS * j) / (N - 1)));
  const firstSubmitMs = Date.now();
  const t0 = performance.now();
  await submit(queue, N, args.delay ? (j) => ({ delay: delay(j) }) : () => ({}));
  const submitS = (performance.now() - t0) / 1000;
  const lastSubmitMs = Date.now();
  await queue.close();
  const result = {
    engine: 'bullmq',
    role: 'producer',
    version: bullmqVersion(),
    tasks: N,
    first_submit_ms: firstSubmitMs,
    last_submit_ms: lastSubmitMs,
    submit_s: submitS,
  };
  console.log(JSON.stringify(result));
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 2) + '\n');
}

/** --role worker: one Worker of concurrency C with a no-op processor, until SIGTERM / SIGINT. */
async function runWorker() {
  const worker = new Worker(args.queue, async () => {}, { connection, concurrency: C });
  worker.on('failed', (job, err) => {
    console.error('job failed', job && job.id, err);
  });
  await worker.waitUntilReady();
  console.log('ready');
  await new Promise((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await worker.close();
}

function bullmqVersion() {
  return JSON.parse(readFileSync(new URL('./node_modules/bullmq/package.json', import.meta.url)))
    .version;
}

/** --role both: the earlier benchmark, producer and worker in this process. */
async function runBoth() {
  const redis = new IORedis(connection);
  const queue = new Queue(args.queue, { connection });
  await queue.obliterate({ force: true });

  // 1. submit
  const mem0 = await usedMemory(redis);
  let t0 = performance.now();
  await submit(queue, N);
  const submitS = (performance.now() - t0) / 1000;
  const mem1 = await usedMemory(redis);
  console.error(`submit: ${N} in ${submitS.toFixed(2)} s`);
  await queue.obliterate({ force: true });

  // 2. end to end
  const calls0 = await scriptCalls(redis);
  const e2e = startWorker(args.queue, N);
  await e2e.worker.waitUntilReady();
  const e2eStart = Date.now();
  await submit(queue, N);
  const e2eEnd = await e2e.finished;
  const calls1 = await scriptCalls(redis);
  await e2e.worker.close();
  const e2eS = (e2eEnd - e2eStart) / 1000;
  console.error(`e2e: ${N} in ${e2eS.toFixed(2)} s`);
  await queue.obliterate({ force: true });

  // 3. delayed
  let lateness = null;
  if (D > 0) {
    const del = startWorker(args.queue, D);
    await del.worker.waitUntilReady();
    const delay = (j) => (D === 1 ? DELAY_MS : DELAY_MS + Math.round((SPREAD_MS * j) / (D - 1)));
    await submit(queue, D, (j) => ({ delay: delay(j) }));
    await del.finished;
    await del.worker.close();
    lateness = summary(del.starts.map((s) => s.start - (s.ts + s.delay)));
    await queue.obliterate({ force: true });
  }

  const result = {
    engine: 'bullmq',
    version: bullmqVersion(),
    tasks: N,
    batch: B,
    concurrency: C,
    priorities: P,
    delayed: D,
    submit_per_s: N / submitS,
    complete_per_s: N / e2eS,
    wait_ms: summary(e2e.starts.map((s) => s.start - s.ts)),
    lateness_ms: lateness,
    mem_bytes_per_task: (mem1 - mem0) / N,
    script_calls_per_task: (calls1 - calls0) / N,
  };
  console.log(JSON.stringify(result, null, 2));
  if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 2) + '\n');
  await queue.close();
  redis.disconnect();
}

const ROLE = args.role;
if (ROLE === 'producer') await runProducer();
else if (ROLE === 'worker') await runWorker();
else if (ROLE === 'both') await runBoth();
else {
  console.error(`--role must be producer, worker or both, got ${ROLE}`);
  process.exit(2);
}
