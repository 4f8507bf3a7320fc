// Chart series from the metrics route's buckets, and a fall-back from totals sampled by the
// page when the route is missing (an older orq). Pure functions (tested).

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

/** A reading of a queue's cumulative totals at a time. */
export interface TotalsSample {
  t_ms: number;
  completed: number;
  failed: number;
  dead: number;
}

/** Most samples the fall-back keeps (one per refresh). */
export const SAMPLES_MAX = 1800;

/** Rates between consecutive samples (the fall-back series). */
export function ratesFromSamples(samples: TotalsSample[]): RatePoint[] {
  const out: RatePoint[] = [];
  for (let i = 1; i < samples.length; i++) {
    const a = samples[i - 1]!;
    const b = samples[i]!;
    const dt_s = (b.t_ms - a.t_ms) / 1000;
    if (dt_s <= 0) {
      continue;
    }
    const rate = (x: number, y: number) => Math.max(0, y - x) / dt_s;
    out.push({
      t_ms: b.t_ms,
      completed_per_s: rate(a.completed, b.completed),
      failed_per_s: rate(a.failed, b.failed),
      dead_per_s: rate(a.dead, b.dead),
    });
  }
  return out;
}
