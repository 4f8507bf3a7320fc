// Goal: a page on another site cannot show orq's dashboard in a frame (issue 42: a cross-site page
// put a keyless orq's dashboard in a transparent frame, and two clicks paused a queue; the frame's
// requests are same-origin, so the cross-site write refusal does not see them), while every view
// of the dashboard loads and works under the Content-Security-Policy orq sends, with no
// violation reported. Method: one `orq serve` on the embedded store (no keys, loopback); a page
// served by this test from another origin (http://localhost:<other port>) that frames orq's
// overview, in real headless Chromium: the frame must end on the browser's error page, never on
// the dashboard. Then each view is opened with the fixture's listener for
// `securitypolicyviolation` events (a violation fails the page like a console error): its
// document carries the policy with its inline scripts' hashes, it shows its content, the event
// stream connects, a write from the page lands, and the links between views navigate; and a page
// revalidated with a 304 (which carries no policy) runs under the policy stored with it.

import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { CHROMIUM, newPage, startWorld, waitFor, waitTaskStatus, withPage, type World } from "./fixture";

interface TaskJson {
  id: string;
  status: string;
}
interface QueueJson {
  paused: boolean;
}

let world: World;
let other: Server;
let otherBase: string;

/** The framing page: orq's overview in a frame, as a clickjacking page would hold it. */
function framingPage(orq: string): string {
  return `<!doctype html><html><body><h1>a game</h1>
<iframe id="orq" src="${orq}/?queue=framed" style="width:1200px;height:800px;opacity:0.01"></iframe>
</body></html>`;
}

async function submit(body: Record<string, unknown>): Promise<TaskJson> {
  const r = await world.api<TaskJson>("/tasks", { method: "POST", body });
  assert.equal(r.status, 201, `submit: ${JSON.stringify(r.body)}`);
  return r.body;
}

