// Goal: a web page on another site cannot make a visitor's browser write to an orq without API
// keys (every request acts as an admin there): a form post and no-cors fetches, which a browser
// sends without asking anyone, are refused and change nothing, while the dashboard's own writes
// still work. Method: one `orq serve` on the embedded store (no keys, loopback); a page served
// by this test from another origin (http://localhost:<other port>) that posts a task through a
// text/plain form, then a task, a queue pause and a DLQ replay through no-cors fetches, in real
// headless Chromium; the API then shows no task and no pause. The dashboard pauses and resumes a
// queue from its own origin.

import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";
import { newPage, startWorld, waitFor, type World } from "./fixture";

interface QueueJson {
  queue: string;
  paused: boolean;
  counts: Record<string, number>;
}

let world: World;
let other: Server;
let otherBase: string;

/** The attacking page: every write a page may make a browser send without a CORS preflight. */
function attackPage(orq: string): string {
  const task = (queue: string) => JSON.stringify({ queue, payload: { note: "" } });
  // A text/plain form sends `name=value`: the name holds the JSON up to a string the value
  // closes, so the body is {"queue":"csrf-form","payload":{"note":"="}}, a valid echo task.
  const formTask = task("csrf-form").slice(0, -3);
  return `<!doctype html><html><body>
<form id="f" method="POST" action="${orq}/api/v1/tasks" enctype="text/plain">
<input type="hidden" name='${formTask}' value='"}}'></form>
<script>
const orq = ${JSON.stringify(orq)};
const sent = [
  fetch(orq + "/api/v1/tasks", { method: "POST", mode: "no-cors", headers: { "content-type": "text/plain" }, body: ${JSON.stringify(task("csrf-fetch"))} }),
  fetch(orq + "/api/v1/queues/csrf-victim/pause", { method: "POST", mode: "no-cors" }),
  fetch(orq + "/api/v1/dlq/replay", { method: "POST", mode: "no-cors" }),
];
Promise.allSettled(sent).then(() => document.getElementById("f").submit());
</script></body></html>`;
}

describe("a page on another site", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    world = await startWorld();
    other = createServer((_, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(attackPage(world.base));
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    otherBase = `http://localhost:${(other.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
    await world?.stop();
  });

  test("cannot make the browser write to orq, while the dashboard's own writes work", async () => {
    // A queue to pause, with a task in it.
    const r = await world.api("/tasks", { method: "POST", body: { queue: "csrf-victim", payload: 1, delay_ms: 600_000 } });
    assert.equal(r.status, 201, JSON.stringify(r.body));
    const p = await newPage(world);
    try {
      const page = p.page;
      await page.goto(otherBase);
      // The form's post navigates to orq's answer: a 403 naming why.
      await page.waitForURL(`${world.base}/api/v1/tasks`);
      const answer = JSON.parse((await page.locator("body").textContent()) ?? "{}");
      assert.equal(answer.error?.code, "forbidden", JSON.stringify(answer));
      assert.match(answer.error.message, /^cross-site request refused \(Sec-Fetch-Site: cross-site\)/);
      // Nothing changed: no task in either queue, the victim queue not paused.
      const queues = await world.api<{ queues: QueueJson[] }>("/queues");
      const names = queues.body.queues.map((q) => q.queue);
      assert.ok(!names.includes("csrf-form") && !names.includes("csrf-fetch"), `no attacker's queue: ${names}`);
      const victim = await world.api<QueueJson>("/queues/csrf-victim");
      assert.equal(victim.body.paused, false, "the queue was not paused");

      // The dashboard's own write (same origin) still works: pause the queue from its page.
      await page.goto("/?queue=csrf-victim");
      await page.getByTestId("pause-csrf-victim").click();
      await page.getByRole("dialog").getByRole("button", { name: "Pause leasing" }).click();
      await page.getByTestId("paused-csrf-victim").waitFor();
      assert.equal((await world.api<QueueJson>("/queues/csrf-victim")).body.paused, true);
      await page.getByTestId("resume-csrf-victim").click();
      await page.getByTestId("paused-csrf-victim").waitFor({ state: "detached" });
      await waitFor("the queue resumed", async () => !(await world.api<QueueJson>("/queues/csrf-victim")).body.paused);
    } finally {
      await p.close();
    }
  });
});
