// orq's producer for bench/compare.py: N `echo` tasks posted to a running `orq api` in batches of
// B (`POST /api/v1/tasks/batch`), one batch in flight on one keep-alive connection, the way an
// application submits over orq's HTTP API; the counterpart of `bench/bullmq/bench.mjs --role
// producer` (Queue.addBulk). No dependencies (Node's fetch). Prints JSON on stdout:
// first_submit_ms (epoch ms just before the first POST), last_submit_ms (epoch ms after the last
// answer), submit_s.
//
// Usage: node producer.mjs --url http://127.0.0.1:8080 --queue NAME --tasks N --batch B
//          [--priorities P] [--delay --delay-ms MS --delay-spread-ms S] [--json FILE]
// Task k carries the payload {"i": k} (as BullMQ's job data), priority k mod P (P = 1: none),
// and with --delay a delay of MS + S * k / (N - 1) ms.

import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values: args } = parseArgs({
  options: {
    url: { type: 'string', default: 'http://127.0.0.1:8080' },
    queue: { type: 'string', default: 'orqbench' },
    tasks: { type: 'string', default: '10000' },
    batch: { type: 'string', default: '1000' },
    priorities: { type: 'string', default: '1' },
    delay: { type: 'boolean', default: false },
    'delay-ms': { type: 'string', default: '1000' },
    'delay-spread-ms': { type: 'string', default: '0' },
    json: { type: 'string' },
  },
});

function int(name, min, max = Infinity) {
  const v = Number(args[name]);
  if (!Number.isInteger(v) || v < min || v > max) {
    console.error(`--${name} must be an integer in ${min}..${max}, got ${args[name]}`);
    process.exit(2);
  }
  return v;
}

const N = int('tasks', 1);
const B = int('batch', 1, 1000);
const P = int('priorities', 1, 10);
const DELAY_MS = int('delay-ms', 0);
const SPREAD_MS = int('delay-spread-ms', 0);
const endpoint = `${args.url.replace(/\/$/, '')}/api/v1/tasks/batch`;

const delay = (k) => (N === 1 ? DELAY_MS : DELAY_MS + Math.round((SPREAD_MS * k) / (N - 1)));

async function post(tasks) {
  const r = await fetch(endpoint, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ tasks }),
  });
  const text = await r.text();
  if (r.status !== 201) throw new Error(`POST ${endpoint}: ${r.status} ${text.slice(0, 500)}`);
  // The answer carries every task; decode it, as a client reading its task ids would.
  return JSON.parse(text).tasks.length;
}

const firstSubmitMs = Date.now();
const t0 = performance.now();
for (let i = 0; i < N; i += B) {
  const tasks = [];
  for (let k = i; k < Math.min(N, i + B); k++) {
    const t = { queue: args.queue, type: 'echo', payload: { i: k } };
    if (P > 1) t.priority = k % P;
    if (args.delay) t.delay_ms = delay(k);
    tasks.push(t);
  }
  const n = await post(tasks);
  if (n !== tasks.length) throw new Error(`answer has ${n} tasks, sent ${tasks.length}`);
}
const submitS = (performance.now() - t0) / 1000;
const result = {
  engine: 'orq',
  role: 'producer',
  producer: 'http',
  tasks: N,
  first_submit_ms: firstSubmitMs,
  last_submit_ms: Date.now(),
  submit_s: submitS,
};
console.log(JSON.stringify(result));
if (args.json) writeFileSync(args.json, JSON.stringify(result, null, 2) + '\n');
