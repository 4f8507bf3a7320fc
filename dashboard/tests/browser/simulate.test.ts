// Goal: an admin runs a simulation from the Replay view and watches it (issue 25, item 7): the
// seed, fault mix and planted bug chosen in the form reach the server's orq-sim, the streamed
// timeline opens in the player (at the violation when there is one), with its verdict, its
// reproduce command and a download; bad values are explained next to the form; the view waits
// for a simulator being built or busy with another run, Stop stops, a tenant key is told it
// needs an admin key, and a run the server stopped shows its reason. Method: one `orq serve`
// (the debug orq-sim sits beside it); real runs through the UI, compared with `orq-sim run` of
// the same seed; the states a test server cannot be put in on demand (building, not available,
// busy, a run held open, a run stopped by the server, a tenant key) are answers substituted with
// Playwright's routing, around the real API. Every test fails on a console error other than the
// HTTP statuses it provokes.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import type { Page, Route } from "playwright-core";
import { screenshot, SIM_BIN, startWorld, waitFor, waitText, withPage as withPageOf, type TestPage, type World } from "./fixture";

interface SimulatorJson {
  available: boolean;
  building: boolean;
  reason: string | null;
  running: boolean;
  families: string[];
  planted: string[];
  limits: { seed_max: number; tasks_max: number; timeout_ms: number; memory_bytes: number };
}

let world: World;
let info: SimulatorJson;

/** Run a test body with a fresh page; fails on console errors other than `allowed` ones. */
function withPage(body: (p: TestPage) => Promise<void>, allowed: RegExp | null = null): Promise<void> {
  return withPageOf(world, body, { allowed });
}

const form = (page: Page) => page.locator('form[aria-label="Run a simulation"]');

