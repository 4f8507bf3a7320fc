// One task per call, as most applications submit: the load of bench/light.py, for either engine
// (it lives here because BullMQ's package is installed here; the orq side needs only
// node:http). Written by the orq developers. Two shapes:
//
//   --in-flight K   closed loop: K submits in flight at all times until N are answered (the
//                   `wrk -c32` shape of issue 23: the Redis time one submit costs);
//   --interval A-B  open loop: one submit every A..B ms (uniform, seeded), one at a time, the
//                   light load of an application that submits now and then.
//
// orq:    POST {url}/api/v1/tasks, body {"queue", "type": "echo", "payload": {"i": k}}; 201 expected.
// BullMQ: Queue.add('echo', {i: k}) on queue NAME (no options: BullMQ's defaults).
// Prints one JSON line on stdout: engine, tasks, first_submit_ms, last_submit_ms, submit_s,
// per_s, latency_ms {p50, p99, max} (each call, send to answer).
//
// Usage: node single.mjs --engine orq|bullmq [--url http://127.0.0.1:8080]
//          [--redis redis://127.0.0.1:6379/] --queue NAME --tasks N
//          (--in-flight K | --interval A-B) [--seed S]

import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    engine: { type: 'string' },
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    redis: { type: 'string', default: 'redis://127.0.0.1:6379/' },
    queue: { type: 'string', default: 'orqbench' },
    tasks: { type: 'string', default: '10000' },
    'in-flight': { type: 'string' },
    interval: { type: 'string' },
    seed: { type: 'string', default: '1' },
  },
});

function fail(msg) {
  console.error(msg);
  process.exit(2);
}

function int(text, name, min, max = Infinity) {
  const v = Number(text);
  if (!Number.isInteger(v) || v < min || v > max) fail(`${name} must be an integer in ${min}..${max}, got ${text}`);
  return v;
}

const N = int(args.tasks, '--tasks', 1);
if ((args['in-flight'] === undefined) === (args.interval === undefined)) {
  fail('give exactly one of --in-flight K and --interval A-B');
}
const K = args['in-flight'] !== undefined ? int(args['in-flight'], '--in-flight', 1, 10000) : 1;
let lo = 0;
let hi = 0;
if (args.interval !== undefined) {
  const m = /^(\d+)-(\d+)$/.exec(args.interval);
  if (!m) fail(`--interval must be A-B (ms), got ${args.interval}`);
  lo = Number(m[1]);
  hi = Number(m[2]);
  if (lo > hi) fail(`--interval A-B needs A <= B, got ${args.interval}`);
}

// mulberry32: a small seeded generator, so that two runs wait the same intervals.
let state = int(args.seed, '--seed', 0) >>> 0;
function random() {
  state = (state + 0x6d2b79f5) >>> 0;
  let t = state;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}

let submit;
let close = async () => {};
if (args.engine === 'orq') {
  // node:http with a keep-alive agent of K sockets: Node's fetch costs the client about 1 ms of
  // CPU per call, which would make the load generator the bottleneck.
  const http = await import('node:http');
  const endpoint = new URL(`${args.url.replace(/\/$/, '')}/api/v1/tasks`);
  const agent = new http.Agent({ keepAlive: true, maxSockets: K });
  submit = (k) => new Promise((resolve, reject) => {
    const body = JSON.stringify({ queue: args.queue, type: 'echo', payload: { i: k } });
    const req = http.request(endpoint, {
      method: 'POST',
      agent,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    }, (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString();
        if (res.statusCode !== 201) {
          reject(new Error(`POST ${endpoint}: ${res.statusCode} ${text.slice(0, 500)}`));
        } else if (!JSON.parse(text).id) {
          // Decode the answer, as a client reading its task id would.
          reject(new Error(`answer without an id: ${text.slice(0, 200)}`));
        } else {
          resolve();
        }
      });
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body);
  });
  close = async () => agent.destroy();
} else if (args.engine === 'bullmq') {
  const { Queue } = await import('bullmq');
  const { default: IORedis } = await import('ioredis');
  const connection = new IORedis(args.redis, { maxRetriesPerRequest: null });
  const queue = new Queue(args.queue, { connection });
  await queue.waitUntilReady();
  submit = async (k) => {
    await queue.add('echo', { i: k });
  };
  close = async () => {
    await queue.close();
    await connection.quit();
  };
} else {
  fail(`--engine must be orq or bullmq, got ${args.engine}`);
}

const latencies = new Float64Array(N);
let next = 0;
async function one() {
  const k = next++;
  const t = performance.now();
  await submit(k);
  latencies[k] = performance.now() - t;
}

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const firstSubmitMs = Date.now();
const t0 = performance.now();
if (args.interval !== undefined) {
  // Open loop: the k-th submit starts at the sum of the intervals before it, whatever the
  // answers took (a slow answer does not slow the arrivals).
  let due = t0;
  const pending = [];
  for (let k = 0; k < N; k++) {
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(one());
    due += lo + random() * (hi - lo);
  }
  await Promise.all(pending);
} else {
  async function loop() {
    while (next < N) await one();
  }
  await Promise.all(Array.from({ length: Math.min(K, N) }, loop));
}
const submitS = (performance.now() - t0) / 1000;
await close();

const sorted = Array.from(latencies).sort((a, b) => a - b);
const rank = (q) => sorted[Math.min(N - 1, Math.max(0, Math.ceil(q * N) - 1))];
const r3 = (x) => Math.round(x * 1000) / 1000;
console.log(JSON.stringify({
  engine: args.engine,
  tasks: N,
  first_submit_ms: firstSubmitMs,
  last_submit_ms: Date.now(),
  submit_s: r3(submitS),
  per_s: Math.round(N / submitS),
  latency_ms: { p50: r3(rank(0.5)), p99: r3(rank(0.99)), max: r3(sorted[N - 1]) },
}));
