/**
 * A report refused while a heartbeat of the same lease is out: the worker must not give the
 * outcome up at its own estimate of the deadline while that heartbeat may still answer that the
 * lease lives on (the simulator's pull worker found this, seeds 729 and 1574). A local server
 * plays orq: it leases one task with a short lease, refuses `complete` with 503 until a held-back
 * heartbeat has answered, and counts what arrives.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, test } from "node:test";
import { Worker, type Logger } from "../src/index.js";

const servers: { close: () => void }[] = [];
after(() => {
  for (const s of servers) s.close();
});

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { "content-type": "application/json", "retry-after": "0" });
  res.end(JSON.stringify(body));
}

const ID = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
const LEASE_MS = 600;
const task = {
  id: ID,
  queue: "q",
  tenant: "default",
  type: "t",
  payload: {},
  priority: 0,
  attempt: 1,
  max_retries: 3,
  epoch: 1,
  token: "1-00ff",
  lease_expires_at: Date.now() + LEASE_MS,
  lease_ms: LEASE_MS,
  heartbeat_ms: 150,
  timeout_ms: null,
  created_at: Date.now(),
};

test("a refused complete waits for the heartbeat in flight and is delivered when it says the lease lives", async () => {
  let leased = false;
  let beatAnswered = false;
  const seen = { refused: 0, applied: 0 };
  const held: ServerResponse[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    req.on("end", () => {
      const path = req.url ?? "";
      if (path === "/api/v1/leases") {
        if (leased) return void setTimeout(() => json(res, 200, { tasks: [] }), 100);
        leased = true;
        return json(res, 200, { tasks: [task] });
      }
      if (path.endsWith("/heartbeat")) {
        // The first heartbeat answers only once the worker's estimate of the deadline has passed.
        if (held.length === 0 && !beatAnswered) {
          held.push(res);
          setTimeout(() => {
            beatAnswered = true;
            json(res, 200, { lease_expires_at: Date.now() + 5_000, lease_left_ms: 5_000 });
          }, LEASE_MS + 600);
          return;
        }
        return json(res, 200, { lease_expires_at: Date.now() + 5_000, lease_left_ms: 5_000 });
      }
      if (path.endsWith("/complete")) {
        if (!beatAnswered) {
          seen.refused += 1;
          return json(res, 503, { error: { code: "store_unavailable", message: "BUSY" } });
        }
        seen.applied += 1;
        return json(res, 200, { id: ID, reported: "applied" });
      }
      json(res, 404, { error: { code: "not_found", message: path } });
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push({ close: () => server.close() && server.closeAllConnections() });
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  // A heartbeat's own time limit (half the time left) would cut the held one short; here it
  // stands for a heartbeat that answers late all the same (a slow network, a clock off).
  const lateBeats: typeof fetch = (input, init) =>
    String(input).endsWith("/heartbeat") ? fetch(input, { ...init, signal: undefined }) : fetch(input, init);
  const worker = new Worker({ url, queues: ["q"], waitMs: 100, handleSignals: false, logger: quiet, fetch: lateBeats });
  // The handler returns after the first heartbeat went out (at 150 ms), so the report starts
  // while it is held.
  worker.handle("t", async () => {
    await new Promise((r) => setTimeout(r, 250));
    return { ok: true };
  });
  const running = worker.run();
  const deadline = Date.now() + 20_000;
  while (seen.applied === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  await worker.stop();
  await running;
  assert.ok(seen.refused > 0, "the complete was refused while the heartbeat was held");
  assert.equal(seen.applied, 1, "the complete was sent again after the heartbeat answered, and applied");
});
