/**
 * The shapes of the API's bodies and answers, taken from the types generated out of orq's
 * OpenAPI document (`src/api-types.ts`, made by `npm run gen:api`). Nothing here is written by
 * hand beyond picking and renaming: when the document changes, regenerating updates these.
 *
 * Field names are the API's own (snake_case); times are RFC 3339 strings unless a name ends in
 * `_ms` (milliseconds).
 */
import type { components, operations } from "./api-types.js";

type Schemas = components["schemas"];

/** `Omit` that keeps the members of a union apart (so `delay_ms` xor `run_at` survives). */
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

/** A task as the API shows it (`GET /tasks/{id}` and most answers). */
export type Task = Schemas["Task"];

/** One ended attempt of a task (its `attempts`, oldest first). */
export type Attempt = Schemas["Attempt"];
/** A task's status: scheduled, queued, leased, retrying, completed, dead or cancelled. */
export type Status = Schemas["Status"];
/** A stable, machine-readable error code of the API. */
export type ErrorCode = Schemas["ErrorCode"];
/** The body of every error answer: `{"error": {"code", "message"}}`. */
export type ApiErrorBody = Schemas["ApiError"];
/** The body of `POST /tasks` (and each item of a batch); only `payload` is required. */
export type SubmitBody = Schemas["SubmitBody"];
/**
 * The options of a submit: every field of {@link SubmitBody} but `payload` and `type`
 * (`queue`, `tenant`, `priority`, `delay_ms` or `run_at`, `max_retries`, `backoff`, `lease_ms`,
 * `timeout_ms`, `idempotency_key`).
 */
export type SubmitOptions = DistributiveOmit<SubmitBody, "payload" | "type">;
/** One item of {@link Client.submitMany}: a type, a payload and the options of a submit. */
export type SubmitItem = DistributiveOmit<SubmitBody, "type"> & { type: string };
/** A page of tasks (`GET /tasks`, `GET /dlq`) or the tasks of a batch submit. */
export type TaskPage = Schemas["TaskPage"];
/** The filters of `GET /tasks`: queue, tenant, status, type, limit (1..1000), cursor. */
export type ListFilters = NonNullable<operations["list_tasks"]["parameters"]["query"]>;
/** The filters of `GET /dlq`: queue, tenant, type, limit (1..1000), cursor. */
export type DlqFilters = NonNullable<operations["list_dlq"]["parameters"]["query"]>;
/** The body of `POST /dlq/replay`: queue, tenant, type, limit (at most 10000 tasks). */
export type ReplayDlqFilters = Schemas["BulkReplayBody"];
/** The answer of `POST /dlq/replay`: how many tasks were put back, and whether more match. */
export type BulkReplay = Schemas["BulkReplay"];
/** The answer of `DELETE /dlq/{id}`. */
export type Purged = Schemas["Purged"];
/** A queue's counts per status and tenant, totals, paused flag and defaults. */
export type QueueStats = Schemas["QueueStats"];
/** A task leased through the worker protocol, with its lease token and fencing epoch. */
export type LeasedTask = Schemas["LeasedTask"];
/** The answer of a heartbeat: the new deadline and the time left until it (ms). */
export type Heartbeat = Schemas["Heartbeat"];
/** The answer of a complete, fail or release: `reported` is `applied` or `already_applied`. */
export type Report = Schemas["Report"];
/** The body of `POST /leases`. */
export type LeaseBody = Schemas["LeaseBody"];
/** The body of `POST /tasks/batch`. */
export type BatchBody = Schemas["BatchBody"];
/** The body of `POST /leases/{id}/heartbeat`. */
export type HeartbeatBody = Schemas["HeartbeatBody"];
/** The body of `POST /leases/{id}/complete`. */
export type CompleteBody = Schemas["CompleteBody"];
/** The body of `POST /leases/complete` (several completions of one queue). */
export type CompleteManyBody = Schemas["CompleteManyBody"];
/** The answer of `POST /leases/complete`: one report per completion, in order. */
export type CompleteManyAnswer = Schemas["CompleteManyAnswer"];
/** The body of `POST /leases/{id}/fail`. */
export type FailBody = Schemas["FailBody"];
/** The body of `POST /leases/{id}/release`. */
export type ReleaseBody = Schemas["ReleaseBody"];
/** The answer of `GET /queues`. */
export type QueueList = Schemas["QueueList"];
/** The answer of `POST /leases`. */
export type Leases = Schemas["Leases"];

/** A page of a listing, with the cursor of the next page (null once the listing is done). */
export interface Page {
  /** The tasks of this page, newest first. */
  tasks: Task[];
  /** Pass as `cursor` to get the next page; null when there is none. */
  nextCursor: string | null;
}

/** The answer of {@link Client.submitMany}. */
export interface Batch {
  /** The tasks, in the order given. */
  tasks: Task[];
  /** Per task, in order: true when this call created it, false when its idempotency key matched. */
  created: boolean[];
}

/** Where a task lives: the queue narrows the lookup (without it every known queue is searched). */
export interface TaskLocator {
  /** The task's queue. */
  queue?: string;
}

/** Per-call options of every {@link Client} method. */
export interface CallOptions {
  /** Aborts the call (and its retries); the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Retries of this call on transient errors, overriding the client's `retries`. */
  retries?: number;
  /** Time limit of each attempt (ms), overriding the client's `timeoutMs`. */
  timeoutMs?: number;
}