/** The lines of the timeline behind the download link, parsed. */
async function downloaded(page: Page, seed: number): Promise<Array<Record<string, unknown>>> {
  const link = page.getByTestId("sim-download");
  assert.equal(await link.getAttribute("download"), `seed-${seed}.jsonl`);
  const href = (await link.getAttribute("href")) ?? "";
  assert.match(href, /^blob:/);
  // As a user gets it: a click and the file the browser saves (orq's Content-Security-Policy lets
  // a page connect to orq only, so a fetch of the blob from the page is refused).
  const [file] = await Promise.all([page.waitForEvent("download"), link.click()]);
  assert.equal(file.suggestedFilename(), `seed-${seed}.jsonl`);
  const text = readFileSync(await file.path(), "utf8");
  return text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Answer GET /simulations with `patch` applied to the server's own answer; POSTs go through. */
async function patchInfo(page: Page, patch: (j: SimulatorJson) => SimulatorJson): Promise<void> {
  await page.route("**/api/v1/simulations", async (route: Route) => {
    if (route.request().method() !== "GET") return route.fallback();
    const res = await route.fetch();
    await route.fulfill({ status: res.status(), json: patch((await res.json()) as SimulatorJson) });
  });
}

describe("running a simulation from the Replay view", { timeout: 15 * 60_000 }, () => {
  before(async () => {
    world = await startWorld();
    const r = await world.api<SimulatorJson>("/simulations");
    assert.equal(r.status, 200, `GET /simulations: ${JSON.stringify(r.body)}`);
    assert.ok(r.body.available, `the simulator is available beside orq: ${r.body.reason}`);
    info = r.body;
  });
  after(async () => {
    await world?.stop();
  });

  test("a planted bug run from the view opens at its violation, with the board, and is the seed's own run", async () => {
    // The first seed in 1..50 on which the planted bug shows (orq-sim exits 1, a safety
    // violation), so that a change to the engine's schedules does not break the test.
    const scratch = mkdtempSync(join(tmpdir(), "orq-sim-planted-"));
    let seed = 0;
    let cli: Array<Record<string, unknown>> = [];
    try {
      for (let s = 1; s <= 50 && seed === 0; s++) {
        const file = join(scratch, `seed-${s}.jsonl`);
        const r = spawnSync(SIM_BIN, ["run", "--seed", String(s), "--planted", "complete_ignores_token", "--timeline", file], {
          encoding: "utf8",
          timeout: 300_000,
        });
        if (r.status === 1) {
          seed = s;
          cli = readFileSync(file, "utf8").trim().split("\n").map((l) => JSON.parse(l) as Record<string, unknown>);
        }
      }
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    assert.ok(seed > 0, "a seed in 1..50 on which complete_ignores_token shows");
    const violation = cli.find((l) => l.kind === "violation") as { details: { message: string } } | undefined;
    assert.ok(violation, "the simulator's own run has a violation line");

    await withPage(async ({ page }) => {
      await page.goto("/replay/");
      const f = form(page);
      await f.locator('input[name="seed"]').fill(String(seed));
      await f.locator('select[name="planted"]').selectOption("complete_ignores_token");
      assert.ok(await page.getByTestId("sim-mix-seed").isChecked(), "the seed's own fault mix by default");
      await page.getByTestId("sim-run").click();
      // The player opens on the run, at the violation, with the board.
      await page.getByTestId("violation").waitFor();
      await page.getByTestId("card-board").waitFor();
      assert.equal(await page.getByTestId("timeline-seed").textContent(), String(seed));
      assert.equal(await page.getByTestId("violation-message").locator("b").textContent(), violation!.details.message);
      assert.equal(await page.getByTestId("replay-command").textContent(), `cargo run -p orq-sim -- run --seed ${seed} --planted complete_ignores_token`);
      const marker = page.locator('[data-testid="marker"][data-kind="violation"]');
      assert.equal(await marker.count(), 1, "the violation on the time axis");
      assert.equal(
        await page.getByTestId("scrubber").inputValue(),
        await marker.getAttribute("data-t"),
        "the player starts at the violation",
      );
      assert.equal(await page.getByTestId("sim-verdict").textContent(), "Safety");
      assert.match((await page.getByTestId("sim-verdict").getAttribute("title")) ?? "", /^Safety\(/);
      await page.getByRole("heading", { name: `Open another timeline (now: seed-${seed}.jsonl)` }).waitFor();
      // The server's run is the seed's run: the same timeline as orq-sim run writes.
      assert.deepEqual(await downloaded(page, seed), cli);
      await screenshot(page, "replay-simulation-violation");
    });
  });

  test("a run with only the crash family passes, and its header and reproduce command say so", async () => {
    await withPage(async ({ page }) => {
      await page.goto("/replay/");
      const f = form(page);
      await f.locator('input[name="seed"]').fill("1");
      // Ticking a family chooses the families: the seed's own mix no longer applies.
      await page.getByTestId("sim-family-crash").check();
      assert.ok(await page.getByTestId("sim-mix-chosen").isChecked());
      await page.getByTestId("sim-run").click();
      await page.getByTestId("verdict-pass").waitFor();
      assert.equal(await page.getByTestId("sim-verdict").textContent(), "Pass");
      assert.equal(await page.getByTestId("fact-fault-families").textContent(), "fault families: crash");
      // The card and the summary count the same events.
      const counted = await page.getByTestId("verdict-pass").locator("span.muted", { hasText: " events" }).textContent();
      const events = /^(\d+) events/.exec(counted ?? "")?.[1];
      assert.ok(events, "the summary's event count");
      assert.match((await page.getByTestId("sim-result").textContent()) ?? "", new RegExp(`Pass${events} events`));
      assert.match((await page.getByTestId("replay-command").textContent()) ?? "", /--seed 1 .*--faults crash/);
      const lines = await downloaded(page, 1);
      const header = lines[0] as { kind: string; config: { faults: { families: string[] } } };
      assert.equal(header.kind, "header");
      assert.deepEqual(header.config.faults.families, ["crash"]);
      assert.equal(lines.at(-1)?.kind, "end");
      // Run is enabled again for the next run.
      await waitFor("Run enabled again", () => page.getByTestId("sim-run").isEnabled());
      await screenshot(page, "replay-simulation-pass");
    });
  });

  test("bad values are explained next to the form: the browser's check before sending, the server's 422 after", async () => {
    const over = info.limits.tasks_max + 1;
    const refused = await world.api<{ error: { code: string; message: string } }>("/simulations", {
      method: "POST",
      body: { seed: 1, tasks: over },
    });
    assert.equal(refused.status, 422);
    await withPage(async ({ page }) => {
      const posts: string[] = [];
      page.on("request", (r) => {
        if (r.method() === "POST" && r.url().endsWith("/api/v1/simulations")) posts.push(r.url());
      });
      await page.goto("/replay/");
      const f = form(page);
      await f.locator('input[name="tasks"]').fill("0");
      await page.getByTestId("sim-run").click();
      await waitText(page, '[data-testid="sim-form-error"]', (t) => t === `tasks: a whole number from 1 to ${info.limits.tasks_max}, or empty for the seed's own`, "the browser's check");
      await f.locator('input[name="seed"]').fill("9007199254740992");
      await f.locator('input[name="tasks"]').fill("");
      await page.getByTestId("sim-run").click();
      await waitText(page, '[data-testid="sim-form-error"]', (t) => t.startsWith("seed: a whole number from 0 to 9007199254740991"), "a seed past 2^53 - 1");
      assert.deepEqual(posts, [], "nothing sent");
      // A server whose limit is lower than the form believes: its 422 shows by the form.
      await patchInfo(page, (j) => ({ ...j, limits: { ...j.limits, tasks_max: j.limits.tasks_max * 10 } }));
      await page.reload();
      await f.locator('input[name="tasks"]').fill(String(over));
      await page.getByTestId("sim-run").click();
      await waitText(page, '[data-testid="sim-form-error"]', (t) => t === refused.body.error.message, "the server's 422 message");
      assert.equal(posts.length, 1);
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
      await screenshot(page, "replay-simulation-422");
    }, /status of 422/);
  });

  test("while the simulator is being built the view says so, waits, and runs when the server is ready", async () => {
    await withPage(async ({ page }) => {
      let building = true;
      let refusals = 0;
      let retryAfter = "1";
      await page.route("**/api/v1/simulations", async (route: Route) => {
        if (route.request().method() === "GET") {
          if (!building) return route.fallback();
          return route.fulfill({
            json: { ...info, available: false, building: true, buildable: false, reason: "building orq-sim from the source checkout", families: [], planted: [] },
          });
        }
        if (refusals > 0) {
          refusals -= 1;
          return route.fulfill({
            status: 503,
            headers: { "Retry-After": retryAfter },
            json: { error: { code: "unavailable", message: "the simulator is being built (first run only)" } },
          });
        }
        return route.fallback();
      });
      await page.goto("/replay/");
      await waitText(page, '[data-testid="sim-building"]', (t) => t.includes("Building the simulator (first run only)"), "the building state");
      assert.equal(await page.getByTestId("sim-run").isDisabled(), true, "Run waits for the build");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
      await screenshot(page, "replay-simulation-building");
      // The build ends: the view, asking every few seconds, enables Run.
      building = false;
      await waitFor("Run enabled once built", () => page.getByTestId("sim-run").isEnabled());
      await page.getByTestId("sim-building").waitFor({ state: "detached" });

      // A run refused with 503 and Retry-After waits that long, then goes: the timeline that
      // opens can only come from the second request.
      refusals = 1;
      await form(page).locator('input[name="seed"]').fill("3");
      await page.getByTestId("sim-run").click();
      await page.getByTestId("verdict-pass").or(page.getByTestId("violation")).waitFor();
      assert.equal(await page.getByTestId("timeline-seed").textContent(), "3");
      assert.equal(refusals, 0);

      // A long wait can be cancelled: no run is sent after it.
      refusals = 1;
      retryAfter = "600";
      let posts = 0;
      page.on("request", (r) => {
        if (r.method() === "POST" && r.url().endsWith("/api/v1/simulations")) posts += 1;
      });
      await page.getByTestId("sim-run").click();
      const waiting = await waitText(page, '[data-testid="sim-waiting"]', (t) => /Asking again in \d+ s/.test(t), "the long wait");
      assert.match(waiting, /^The simulator is not ready: the simulator is being built \(first run only\) \(HTTP 503\)\. Asking again in/);
      await page.getByTestId("sim-cancel-wait").click();
      await page.getByTestId("sim-waiting").waitFor({ state: "detached" });
      await waitFor("Run enabled after cancelling", () => page.getByTestId("sim-run").isEnabled());
      assert.equal(posts, 1, "only the refused run was sent");
    }, /status of 503/);
  });

  test("a run refused because another is in progress says so, and Run comes back when that one ends", async () => {
    // The other run is played by the test: while `busy`, the server's answers say a run holds it.
    await withPage(async ({ page }) => {
      let busy = false;
      const message = "a simulation is running, and one runs at a time: retry when it ends";
      await page.route("**/api/v1/simulations", async (route: Route) => {
        if (!busy) return route.fallback();
        if (route.request().method() === "GET") return route.fulfill({ json: { ...info, running: true } });
        return route.fulfill({ status: 409, json: { error: { code: "conflict", message } } });
      });
      await page.goto("/replay/");
      await page.getByTestId("sim-run").waitFor();
      busy = true;
      await page.getByTestId("sim-run").click();
      await waitText(page, '[data-testid="sim-busy"]', (t) => t.startsWith("A simulation is already running on this orq") && !t.includes(message), "the notice, once");
      assert.equal(await page.getByTestId("sim-run").isDisabled(), true, "Run waits for the other run");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
      busy = false;
      await page.getByTestId("sim-busy").waitFor({ state: "detached" });
      await waitFor("Run enabled again", () => page.getByTestId("sim-run").isEnabled());
      await page.getByTestId("sim-run").click();
      await page.getByTestId("verdict-pass").or(page.getByTestId("violation")).waitFor();
      assert.equal(await page.getByTestId("timeline-seed").textContent(), "42");
    }, /status of 409/);
  });

  test("Stop ends a run, and starts no other", async () => {
    // A run whose answer never comes (held by the test), so Stop finds it running whatever the
    // machine's speed. (Stop once started a second run: the button under the pointer became Run
    // before the browser acted on the click.)
    await withPage(async ({ page }) => {
      const held: Route[] = [];
      await page.route("**/api/v1/simulations", (route: Route) => {
        if (route.request().method() !== "POST") return route.fallback();
        held.push(route);
      });
      let posts = 0;
      page.on("request", (r) => {
        if (r.method() === "POST" && r.url().endsWith("/api/v1/simulations")) posts += 1;
      });
      await page.goto("/replay/");
      await page.getByTestId("sim-run").click();
      await page.getByTestId("sim-progress").waitFor();
      await waitFor("the run's request", () => held.length === 1);
      await page.getByTestId("sim-stop").click();
      await waitText(page, '[data-testid="sim-cut"]', (t) => t === "You stopped the run after 0 events. Nothing arrived to show.", "the stop");
      await waitFor("Run enabled again", () => page.getByTestId("sim-run").isEnabled());
      assert.equal(posts, 1, "one run sent");
      assert.equal(await page.getByTestId("sim-download").count(), 0, "nothing to download");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error");
      await held[0]!.abort().catch(() => {});
    });
  });

  test("a simulator that cannot run here is explained without an error box", async () => {
    const reason = "the simulator binary orq-sim was not found beside orq or on PATH; install it beside orq or start orq with --sim-binary PATH";
    await withPage(async ({ page }) => {
      await patchInfo(page, (j) => ({ ...j, available: false, building: false, buildable: false, reason, families: [], planted: [] }));
      await page.goto("/replay/");
      await waitText(page, '[data-testid="sim-unavailable"]', (t) => t.endsWith(reason), "the reason");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
      assert.equal(await page.getByTestId("sim-run").isEnabled(), false, "nothing to run, nothing to build");
      // Opening a timeline still works beside it.
      await page.getByTestId("timeline-file").setInputFiles(join(__dirname, "..", "fixtures", "small.jsonl"));
      await page.getByTestId("card-board").waitFor();
    });
  });

  test("a simulator this checkout can build says the first run builds it, and Run stays enabled", async () => {
    const reason = "the simulator (orq-sim) is not built yet; the first run builds it from this source checkout, which takes a few minutes once";
    await withPage(async ({ page }) => {
      await patchInfo(page, (j) => ({ ...j, available: false, building: false, buildable: true, reason, families: [], planted: [] }));
      await page.goto("/replay/");
      await waitText(page, '[data-testid="sim-buildable"]', (t) => t === reason, "the reason");
      assert.equal(await page.getByTestId("sim-run").isEnabled(), true, "Run starts the build");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
    });
  });

  test("a tenant key is told a run needs an admin key, in place of the form", async () => {
    // The answer a tenant key gets (403), substituted: this world has no keys.
    await withPage(async ({ page }) => {
      await page.route("**/api/v1/simulations", (route: Route) =>
        route.fulfill({ status: 403, json: { error: { code: "forbidden", message: "this route needs an admin key" } } }),
      );
      await page.goto("/replay/");
      await waitText(page, '[data-testid="card-simulate"] [data-testid="needs-admin"]', (t) => t.startsWith("Running a simulation needs an admin key"), "the explanation");
      assert.equal(await page.getByTestId("sim-run").count(), 0, "no Run button");
      assert.equal(await page.locator(".state-error").count(), 0, "not an error box");
    }, /status of 403/);
  });

  test("a run the server stopped shows its reason, and the player shows what arrived", async () => {
    // The first lines of a real run, then the server's aborted line (t_ms null) instead of the
    // end: what the server sends when the run passes its deadline or its memory.
    const scratch = mkdtempSync(join(tmpdir(), "orq-sim-aborted-"));
    let body: string;
    try {
      const file = join(scratch, "seed-4.jsonl");
      spawnSync(SIM_BIN, ["run", "--seed", "4", "--timeline", file], { encoding: "utf8", timeout: 300_000 });
      const lines = readFileSync(file, "utf8").trim().split("\n");
      const reason = "the run passed its deadline of 60 s";
      body =
        lines.slice(0, Math.min(60, lines.length - 1)).join("\n") +
        "\n" +
        JSON.stringify({ t_ms: null, actor: "server", kind: "aborted", task: null, tenant: null, attempt: null, details: { reason } }) +
        "\n";
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
    await withPage(async ({ page }) => {
      await page.route("**/api/v1/simulations", (route: Route) =>
        route.request().method() === "POST"
          ? route.fulfill({ status: 200, headers: { "Content-Type": "application/x-ndjson" }, body })
          : route.fallback(),
      );
      await page.goto("/replay/");
      await form(page).locator('input[name="seed"]').fill("4");
      await page.getByTestId("sim-run").click();
      await waitText(page, '[data-testid="sim-aborted"]', (t) => t.includes("the run passed its deadline of 60 s"), "the server's reason");
      await waitText(page, '[data-testid="summary-aborted"]', (t) => t.includes("the run passed its deadline of 60 s"), "the summary says the run was stopped");
      await page.getByTestId("card-board").waitFor();
      assert.equal(await page.getByTestId("sim-verdict").textContent(), "no verdict");
      // The player plays through what arrived, to its last event, without an end line.
      await page.getByTestId("play").click();
      const time = page.getByLabel("Time (ms)");
      const last = await time.getAttribute("max");
      await waitFor("playback to the last event that arrived", async () => (await time.inputValue()) === last);
      await screenshot(page, "replay-simulation-aborted");
    });
  });
});
