// Goal: the Replay view greets a user of an orq started without --timelines with what to do, not
// with a red error (issue 25: it showed "timelines are not enabled ... (HTTP 404)"). Method: an
// `orq serve` without --timelines; the Replay view must say how to get a timeline, show no error
// box, log no console error, and still open a timeline file.

import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { newPage, startWorld, type World } from "./fixture";

let world: World;

describe("an orq without --timelines", { timeout: 5 * 60_000 }, () => {
  before(async () => {
    world = await startWorld({ noTimelines: true });
  });

  after(async () => {
    await world?.stop();
  });

  test("the Replay view explains how to get a timeline and opens a file", async () => {
    const r = await world.api("/timelines");
    assert.equal(r.status, 404, "this orq serves no timelines");
    const p = await newPage(world);
    try {
      await p.page.goto("/replay/");
      await p.page.getByText("This orq keeps no simulation timelines.").waitFor();
      assert.match((await p.page.locator("body").textContent()) ?? "", /orq-sim run --seed 42 --timeline/);
      assert.equal(await p.page.locator(".state-error").count(), 0, "no error box");
      await p.page.locator('input[type="file"]').setInputFiles(join(__dirname, "..", "fixtures", "small.jsonl"));
      await p.page.locator('[data-testid="card-board"]').waitFor();
      // The failed list call is an expected 404, which the browser logs as a failed resource.
      assert.deepEqual(
        p.errors.filter((e) => !/status of 404/.test(e)),
        [],
        "no console errors or uncaught exceptions",
      );
    } finally {
      await p.close();
    }
  });
});
