/**
 * What a handler sees: the {@link Job} (the leased task and an abort signal), and
 * {@link Permanent}, the error that fails a task for good.
 */

/**
 * Why a job's `signal` aborted (its `signal.reason`): the task was `cancelled`, the lease was
 * lost (`lease_lost`: another worker may run it now), the task's `timeout_ms` passed
 * (`timeout`), or shutdown stopped waiting for the handler (`shutdown`: the task was released).
 */
export type AbortReason = "cancelled" | "lease_lost" | "timeout" | "shutdown";

/** A leased task as its handler gets it. */
export interface Job<P = unknown> {
  /** The task id (ULID). */
  readonly id: string;
  /** The task's queue. */
  readonly queue: string;
  /** The task's tenant. */
  readonly tenant: string;
  /** The handler type. */
  readonly type: string;
  /** The payload (any JSON, as submitted). */
  readonly payload: P;
  /** This attempt's number (1 for the first run). */
  readonly attempt: number;
  /** Retries allowed after the first attempt. */
  readonly maxRetries: number;
  /**
   * The fencing epoch: grows by one with every lease of the task. Pass it to the systems the
   * handler writes to, so they can refuse a write of an older lease.
   */
  readonly epoch: number;
  /** The lease token (the worker sends it with heartbeats and the outcome). */
  readonly token: string;
  /** The lease's length (ms); the worker heartbeats automatically to keep it. */
  readonly leaseMs: number;
  /** The handler's time limit (ms), or null for none. */
  readonly timeoutMs: number | null;
  /** The task's priority, 0..9. */
  readonly priority: number;
  /** When the task was submitted (RFC 3339). */
  readonly createdAt: string;
  /**
   * The W3C `traceparent` the task was submitted under (orq's submit span when the API exports
   * traces, else the submitter's own), or null. A handler that traces continues it, e.g. with
   * `propagation.extract(context.active(), { traceparent, tracestate })` of `@opentelemetry/api`.
   */
  readonly traceparent: string | null;
  /** The `tracestate` that came with `traceparent`, or null. */
  readonly tracestate: string | null;
  /** Aborts when the handler should stop; `signal.reason` is an {@link AbortReason}. */
  readonly signal: AbortSignal;
}

/**
 * A handler: gets the job, returns the result (any JSON-serialisable value; undefined becomes
 * null). Throwing fails the attempt (retried with backoff while retries are left); throwing a
 * {@link Permanent} sends the task to the dead-letter queue at once.
 */
export type Handler<P = any, R = unknown> = (job: Job<P>) => Promise<R> | R;

/** Throw this from a handler to fail the task permanently: no retry, straight to the DLQ. */
export class Permanent extends Error {
  /** A permanent failure saying `message`. */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "Permanent";
  }
}
