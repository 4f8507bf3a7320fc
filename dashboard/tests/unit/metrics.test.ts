// Goal: the overview charts plot per-second rates and latency percentiles of the last hour.
// Method: small tables.

import assert from "node:assert/strict";
import { test } from "node:test";
import { chartAxis, latencyPoints, ratePoints } from "../../lib/metrics";
import type { MetricsReply } from "../../lib/types";

const now = 10_000_000;
const m: MetricsReply = {
  queue: "q",
  bucket_ms: 10_000,
  buckets: [
    { t_ms: now - 10_000, completed: 50, failed: 10, dead: 1, submitted: 60, wait_ms: { count: 3, p50: 5, p99: 40, max: 90 }, run_ms: null },
    { t_ms: now - 4_000_000, completed: 1, failed: 0, dead: 0, submitted: 1, wait_ms: null, run_ms: null },
    { t_ms: now - 20_000, completed: 0, failed: 0, dead: 0, submitted: 0, wait_ms: null, run_ms: { count: 2, p50: 7, p99: 9, max: 9 } },
  ],
};

test("rates are per second of each bucket, oldest first, last hour only", () => {
  assert.deepEqual(ratePoints(m, now), [
    { t_ms: now - 20_000, completed_per_s: 0, failed_per_s: 0, dead_per_s: 0 },
    { t_ms: now - 10_000, completed_per_s: 5, failed_per_s: 1, dead_per_s: 0.1 },
  ]);
});

test("latency points carry the percentiles a bucket has and leave gaps for the rest", () => {
  const p = latencyPoints(m, now);
  assert.equal(p.length, 2);
  assert.equal(p[0]!.wait_p50, undefined);
  assert.equal(p[0]!.run_p99, 9);
  assert.equal(p[1]!.wait_p99, 40);
});

test("chartAxis: one domain and whole-step ticks for every chart of the page", () => {
  assert.equal(chartAxis([]), null);
  const t0 = Date.UTC(2026, 0, 1, 11, 9, 40);
  // Throughput from 11:09:40, latency points from 11:12:00: the axis covers both.
  const a = chartAxis([t0, t0 + 10_000, t0 + 140_000, t0 + 600_000])!;
  assert.deepEqual(a.domain, [t0, t0 + 600_000]);
  assert.ok(a.ticks.length >= 2 && a.ticks.length <= 7, `ticks: ${a.ticks.length}`);
  for (const t of a.ticks) {
    assert.ok(t >= t0 && t <= t0 + 600_000, "ticks within the domain");
    assert.equal(t % 60_000, 0, "ticks on whole minutes");
  }
  // The same times in any order give the same axis.
  assert.deepEqual(chartAxis([t0 + 600_000, t0 + 140_000, t0, t0 + 10_000]), a);
  // A single point: a minute around it, with ticks.
  const one = chartAxis([t0])!;
  assert.deepEqual(one.domain, [t0 - 30_000, t0 + 30_000]);
  assert.ok(one.ticks.length >= 2 && one.ticks.includes(t0), `ticks: ${one.ticks.join(",")}`);
});

test("latency axis ticks are round durations with short labels", async () => {
  const { durationTicks, durationTickLabel } = await import("../../lib/metrics");
  // The 35 s steps the issue saw ("1 min 10 s", "1 min 45 s") for a 2 min maximum: now 30 s steps.
  assert.deepEqual(durationTicks(120_000), [0, 30_000, 60_000, 90_000, 120_000]);
  assert.deepEqual(durationTicks(130_000), [0, 60_000, 120_000, 180_000]);
  assert.deepEqual(durationTicks(7), [0, 2, 4, 6, 8]);
  assert.deepEqual(durationTicks(0), [0]);
  assert.deepEqual(durationTicks(NaN), [0]);
  for (const max of [3, 480, 2_500, 45_000, 700_000, 5_000_000, 90_000_000]) {
    const ticks = durationTicks(max);
    assert.ok(ticks.length <= 5 && ticks.at(-1)! >= max, `${max}: ${ticks}`);
    for (const t of ticks) assert.ok(durationTickLabel(t).length <= 7, `${t}: ${durationTickLabel(t)}`);
  }
  assert.deepEqual([0, 500, 30_000, 90_000, 120_000, 5_400_000].map(durationTickLabel), ["0", "500 ms", "30 s", "90 s", "2 min", "90 min"]);
});
