// Measures the overview's page-load time with many tasks in the store (not part of CI: it takes
// minutes). Starts `orq serve` on the embedded store like the browser tests, pauses the queue
// `measure` (so the tasks stay in the store as queued), submits MEASURE_TASKS tasks (default
// 100,000) in batches of 1,000, then times, in a fresh browser context each run, the navigation
// to `/` until the queue's queued count shows the full number; and the /api/v1/queues call alone.
//
//   npm run measure                 # after `cargo build --bin orq --bin orq-sim` and `npm run build`
//   MEASURE_TASKS=20000 npm run measure
//   ORQ_BIN=../target/release/orq npm run measure

import { newPage, startWorld } from "../tests/browser/fixture";

const TASKS = Number(process.env.MEASURE_TASKS ?? 100_000);
const BATCH = 1000;
const RUNS = 5;
/** Batch submits in flight at once. */
const PARALLEL = 2;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
}

async function main() {
  const world = await startWorld();
  try {
    const paused = await world.api("/queues/measure/pause", { method: "POST" });
    if (paused.status !== 200) throw new Error(`pause: ${paused.status} ${JSON.stringify(paused.body)}`);
    const t0 = Date.now();
    let sent = 0;
    const worker = async () => {
      while (sent < TASKS) {
        const n = Math.min(BATCH, TASKS - sent);
        sent += n;
        const tasks = Array.from({ length: n }, (_, i) => ({ queue: "measure", tenant: `t${i % 10}`, payload: { i } }));
        const r = await world.api("/tasks/batch", { method: "POST", body: { tasks } });
        if (r.status !== 201) throw new Error(`batch: ${r.status} ${JSON.stringify(r.body).slice(0, 300)}`);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const submit_s = (Date.now() - t0) / 1000;
    const stats = await world.api<{ counts: { queued: number } }>("/queues/measure");
    console.log(`submitted ${TASKS} tasks in ${submit_s.toFixed(1)} s (${Math.round(TASKS / submit_s)}/s); queued now: ${stats.body.counts.queued}`);
    const want = TASKS.toLocaleString("en-US");
    const api_ms: number[] = [];
    const load_ms: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const a = performance.now();
      await world.api("/queues");
      api_ms.push(performance.now() - a);
      const p = await newPage(world);
      try {
        const start = performance.now();
        await p.page.goto("/");
        // Checked on every animation frame in the page, so the time is not rounded up to a poll.
        await p.page.waitForFunction(
          (w) => document.querySelector('[data-testid="count-measure-queued"]')?.textContent?.trim() === w,
          want,
          { polling: "raf", timeout: 120_000 },
        );
        load_ms.push(performance.now() - start);
      } finally {
        await p.close();
      }
    }
    console.log(`GET /api/v1/queues: median ${median(api_ms).toFixed(0)} ms (runs: ${api_ms.map((x) => x.toFixed(0)).join(", ")})`);
    console.log(
      `overview page load until the counts render, ${TASKS} tasks in the store: median ${median(load_ms).toFixed(0)} ms (runs: ${load_ms
        .map((x) => x.toFixed(0))
        .join(", ")})`,
    );
  } finally {
    await world.stop();
  }
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
