// Goal: the problems a new user reported stay fixed: the queue the dashboard opens on exists and
// the key may use it; admin-only routes refused to a tenant key say "needs an admin key" in place
// and their controls are disabled; the DLQ heading counts what the filter matches; the submit form
// clears stale errors and lists every id of a batch; the replay view's workers table stays in view
// beside a task's story and its fault markers are labelled; both overview charts share one time
// axis. Method: one `orq serve` with an admin key and a tenant key (acme, queues emails and
// reports), headless Chromium with the key put in session storage before the page loads.

import assert from "node:assert/strict";
import { copyFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { orqHasKeys, screenshot, startWorld, waitFor, waitTaskStatus, waitText, withPage, type TestPage, type World } from "./fixture";

interface TaskJson {
  id: string;
  status: string;
  queue: string;
}

let world: World;

/** A fresh page whose tab holds `key`; fails on console errors other than the expected ones. */
function withKey(key: string, body: (p: TestPage) => Promise<void>, allowed: RegExp | null = null): Promise<void> {
  return withPage(world, body, { allowed, key });
}

async function submit(body: Record<string, unknown>): Promise<TaskJson> {
  const r = await world.api<TaskJson>("/tasks", { method: "POST", body });
  assert.equal(r.status, 201, `submit: ${JSON.stringify(r.body)}`);
  return r.body;
}

describe("reported dashboard problems", { timeout: 10 * 60_000, skip: !orqHasKeys() && "this orq cannot make API keys" }, () => {
  before(async () => {
    world = await startWorld({ auth: true, tenantKey: { tenant: "acme", queues: ["emails", "reports"] } });
    const done = await submit({ queue: "emails", tenant: "acme", payload: { n: 1 } });
    await waitTaskStatus(world, done.id, "completed");
  });
  after(async () => {
    await world?.stop();
  });

  test("a tenant key opens on a queue it may use; admin-only views and controls say they need an admin key", async () => {
    // The browser logs the 403s of the admin-only routes as failed loads: expected here.
    await withKey(
      world.tenantKey!,
      async ({ page }) => {
        await page.goto("/");
        await page.getByTestId("queue-row-emails").waitFor();
        assert.equal(await page.getByLabel("Queue", { exact: true }).inputValue(), "emails", "the first allowed queue is selected");
        // The metrics route is admin-only: both charts explain it instead of an error.
        await page.locator('[data-testid="card-throughput"] [data-testid="needs-admin"]').waitFor();
        await page.locator('[data-testid="card-latency"] [data-testid="needs-admin"]').waitFor();
        assert.equal(await page.locator(".state-error").count(), 0, "no error box");
        // Totals are not shown to a tenant key: "—", not 0.
        assert.equal(((await page.getByTestId("total-emails-enqueued").textContent()) ?? "").trim(), "—");
        assert.equal(((await page.getByTestId("total-emails-failed").textContent()) ?? "").trim(), "—");
        // Pause / resume is replaced by the explanation.
        await page.getByTestId("pause-needs-admin-emails").waitFor();
        assert.equal(await page.getByTestId("pause-emails").count(), 0);
        await screenshot(page, "tenant-overview");

        await page.goto("/tasks/");
        await page.locator('[data-testid^="task-row-"]').first().waitFor();
        assert.equal(await page.getByText("may not use queue default").count(), 0);

        await page.goto("/workers/");
        await page.getByTestId("needs-admin").waitFor();
        assert.equal(await page.getByText(/No worker has leased/).count(), 0, "not an empty state");

        await page.goto("/tenants/");
        await page.getByTestId("tenant-row-acme").waitFor();
        await page.getByTestId("edit-tenant-acme").click();
        const form = page.locator('form[aria-label="Tenant limits"]');
        await form.locator('input[name="weight"]').fill("3");
        await page.getByTestId("save-tenant").click();
        await waitText(page, '[role="alert"]', (t) => /needs an admin key/.test(t), "the limits form's explanation");
        await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
        // After that 403 the controls are disabled, with the reason.
        await page.getByTestId("limits-need-admin").waitFor();
        assert.ok(await page.getByTestId("edit-tenant-acme").isDisabled(), "Edit limits disabled");
        assert.ok(await page.getByRole("button", { name: "Configure a tenant…" }).isDisabled(), "Configure disabled");
        await screenshot(page, "tenant-tenants");
      },
      /status of 403/,
    );
  });

  test("an admin whose remembered queue does not exist opens on a listed queue; a submit to a new queue lists it", async () => {
    await withKey(world.key!, async ({ page }) => {
      await page.addInitScript(() => window.localStorage.setItem("orq.queue", "default"));
      await page.goto("/");
      await page.getByTestId("queue-row-emails").waitFor();
      const picker = page.getByLabel("Queue", { exact: true });
      await waitFor("a listed queue selected", async () => (await picker.inputValue()) !== "default");
      assert.equal(await page.getByText("Queue default has no tasks yet.").count(), 0);

      await page.goto("/tasks/");
      const form = page.locator('form[aria-label="Submit a task"]');
      await form.locator('input[name="queue"]').fill("brandnew");
      await page.getByTestId("submit-task").click();
      await page.getByTestId("submitted").waitFor();
      await waitFor("the new queue in the picker", async () => (await picker.locator('option[value="brandnew"]').count()) === 1);
    });
  });

  test("the submit form clears a stale error and lists every id of a batch", async () => {
    await withKey(world.key!, async ({ page }) => {
      await page.goto("/tasks/?queue=batchq");
      const form = page.locator('form[aria-label="Submit a task"]');
      await form.locator('textarea[name="payload"]').fill("{not json");
      await page.getByTestId("submit-task").click();
      await waitText(page, 'form[aria-label="Submit a task"] [role="alert"]', (t) => /payload: not JSON/.test(t), "the payload error");
      // Fixing the payload clears it, even if the browser then blocks the submit on another field.
      await form.locator('textarea[name="payload"]').fill('{"ok": true}');
      await waitFor("the stale error gone", async () => (await form.locator('[role="alert"]').count()) === 0);
      await form.locator('input[name="count"]').fill("5");
      await page.getByTestId("submit-task").click();
      await page.getByTestId("submitted").waitFor();
      assert.equal(await page.getByTestId("submitted").getAttribute("data-count"), "5");
      assert.equal(await page.getByTestId("submitted-id").count(), 5, "five ids");
      const listed = await world.api<{ tasks: TaskJson[] }>("/tasks?queue=batchq&limit=50");
      const ids = new Set(listed.body.tasks.map((t) => t.id));
      for (const a of await page.getByTestId("submitted-id").allTextContents()) assert.ok(ids.has(a.trim()), `${a} submitted`);
    });
  });

  test("the dead-letter heading counts the tasks matching the filter", async () => {
    const dead = await Promise.all(
      ["a", "a", "b"].map((tenant) => submit({ queue: "dq", tenant, type: "fail", payload: { times: 1 }, max_retries: 0 })),
    );
    for (const d of dead) await waitTaskStatus(world, d.id, "dead");
    await withKey(world.key!, async ({ page }) => {
      await page.goto("/dlq/?queue=dq");
      await waitText(page, '[data-testid="dlq-count"]', (t) => t === "(3)", "the unfiltered count");
      await page.getByLabel("Tenant filter").fill("a");
      await page.getByRole("button", { name: "Apply" }).click();
      await waitText(page, '[data-testid="dlq-count"]', (t) => t === "(2 matching of 3)", "the filtered count");
    });
  });

  test("throughput and latency charts share one time axis", async () => {
    await withKey(world.key!, async ({ page }) => {
      await page.goto("/?queue=emails");
      const thr = page.getByTestId("chart-throughput");
      const lat = page.getByTestId("chart-latency");
      await thr.waitFor();
      await lat.waitFor();
      const a = await thr.getAttribute("data-ticks");
      assert.ok(a, "ticks given");
      assert.equal(await lat.getAttribute("data-ticks"), a, "the same ticks");
      const labels = async (chart: typeof thr) =>
        chart.locator(".recharts-xAxis-tick-labels .recharts-cartesian-axis-tick-value").allTextContents();
      await waitFor("tick labels", async () => (await labels(thr)).length > 0);
      assert.deepEqual(await labels(lat), await labels(thr), "the same tick labels");
    });
  });

  test("the replay view keeps the workers table in view beside a task's story; markers are labelled", async () => {
    copyFileSync(join(__dirname, "..", "fixtures", "small.jsonl"), join(world.timelinesDir, "small.jsonl"));
    await withKey(world.key!, async ({ page }) => {
      await page.goto("/replay/?name=small.jsonl");
      await page.getByTestId("card-board").waitFor();
      await page.locator('[data-testid="card-board"] .task-card').first().click();
      await page.getByTestId("task-story").waitFor();
      const card = (await page.getByTestId("card-workers").boundingBox())!;
      for (const name of ["Crashes", "Stalls"]) {
        const th = (await page.locator('[data-testid="card-workers"] th', { hasText: name }).boundingBox())!;
        assert.ok(th.x + th.width <= card.x + card.width + 1, `${name} inside the workers card`);
        assert.ok(th.x + th.width <= 1440, `${name} inside the viewport`);
      }
      const story = (await page.getByTestId("card-story").boundingBox())!;
      assert.ok(story.x + story.width <= 1441, "the story card inside the viewport");
      const labels = await page.getByTestId("marker").evaluateAll((els) => els.map((e) => [e.getAttribute("data-kind"), e.getAttribute("aria-label")]));
      assert.ok(labels.length > 0, "markers");
      for (const [kind, label] of labels) {
        assert.ok(label && label.includes(kind!) && / at /.test(label), `marker label: ${label}`);
      }
      await screenshot(page, "replay-story");
    });
  });
});
