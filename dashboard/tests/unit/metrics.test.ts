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
