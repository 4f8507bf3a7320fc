"use client";
// Charts on recharts: throughput (completed / failed per second) and latency (wait and run
// percentiles) of a queue, from GET /queues/{q}/metrics buckets.

import {
  Area,
  AreaChart,
  CartesianGrid,
  Legend,
  Line,
  LineChart,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";
import { formatDuration } from "@/lib/format";

import { durationTickLabel, durationTicks, type ChartAxis, type LatencyPoint, type RatePoint } from "@/lib/metrics";

function clock(ms: number): string {
  const d = new Date(ms);
  return `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
}

function clockSeconds(ms: number): string {
  const d = new Date(ms);
  return `${clock(ms)}:${String(d.getSeconds()).padStart(2, "0")}`;
}

/** Width of the y axis of every chart, so that the plot areas (and their time axes) line up. */
const Y_AXIS_WIDTH = 56;

/** Tick labels: hh:mm, or hh:mm:ss when the ticks are less than a minute apart. */
function axisLabel(axis: ChartAxis | null | undefined): (ms: number) => string {
  const ticks = axis?.ticks ?? [];
  const fine = ticks.some((t) => t % 60_000 !== 0);
  return fine ? clockSeconds : clock;
}

export function ThroughputChart({ points, axis }: { points: RatePoint[]; axis?: ChartAxis | null }) {
  const tickLabel = axisLabel(axis);
  return (
    <div style={{ width: "100%", height: 240 }} data-testid="chart-throughput" data-ticks={axis?.ticks.join(",")}>
      <ResponsiveContainer>
        <AreaChart data={points} margin={{ top: 8, right: 16, left: 0, bottom: 0 }}>
          <CartesianGrid strokeDasharray="3 3" stroke="#e2e8f0" />
          <XAxis
            dataKey="t_ms"
            type="number"
            scale="time"
            domain={axis ? axis.domain : ["dataMin", "dataMax"]}
            ticks={axis?.ticks}
            interval={0}
            allowDataOverflow
            tickFormatter={tickLabel}
            fontSize={12}
            padding={{ right: 8 }}
          />
          <YAxis fontSize={12} width={Y_AXIS_WIDTH} allowDecimals />
          <Tooltip
            labelFormatter={(v) => clockSeconds(Number(v))}
            formatter={(v) => `${Number(v).toFixed(2)} /s`}
          />
          <Legend />
          <Area
            type="monotone"
            dataKey="completed_per_s"
            name="completed /s"
            stroke="#16a34a"
            fill="#16a34a33"
            isAnimationActive={false}
          />
          <Area
            type="monotone"
            dataKey="failed_per_s"
            name="failed attempts /s"
            stroke="#ea580c"
            fill="#ea580c33"
            isAnimationActive={false}
          />
          <Area
            type="monotone"
            dataKey="dead_per_s"
            name="dead /s"
            stroke="#dc2626"
            fill="#dc262633"
            isAnimationActive={false}
          />
        </AreaChart>
      </ResponsiveContainer>
    </div>
  );
}

export function LatencyChart({ points, axis }: { points: LatencyPoint[]; axis?: ChartAxis | null }) {
  const tickLabel = axisLabel(axis);
  // Round durations on the y axis (30 s steps, not 35 s ones that read "1 min 10 s").
  let max = 0;
  for (const p of points) {
    for (const v of [p.wait_p50, p.wait_p99, p.run_p50, p.run_p99]) {
      if (typeof v === "number" && v > max) max = v;
    }
  }
  const yTicks = durationTicks(max);
  return (
    <div style={{ width: "100%", height: 240 }} data-testid="chart-latency" data-ticks={axis?.ticks.join(",")}>
      <ResponsiveContainer>
        <LineChart data={points} margin={{ top: 8, right: 16, left: 0, bottom: 0 }}>
          <CartesianGrid strokeDasharray="3 3" stroke="#e2e8f0" />
          <XAxis
            dataKey="t_ms"
            type="number"
            scale="time"
            domain={axis ? axis.domain : ["dataMin", "dataMax"]}
            ticks={axis?.ticks}
            interval={0}
            allowDataOverflow
            tickFormatter={tickLabel}
            fontSize={12}
            padding={{ right: 8 }}
          />
          <YAxis
            fontSize={12}
            width={Y_AXIS_WIDTH}
            ticks={yTicks}
            domain={[0, yTicks[yTicks.length - 1]!]}
            interval={0}
            tickFormatter={(v: number) => durationTickLabel(v)}
          />
          <Tooltip
            labelFormatter={(v) => clockSeconds(Number(v))}
            formatter={(v) => formatDuration(Number(v))}
          />
          <Legend />
          <Line dataKey="wait_p50" name="wait p50" stroke="#3b82f6" dot={{ r: 2 }} isAnimationActive={false} connectNulls />
          <Line dataKey="wait_p99" name="wait p99" stroke="#1e3a8a" dot={{ r: 2 }} strokeDasharray="4 3" isAnimationActive={false} connectNulls />
          <Line dataKey="run_p50" name="run p50" stroke="#f59e0b" dot={{ r: 2 }} isAnimationActive={false} connectNulls />
          <Line dataKey="run_p99" name="run p99" stroke="#9a3412" dot={{ r: 2 }} strokeDasharray="4 3" isAnimationActive={false} connectNulls />
        </LineChart>
      </ResponsiveContainer>
    </div>
  );
}
