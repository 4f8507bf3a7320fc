/**
 * `Client`: submit, read, list, cancel and replay tasks, read queues, and the worker protocol's
 * low-level calls (lease, heartbeat, complete, fail, release). Every call rejects with an
 * {@link OrqError} subclass on failure.
 */
import { errorFromAnswer, type OrqError } from "./errors.js";
import { Transport, type RetryPolicy } from "./http.js";
import type {
  Batch,
  BatchBody,
  BulkReplay,
  CompleteBody,
  CompleteManyAnswer,
  CompleteManyBody,
  FailBody,
  HeartbeatBody,
  LeaseBody,
  Leases,
  QueueList,
  ReleaseBody,
  SubmitBody,
  CallOptions,
  DlqFilters,
  Heartbeat,
  LeasedTask,
  ListFilters,
  Page,
  Purged,
  QueueStats,
  ReplayDlqFilters,
  Report,
  SubmitItem,
  SubmitOptions,
  Task,
  TaskLocator,
  TaskPage,
} from "./types.js";

/** The HTTP status each per-item error code of {@link Client.completeMany} stands for. */
const ITEM_STATUS: Record<string, number> = { lease_lost: 409, cancelled: 409, not_found: 404, bad_request: 400 };

/** Options of a {@link Client}. */
export interface ClientOptions {
  /** The server's address, e.g. `http://127.0.0.1:8080` (a trailing `/api/v1` is accepted). */
  url: string;
  /** An API key (admin, tenant or worker), sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Time limit of each request attempt (ms; default 30000). A lease adds its `waitMs`. */
  timeoutMs?: number;
  /** Retries of a call on transient errors, where retrying is safe (default 3). */
  retries?: number;
  /** The `fetch` to use (default: Node's built-in one); for tests and custom agents. */
  fetch?: typeof fetch;
}

/** What {@link Client.lease} asks for. */
export interface LeaseRequest {
  /** This worker's id, `[A-Za-z0-9._-]{1,64}`, one per worker process. */
  worker: string;
  /** The queues to lease from (1..16, each existing). */
  queues: string[];
  /** Most tasks to lease (1..100; default 1). */
  count?: number;
  /** How long to wait for work when none is ready (ms, 0..30000; default 0: answer at once). */
  waitMs?: number;
  /**
   * Lease only these tenants' tasks (1..16 names; default: every tenant's, or those a worker key
   * is limited to, which may name only those).
   */
  tenants?: string[];
}

/** Options of {@link Client.fail}. */
export interface FailOptions {
  /** True: no retry, the task goes to the dead-letter queue now. */
  permanent?: boolean;
}

/** Encode a path segment (task ids and queue names are URL-safe already; this keeps them so). */
const seg = (s: string): string => encodeURIComponent(s);

/** A client of one orq server. */
export class Client {
  /** Sends the requests: time limits, typed errors, retries. */
  private readonly transport: Transport;

  /** A client of the server at `opts.url`. */
  constructor(opts: ClientOptions) {
    this.transport = new Transport({
      url: opts.url,
      apiKey: opts.apiKey,
      timeoutMs: opts.timeoutMs ?? 30_000,
      retries: opts.retries ?? 3,
      fetch: opts.fetch,
    });
  }

  /**
   * Submit a task of `type` with `payload` (any JSON, at most 1 MiB). Retried on transient errors
   * only when `options.idempotency_key` is set (else only when the request was never sent).
   * Resolves to the task (the earlier one when the idempotency key was used before).
   */
  async submit(type: string, payload: unknown, options: SubmitOptions = {}, call?: CallOptions): Promise<Task> {
    const body: SubmitBody = { ...options, type, payload };
    const retry: RetryPolicy = options.idempotency_key ? "always" : "unsent";
    return (await this.transport.request<Task>({ method: "POST", path: "/tasks", body, retry, call })).body;
  }

  /**
   * Submit 1..1000 tasks at once (all or nothing on validation). Retried on transient errors
   * only when every item has an idempotency key.
   */
  async submitMany(items: SubmitItem[], call?: CallOptions): Promise<Batch> {
    const retry: RetryPolicy = items.length > 0 && items.every((i) => i.idempotency_key) ? "always" : "unsent";
    const { body } = await this.transport.request<TaskPage>({
      method: "POST",
      path: "/tasks/batch",
      body: { tasks: items } satisfies BatchBody,
      retry,
      call,
    });
    return { tasks: body.tasks, created: body.created ?? body.tasks.map(() => false) };
  }

  /** One task by id; `queue` narrows the lookup. */
  async get(id: string, where: TaskLocator = {}, call?: CallOptions): Promise<Task> {
    const query = { queue: where.queue };
    return (await this.transport.request<Task>({ method: "GET", path: `/tasks/${seg(id)}`, query, retry: "always", call })).body;
  }

  /** One page of a queue's tasks, newest first; pass `nextCursor` as `cursor` for the next. */
  async list(filters: ListFilters = {}, call?: CallOptions): Promise<Page> {
    const { body } = await this.transport.request<TaskPage>({ method: "GET", path: "/tasks", query: { ...filters }, retry: "always", call });
    return { tasks: body.tasks, nextCursor: body.next_cursor ?? null };
  }

  /** Cancel a scheduled, queued, retrying or leased task (idempotent: a cancelled one is returned). */
  async cancel(id: string, where: TaskLocator = {}, call?: CallOptions): Promise<Task> {
    const query = { queue: where.queue };
    return (await this.transport.request<Task>({ method: "POST", path: `/tasks/${seg(id)}/cancel`, query, retry: "always", call })).body;
  }

