/**
 * A worker process for the crash tests (not a test file): runs a Worker of ORQ_QUEUE against
 * ORQ_URL with SIGTERM/SIGINT handling on, and writes marker files into ORQ_MARKER_DIR.
 * Handlers: `hang` writes `<id>.started` (holding the attempt) and waits until aborted;
 * `finish-on-go` writes `<id>.started`, waits for the file `go`, then returns.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Worker } from "../src/index.js";

const url = process.env.ORQ_URL!;
const queue = process.env.ORQ_QUEUE!;
const dir = process.env.ORQ_MARKER_DIR!;

const worker = new Worker({ url, queues: [queue], concurrency: 1, workerId: `child-${process.pid}`, shutdownGraceMs: 60_000, unknownQueuePauseMs: 200 });

worker.handle("hang", async (job) => {
  writeFileSync(join(dir, `${job.id}.started`), String(job.attempt));
  await new Promise((resolve) => job.signal.addEventListener("abort", resolve, { once: true }));
  throw new Error(`aborted: ${String(job.signal.reason)}`);
});

worker.handle("finish-on-go", async (job) => {
  writeFileSync(join(dir, `${job.id}.started`), String(job.attempt));
  while (!existsSync(join(dir, "go"))) await new Promise((r) => setTimeout(r, 50));
  return { finishedBy: process.pid };
});

await worker.run();
process.stdout.write("worker-child: run() resolved\n");
