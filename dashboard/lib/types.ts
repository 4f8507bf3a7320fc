// The JSON shapes of orq's HTTP API (`/api/v1`), as `server/src/api.rs` and `server/src/model.rs`
// write them. Times are RFC 3339 UTC strings with milliseconds unless a name ends in `_ms`.

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

export type Status = (typeof STATUSES)[number];

export type Counts = Record<Status, number>;

export function isStatus(s: string): s is Status {
  return (STATUSES as readonly string[]).includes(s);
}

export interface Backoff {
  initial_ms: number;
  multiplier: number;
  max_ms: number;
  jitter: number;
}

export interface Lease {
  worker: string;
  expires_at: string;
  epoch: number;
}

export interface Task {
  id: string;
  queue: string;
  tenant: string;
  type: string;
  payload: unknown;
  priority: number;
  status: Status;
  attempt: number;
  max_retries: number;
  run_at: string;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
  lease: Lease | null;
  last_error: string | null;
  result: unknown;
  backoff: Backoff;
  lease_ms: number;
  timeout_ms: number | null;
  idempotency_key: string | null;
  replays: number;
  /** `<attempt> <time ms> <worker> <outcome> <error>` lines, oldest first. */
  history: string[];
}

export interface TaskPage {
  tasks: Task[];
  /** Pass back as `cursor`; null when the listing is complete. */
  next_cursor?: string | null;
}

export interface TenantStats {
  tenant: string;
  weight: number;
  max_inflight: number | null;
  max_queued: number | null;
  rate_per_s: number | null;
  burst: number | null;
  counts: Counts;
  served: number;
  share: number;
  completed_per_s: number;
}

export interface QueueStats {
  queue: string;
  paused: boolean;
  aging_step_ms: number;
  defaults: unknown;
  counts: Counts;
  /** Cumulative counters: enqueued, completed, failed (attempts), dead, reaped, replayed, purged. */
  totals: Record<string, number>;
  tenants: TenantStats[];
}

/** The body of `PUT /queues/{q}/tenants/{t}`: a missing field keeps, `null` removes. */
export interface TenantLimits {
  weight?: number | null;
  max_inflight?: number | null;
  max_queued?: number | null;
  rate_per_s?: number | null;
  burst?: number | null;
}

/** The body of `POST /tasks` (only `payload` is required). */
export interface SubmitBody {
  queue?: string;
  tenant?: string;
  type?: string;
  payload: unknown;
  priority?: number;
  delay_ms?: number;
  max_retries?: number;
  idempotency_key?: string;
}

export interface WorkerLease {
  task_id: string;
  type: string;
  tenant: string;
  leased_at_ms: number;
  lease_exp_ms: number;
  heartbeat_age_ms: number;
}

export interface WorkerInfo {
  id: string;
  last_seen_ms: number;
  idle_ms: number;
  leases: WorkerLease[];
}

export interface WorkersReply {
  now_ms: number;
  workers: WorkerInfo[];
}

export interface Percentiles {
  p50: number;
  p99: number;
  max: number;
}

export interface MetricsBucket {
  t_ms: number;
  completed: number;
  failed: number;
  dead: number;
  submitted: number;
  wait_ms: Percentiles | null;
  run_ms: Percentiles | null;
}

export interface MetricsReply {
  bucket_ms: number;
  buckets: MetricsBucket[];
}

export interface TimelineFileInfo {
  name: string;
  bytes: number;
  modified_ms: number;
}

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
