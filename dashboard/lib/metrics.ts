// Chart series from the metrics route's buckets. Pure functions (tested).

import type { MetricsReply } from "./types";

/** The window the overview charts show (ms). */
export const CHART_WINDOW_MS = 3_600_000;

export interface RatePoint {
  t_ms: number;
  completed_per_s: number;
  failed_per_s: number;
  dead_per_s: number;
}

export interface LatencyPoint {
  t_ms: number;
  wait_p50?: number;
  wait_p99?: number;
  run_p50?: number;
  run_p99?: number;
}

/** Per-second rates of each bucket within the last `window_ms` before `now_ms`, oldest first. */
export function ratePoints(m: MetricsReply, now_ms: number, window_ms = CHART_WINDOW_MS): RatePoint[] {
  const per_s = 1000 / Math.max(1, m.bucket_ms);
  return m.buckets
    .filter((b) => b.t_ms >= now_ms - window_ms)
    .sort((a, b) => a.t_ms - b.t_ms)
    .map((b) => ({
      t_ms: b.t_ms,
      completed_per_s: b.completed * per_s,
      failed_per_s: b.failed * per_s,
      dead_per_s: b.dead * per_s,
    }));
}

/** Wait and run percentiles of each bucket in the window; buckets without samples are gaps. */
export function latencyPoints(
  m: MetricsReply,
  now_ms: number,
  window_ms = CHART_WINDOW_MS,
): LatencyPoint[] {
  return m.buckets
    .filter((b) => b.t_ms >= now_ms - window_ms)
    .sort((a, b) => a.t_ms - b.t_ms)
    .map((b) => ({
      t_ms: b.t_ms,
      wait_p50: b.wait_ms?.p50,
      wait_p99: b.wait_ms?.p99,
      run_p50: b.run_ms?.p50,
      run_p99: b.run_ms?.p99,
    }));
}

/** The time axis shared by the overview's charts: the same domain and ticks for each. */
export interface ChartAxis {
  domain: [number, number];
  ticks: number[];
}

/** The shortest time axis (ms). */
const MIN_SPAN_MS = 60_000;

/** Tick steps, from 10 s to 1 h (ms). */
const TICK_STEPS_MS = [10_000, 30_000, 60_000, 120_000, 300_000, 600_000, 900_000, 1_800_000, 3_600_000];

/**
 * One time axis for every chart of a page, from all their points' times: the domain spans the
 * earliest to the latest point, and the ticks fall on whole multiples of a step (10 s … 1 h)
 * chosen so that there are at most `max_ticks` of them. Null without points.
 */
export function chartAxis(times: readonly number[], max_ticks = 7): ChartAxis | null {
  if (times.length === 0) {
    return null;
  }
  let lo = Infinity;
  let hi = -Infinity;
  for (const t of times) {
    lo = Math.min(lo, t);
    hi = Math.max(hi, t);
  }
  if (hi - lo < MIN_SPAN_MS) {
    // One point (or a few close together): a minute around them, so the axis is not degenerate.
    const pad = (MIN_SPAN_MS - (hi - lo)) / 2;
    lo -= pad;
    hi += pad;
  }
  const span = hi - lo;
  const step = TICK_STEPS_MS.find((s) => span / s <= max_ticks - 1) ?? TICK_STEPS_MS[TICK_STEPS_MS.length - 1]!;
  const ticks: number[] = [];
  for (let t = Math.ceil(lo / step) * step; t <= hi; t += step) {
    ticks.push(t);
  }
  if (ticks.length === 0) {
    ticks.push(lo);
  }
  return { domain: [lo, hi], ticks };
}

/** Steps of a duration axis (ms): 1-2-5 from 1 ms to 500 ms, then whole seconds and minutes. */
const DURATION_STEPS_MS = [
  1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
  600_000, 900_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000, 86_400_000,
];

/**
 * Ticks of a duration axis from 0 to at least `max_ms`: multiples of the smallest round step
 * (1-2-5 ms, then 1, 2, 5, 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min, 1, 2, 6, 12, 24 h) that needs at
 * most `max_ticks` ticks, so labels read "30 s", "1 min", never "1 min 10 s". `[0]` when
 * `max_ms` is not positive.
 */
export function durationTicks(max_ms: number, max_ticks = 5): number[] {
  if (!Number.isFinite(max_ms) || max_ms <= 0) {
    return [0];
  }
  const step =
    DURATION_STEPS_MS.find((s) => Math.ceil(max_ms / s) <= max_ticks - 1) ?? DURATION_STEPS_MS[DURATION_STEPS_MS.length - 1]!;
  const ticks: number[] = [];
  for (let t = 0; t < max_ms + step; t += step) {
    ticks.push(t);
    if (t >= max_ms) break;
  }
  return ticks;
}

/** A duration tick's label, short enough for the axis: "500 ms", "30 s", "90 s", "2 min", "12 h". */
export function durationTickLabel(ms: number): string {
  if (ms === 0) return "0";
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 120_000) return `${ms / 1_000} s`;
  if (ms < 7_200_000) return `${ms / 60_000} min`;
  return `${ms / 3_600_000} h`;
}
