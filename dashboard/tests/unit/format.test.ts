// Goal: the dashboard's text for numbers, durations, times is right at the
// edges (sub-second, units boundaries, negative, unreadable input). Method: table checks.

import assert from "node:assert/strict";
import { test } from "node:test";
import {
  formatBytes,
  formatDuration,
  formatNumber,
  formatRelative,
  formatVirtual,
  shortId,
  toMs,
} from "../../lib/format";

test("durations use the two largest units", () => {
  const cases: Array<[number, string]> = [
    [0, "0 ms"],
    [850, "850 ms"],
    [999.6, "1000 ms"],
    [1000, "1.0 s"],
    [3200, "3.2 s"],
    [12_345, "12 s"],
    [60_000, "1 min"],
    [250_000, "4 min 10 s"],
    [3_600_000, "1 h"],
    [7_500_000, "2 h 5 min"],
    [90_000_000, "1 d 1 h"],
    [-1500, "-1.5 s"],
  ];
  for (const [ms, want] of cases) assert.equal(formatDuration(ms), want, String(ms));
  assert.equal(formatDuration(null), "—");
  assert.equal(formatDuration(Number.NaN), "—");
});

test("relative times say ago / in / just now", () => {
  const now = Date.parse("2026-11-29T10:00:00.000Z");
  assert.equal(formatRelative("2026-11-29T09:59:30.000Z", now), "30 s ago");
  assert.equal(formatRelative("2026-11-29T10:05:00.000Z", now), "in 5 min");
  assert.equal(formatRelative(now + 200, now), "just now");
  assert.equal(formatRelative("not a time", now), "—");
  assert.equal(formatRelative(null, now), "—");
});

test("numbers, bytes, virtual time, ids", () => {
  assert.equal(formatNumber(1234567), "1,234,567");
  assert.equal(formatNumber(0.125), "0.13");
  assert.equal(formatNumber(undefined), "—");
  assert.equal(formatBytes(980), "980 B");
  assert.equal(formatBytes(12_600), "12.3 KiB");
  assert.equal(formatBytes(5 * 1024 * 1024), "5.0 MiB");
  assert.equal(formatVirtual(12_345), "12.345 s");
  assert.equal(formatVirtual(62_005), "1 min 2.005 s");
  assert.equal(shortId("01MCC5RMD3HD7ASK99EX20PP1A"), "01MCC5RM…PP1A");
  assert.equal(shortId("short"), "short");
  assert.equal(toMs("2023-11-14T22:13:20.123Z"), 1_700_000_000_123);
  assert.equal(toMs("nope"), null);
});