describe("orq in a web page's frame, and the dashboard under its policy", { timeout: 10 * 60_000 }, () => {
  before(async () => {
    world = await startWorld();
    other = createServer((_, res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end(framingPage(world.base));
    });
    await new Promise<void>((r) => other.listen(0, "127.0.0.1", r));
    otherBase = `http://localhost:${(other.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((r) => (other ? other.close(() => r()) : r()));
    await world?.stop();
  });

  test("a page on another origin that frames the dashboard gets no dashboard", async () => {
    await submit({ queue: "framed", payload: 1 });
    const p = await newPage(world);
    try {
      await p.page.goto(otherBase);
      const frame = await waitFor("the frame to be attached", () => p.page.frames().find((f) => f !== p.page.mainFrame()));
      // Either the browser refuses the frame (its error page), or the dashboard renders its shell
      // and the queue's row in it: wait for whichever comes first, then it must be the refusal.
      const outcome = await waitFor("the frame to be refused or to show the dashboard", async () => {
        if (frame.url().startsWith("chrome-error:")) return "refused";
        const shown = await frame.locator('[data-testid="queue-row-framed"], [data-testid="live-mode"]').count().catch(() => 0);
        return shown > 0 ? "dashboard" : null;
      });
      assert.equal(outcome, "refused", `the frame showed the dashboard (${frame.url()})`);
      assert.equal(await frame.locator('[data-testid="live-mode"]').count(), 0, "no dashboard in the frame");
      // Nothing else went wrong on the page: at most the browser's word on the refusal.
      assert.deepEqual(
        p.errors.filter((e) => !/frame-ancestors|X-Frame-Options/i.test(e)),
        [],
        "no console errors but the framing refusal",
      );
      // Nothing the frame could have done happened: the queue is not paused.
      const q = await world.api<QueueJson>("/queues/framed");
      assert.equal(q.body.paused, false);
    } finally {
      await p.close();
    }
  });

  test("every view loads and works under the policy, with no violation", async () => {
    // Something to show in each view: a running task, a scheduled one, a finished one, a dead
    // one, and a timeline.
    const running = await submit({ queue: "csp", type: "sleep", payload: { ms: 120_000 } });
    await submit({ queue: "csp", payload: { later: true }, delay_ms: 3_600_000 });
    const done = await submit({ queue: "csp", payload: { hello: "world" } });
    const dead = await submit({ queue: "csp", type: "fail", payload: { times: 1 }, max_retries: 0 });
    await waitTaskStatus(world, running.id, "leased");
    await waitTaskStatus(world, done.id, "completed");
    await waitTaskStatus(world, dead.id, "dead");
    copyFileSync(join(__dirname, "..", "fixtures", "small.jsonl"), join(world.timelinesDir, "small.jsonl"));
    const views: Array<[string, string]> = [
      ["/?queue=csp", '[data-testid="queue-row-csp"]'],
      ["/tenants/?queue=csp", '[data-testid="tenant-row-default"]'],
      ["/tasks/?queue=csp", `[data-testid="task-row-${done.id}"]`],
      [`/task/?id=${done.id}&queue=csp`, '[data-testid="task-history"]'],
      ["/scheduled/?queue=csp", '[data-testid="card-scheduled"] [data-testid^="task-row-"]'],
      ["/workers/?queue=csp", `a[href*="${running.id}"]`],
      ["/dlq/?queue=csp", `[data-testid="dlq-row-${dead.id}"]`],
      ["/replay/?name=small.jsonl", '[data-testid="violation"]'],
      ["/no/such/page/", '[data-testid="not-found"]'],
    ];
    for (const [url, ready] of views) {
      await withPage(
        world,
        async ({ page }) => {
          const resp = await page.goto(url);
          assert.ok(resp, url);
          const csp = resp.headers()["content-security-policy"] ?? "";
          assert.match(csp, /(^|; )frame-ancestors 'none'(;|$)/, `${url}: ${csp}`);
          // Its inline scripts are allowed by their hashes, not by 'unsafe-inline'.
          assert.match(csp, /; script-src 'self'( 'sha256-[A-Za-z0-9+/=]+')+/, `${url}: ${csp}`);
          assert.doesNotMatch(csp, /unsafe/, url);
          assert.equal(resp.headers()["x-frame-options"], "DENY", url);
          await page.locator(ready).first().waitFor();
          // Hydrated and connected: the event stream is live (connect-src 'self').
          await waitFor(`${url}: the event stream live`, async () => ((await page.getByTestId("live-mode").textContent()) ?? "").includes("Live"));
        },
        // The missing page's own 404 is expected in the console.
        { allowed: /status of 404/ },
      );
    }

    // It works: an update arrives over the event stream, a write from the page lands, and the
    // links between views navigate (fetching the pages' payloads), all under the policy.
    await withPage(world, async ({ page }) => {
      await page.goto("/?queue=csp");
      await page.getByTestId("queue-row-csp").waitFor();
      const before = Number(await page.getByTestId("count-csp-completed").textContent());
      await submit({ queue: "csp", payload: 2 });
      await waitFor("the new completion shown", async () => Number(await page.getByTestId("count-csp-completed").textContent()) === before + 1);
      await page.getByTestId("pause-csp").click();
      await page.getByRole("dialog").getByRole("button", { name: "Pause leasing" }).click();
      await page.getByTestId("paused-csp").waitFor();
      assert.equal((await world.api<QueueJson>("/queues/csp")).body.paused, true);
      await page.getByTestId("resume-csp").click();
      await page.getByTestId("paused-csp").waitFor({ state: "detached" });
      for (const [link, ready] of [
        ["Tasks", `[data-testid="task-row-${done.id}"]`],
        ["Dead letters", `[data-testid="dlq-row-${dead.id}"]`],
        ["Replay", '[data-testid="timeline-small.jsonl"]'],
        ["Overview", '[data-testid="queue-row-csp"]'],
      ] as const) {
        await page.getByRole("link", { name: link, exact: true }).click();
        await page.locator(ready).first().waitFor();
      }
    });
  });

  test("a page revalidated with a 304 keeps its policy and runs", async () => {
    // orq's 304 carries no policy (it has no body to hash): the browser must keep the one it
    // stored with the page, hashes included, or the page's inline scripts would be blocked at
    // its next load. The fixture's browser drops its cache at once (playwright's
    // --aggressive-cache-discard), so this one keeps it, as a user's does.
    await submit({ queue: "revalidated", payload: 1 });
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
      ignoreDefaultArgs: ["--aggressive-cache-discard"],
    });
    try {
      const p = await newPage({ ...world, browser });
      const cdp = await p.context.newCDPSession(p.page);
      await cdp.send("Network.enable");
      const documents: string[] = [];
      const revalidated = new Set<string>();
      cdp.on("Network.responseReceived", (e) => {
        if (e.type === "Document") documents.push(e.requestId);
      });
      cdp.on("Network.responseReceivedExtraInfo", (e) => {
        if (e.statusCode === 304) revalidated.add(e.requestId);
      });
      const live = () => waitFor("the event stream live", async () => ((await p.page.getByTestId("live-mode").textContent()) ?? "").includes("Live"));
      await p.page.goto("/?queue=revalidated");
      await p.page.getByTestId("queue-row-revalidated").waitFor();
      await live();
      await p.page.reload();
      // The page runs again, or the browser says why not (a violation) first.
      const row = p.page.getByTestId("queue-row-revalidated");
      await waitFor("the page after the reload", async () => p.errors.length > 0 || (await row.count()) > 0);
      assert.deepEqual(p.errors, [], "no violation, no console error after the reload");
      await live();
      assert.deepEqual(documents.map((d) => revalidated.has(d)), [false, true], "the reload was answered 304");
    } finally {
      await browser.close();
    }
  });
});
