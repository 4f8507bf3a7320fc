// The JSON shapes of orq's HTTP API (`/api/v1`) under the dashboard's names: aliases of the
// schemas of `api-types.ts`, generated from the server's OpenAPI document (`openapi.json`; see
// `npm run gen:api`), so they cannot drift from the server. Times are RFC 3339 UTC strings with
// milliseconds unless a name ends in `_ms`. The live events (Server-Sent Events, not in the
// document) are written here.

import type { components } from "./api-types";

type Schemas = components["schemas"];

/** Every task status, in lifecycle order (the order the dashboard shows them in). */
export const STATUSES = [
  "scheduled",
  "queued",
  "leased",
  "retrying",
  "completed",
  "dead",
  "cancelled",
] as const;

export type Status = Schemas["Status"];

// STATUSES lists exactly the server's statuses: each side must be assignable to the other.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const statusesMatch: Same<(typeof STATUSES)[number], Status> = true;
void statusesMatch;

export type Counts = Schemas["Counts"];

/** A stable error code of an error answer (`{"error": {"code", "message"}}`). */
export type ErrorCode = Schemas["ErrorCode"];

export function isStatus(s: string): s is Status {
  return (STATUSES as readonly string[]).includes(s);
}

export type Backoff = Schemas["Backoff"];

export type Lease = Schemas["Lease"];

/** One ended attempt of a task (its `attempts`, oldest first). */
export type Attempt = Schemas["Attempt"];

export type Task = Schemas["Task"];

export type TaskPage = Schemas["TaskPage"];

export type TenantStats = Schemas["TenantStats"];

export type QueueStats = Schemas["QueueStats"];

export type TenantLimits = Schemas["TenantBody"];

export type SubmitBody = Schemas["SubmitBody"];

export type WorkerLease = Schemas["WorkerLease"];

export type WorkerInfo = Schemas["Worker"];

export type WorkersReply = Schemas["WorkerList"];

export type Percentiles = Schemas["Quantiles"];

export type MetricsBucket = Schemas["MetricsBucket"];

export type MetricsReply = Schemas["Metrics"];

export type TimelineFileInfo = Schemas["TimelineFile"];

/**
 * `GET /api/v1/simulations`: whether this orq can run the simulator now (or is building it), and
 * what a run can ask for: the fault families, the planted bugs, the limits.
 */
export type SimulatorInfo = Schemas["SimulatorJson"];

/** The body of `POST /api/v1/simulations`: seed, fault families (null: the seed's own), planted bug, lossy, tasks. */
export type SimulationRequest = Schemas["SimulationRequest"];

/** One event of `GET /events` (Server-Sent Events, `event: task` or `event: queue`). */
export interface LiveEvent {
  queue: string;
  stream_id: string;
  kind: string;
  ts: number;
  task_id: string | null;
  tenant: string | null;
  attempt: number | null;
  fields: Record<string, string>;
}

export const STATUS_COLOURS: Record<Status, string> = {
  scheduled: "#7c6cf2",
  queued: "#3b82f6",
  leased: "#f59e0b",
  retrying: "#ea580c",
  completed: "#16a34a",
  dead: "#dc2626",
  cancelled: "#6b7280",
};

export function emptyCounts(): Counts {
  return {
    scheduled: 0,
    queued: 0,
    leased: 0,
    retrying: 0,
    completed: 0,
    dead: 0,
    cancelled: 0,
  };
}