  /** One page of a queue's dead tasks, newest first. */
  async dlq(filters: DlqFilters = {}, call?: CallOptions): Promise<Page> {
    const { body } = await this.transport.request<TaskPage>({ method: "GET", path: "/dlq", query: { ...filters }, retry: "always", call });
    return { tasks: body.tasks, nextCursor: body.next_cursor ?? null };
  }

  /**
   * Replay a dead task: queued again with a fresh retry budget. Retried only when never sent
   * (a replay that did happen would answer 409 the second time).
   */
  async replay(id: string, where: TaskLocator = {}, call?: CallOptions): Promise<Task> {
    const query = { queue: where.queue };
    return (await this.transport.request<Task>({ method: "POST", path: `/dlq/${seg(id)}/replay`, query, retry: "unsent", call })).body;
  }

  /** Replay up to `limit` (default 1000, at most 10000) dead tasks of a queue; retried only when never sent. */
  async replayDlq(filters: ReplayDlqFilters = {}, call?: CallOptions): Promise<BulkReplay> {
    return (await this.transport.request<BulkReplay>({ method: "POST", path: "/dlq/replay", body: filters, retry: "unsent", call })).body;
  }

  /** Delete a dead task for good (admin keys only); retried only when never sent. */
  async purge(id: string, where: TaskLocator = {}, call?: CallOptions): Promise<Purged> {
    const query = { queue: where.queue };
    return (await this.transport.request<Purged>({ method: "DELETE", path: `/dlq/${seg(id)}`, query, retry: "unsent", call })).body;
  }

  /** Every queue the key may see, with its counts. */
  async queues(call?: CallOptions): Promise<QueueStats[]> {
    return (await this.transport.request<QueueList>({ method: "GET", path: "/queues", retry: "always", call })).body.queues;
  }

  /** One queue's counts per status and tenant, totals and settings. */
  async queue(name: string, call?: CallOptions): Promise<QueueStats> {
    return (await this.transport.request<QueueStats>({ method: "GET", path: `/queues/${seg(name)}`, retry: "always", call })).body;
  }

  /**
   * Lease up to `count` tasks of `queues`, waiting up to `waitMs` (ms) for work; an empty list
   * when the wait ended without any. Admin and worker keys only; 404 for a queue that does not
   * exist yet.
   */
  async lease(req: LeaseRequest, call?: CallOptions): Promise<LeasedTask[]> {
    const waitMs = req.waitMs ?? 0;
    const body: LeaseBody = { worker: req.worker, queues: req.queues, count: req.count ?? 1, wait_ms: waitMs, tenants: req.tenants };
    const { body: answer } = await this.transport.request<Leases>({
      method: "POST",
      path: "/leases",
      body,
      retry: "always",
      call,
      extraTimeoutMs: waitMs,
    });
    return answer.tasks;
  }

  /** Extend a lease to now plus `extendMs` (ms, 1000..3600000; default the task's lease_ms). */
  async heartbeat(id: string, queue: string, token: string, extendMs?: number, call?: CallOptions): Promise<Heartbeat> {
    const body: HeartbeatBody = { queue, token, extend_ms: extendMs };
    return (await this.transport.request<Heartbeat>({ method: "POST", path: `/leases/${seg(id)}/heartbeat`, body, retry: "always", call })).body;
  }

  /** Complete a leased task with `result` (any JSON, at most 1 MiB; default null). Safe to resend. */
  async complete(id: string, queue: string, token: string, result: unknown = null, call?: CallOptions): Promise<Report> {
    const body: CompleteBody = { queue, token, result: result === undefined ? null : result };
    return (await this.transport.request<Report>({ method: "POST", path: `/leases/${seg(id)}/complete`, body, retry: "always", call })).body;
  }

  /**
   * Complete several leased tasks of `queue` in one call (1..100; each result at most 1 MiB, 4 MiB
   * in all). Each is applied or refused on its own: the answer holds, in order, `"applied"` /
   * `"already_applied"` or the error its own {@link Client.complete} would have rejected with
   * (`LeaseLost`, `TaskCancelled`, `NotFound`). A refusal of the whole call (503, 400, 413, ...)
   * rejects, and applied nothing. Safe to resend.
   */
  async completeMany(
    queue: string,
    completions: { id: string; token: string; result?: unknown }[],
    call?: CallOptions,
  ): Promise<(Report["reported"] | OrqError)[]> {
    const body: CompleteManyBody = {
      queue,
      completions: completions.map((c) => ({ id: c.id, token: c.token, result: c.result === undefined ? null : c.result })),
    };
    const { body: answer } = await this.transport.request<CompleteManyAnswer>({ method: "POST", path: "/leases/complete", body, retry: "always", call });
    return answer.reports.map((r) =>
      r.reported != null ? r.reported : errorFromAnswer(ITEM_STATUS[r.error?.code ?? ""] ?? 409, JSON.stringify({ error: r.error }), null),
    );
  }

  /**
   * Fail a leased task with `error` (non-empty, at most 65536 bytes): retried with its backoff
   * while it has retries left, else (or when `permanent`) dead. Safe to resend.
   */
  async fail(id: string, queue: string, token: string, error: string, opts: FailOptions = {}, call?: CallOptions): Promise<Report> {
    const body: FailBody = { queue, token, error, permanent: opts.permanent ?? false };
    return (await this.transport.request<Report>({ method: "POST", path: `/leases/${seg(id)}/fail`, body, retry: "always", call })).body;
  }

  /** Give a leased task back without spending an attempt; it is ready again at once. Safe to resend. */
  async release(id: string, queue: string, token: string, call?: CallOptions): Promise<Report> {
    const body: ReleaseBody = { queue, token };
    return (await this.transport.request<Report>({ method: "POST", path: `/leases/${seg(id)}/release`, body, retry: "always", call })).body;
  }
}
