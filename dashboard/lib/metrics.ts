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
