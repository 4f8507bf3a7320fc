/**
 * One leased task on a worker, from lease to outcome: runs its handler with a {@link Job},
 * heartbeats at the lease's `heartbeat_ms`, aborts the job's signal on cancel, lease loss,
 * timeout or shutdown, and reports the outcome (complete, fail, release), retrying transient
 * failures until the lease's deadline has passed, heartbeating meanwhile (the orq worker's rule:
 * a refusal shorter than the lease never makes the task run twice).
 */
import type { Client } from "./client.js";
import type { Completer } from "./completer.js";
import { LeaseLost, OrqError, PayloadTooLarge, TaskCancelled } from "./errors.js";
import { backoffMs, sleep } from "./http.js";
import { Permanent, type AbortReason, type Handler, type Job } from "./job.js";
import type { Logger } from "./logger.js";
import type { LeasedTask, Report } from "./types.js";

/** Most characters of an error message sent with a fail (the API takes 65536 bytes). */
const ERROR_MAX_CHARS = 16_000;
/** First wait before resending a report (ms); doubles per try, with jitter. */
const REPORT_RETRY_BASE_MS = 100;
/** Cap on one wait before resending a report (ms). */
const REPORT_RETRY_MAX_MS = 5_000;

/** What a running task needs from its worker. */
export interface RunContext {
  /** The client the worker talks through. */
  client: Client;
  /** Where to log. */
  logger: Logger;
  /** The worker's id, for messages. */
  workerId: string;
  /** Sends completions together (none: each alone). */
  completer?: Completer;
}

/** The text of a failure sent with `fail`: never empty, at most {@link ERROR_MAX_CHARS} characters. */
export function errorText(err: unknown): string {
  let text: string;
  if (err instanceof Permanent) text = err.message || "Permanent";
  else if (err instanceof Error) text = err.message ? `${err.name}: ${err.message}` : err.name;
  else if (typeof err === "string") text = err;
  else {
    try {
      text = JSON.stringify(err) ?? String(err);
    } catch {
      text = String(err);
    }
  }
  if (text.trim() === "") text = "the handler failed without a message";
  return text.length > ERROR_MAX_CHARS ? text.slice(0, ERROR_MAX_CHARS) : text;
}

/** `value` as a JSON result (and its size as JSON, bytes): undefined becomes null; refuses what JSON cannot carry. */
export function jsonResult(value: unknown): { ok: true; value: unknown; bytes: number } | { ok: false; why: string } {
  if (value === undefined) return { ok: true, value: null, bytes: 4 };
  try {
    const text = JSON.stringify(value);
    if (text === undefined) return { ok: false, why: `a ${typeof value} is not JSON` };
    return { ok: true, value, bytes: Buffer.byteLength(text) };
  } catch (err) {
    return { ok: false, why: errorText(err) };
  }
}

/** One leased task and its handler. */
export class RunningTask {
  /** Resolves once the handler has returned or thrown (its slot is free then). */
  readonly handlerDone: Promise<void>;
  /** Resolves once this worker owes the task nothing more (outcome reported, or dropped). */
  readonly finished: Promise<void>;
  /** True once the handler has returned or thrown. */
  handlerSettled = false;

  private readonly abort = new AbortController();
  /** The lease's deadline by the local monotonic clock (`performance.now()`, ms). */
  private deadline: number;
  /** True once the outcome is decided (by the handler, a drop, the timeout or shutdown). */
  private decided = false;
  /** True once the worker owes the lease nothing more (reported, given up, or dropped): no more heartbeats. */
  private beatsOver = false;
  /** The heartbeat in flight, if any (a report waits for its answer before giving up). */
  private beating: Promise<void> | undefined;
  private beatTimer: NodeJS.Timeout | undefined;
  private timeoutTimer: NodeJS.Timeout | undefined;
  private resolveFinished!: () => void;
  private resolveHandlerDone!: () => void;

  /** Start `task` with `handler` (undefined: no handler for its type). */
  constructor(
    private readonly ctx: RunContext,
    private readonly task: LeasedTask,
    handler: Handler | undefined,
    handlerTypes: string[],
  ) {
    // From the moment the lease's answer arrived (the call may have waited for work before the
    // store leased), by the monotonic clock.
    this.deadline = performance.now() + task.lease_ms;
    this.finished = new Promise((r) => (this.resolveFinished = r));
    this.handlerDone = new Promise((r) => (this.resolveHandlerDone = r));
    this.scheduleBeat(task.heartbeat_ms);
    if (task.timeout_ms !== null && task.timeout_ms !== undefined) {
      this.timeoutTimer = setTimeout(() => this.onTimeout(), task.timeout_ms);
    }
    void this.runHandler(handler, handlerTypes);
  }

  /** Fields naming this task in log entries. */
  private get fields(): Record<string, unknown> {
    return { task: this.task.id, queue: this.task.queue, type: this.task.type, attempt: this.task.attempt };
  }

  /** Run the handler, then start reporting what it did (unless the outcome was decided meanwhile). */
  private async runHandler(handler: Handler | undefined, handlerTypes: string[]): Promise<void> {
    const t = this.task;
    if (handler === undefined) {
      this.settleHandler();
      const known = handlerTypes.length ? handlerTypes.join(", ") : "none";
      const msg = `no handler for type ${t.type} on worker ${this.ctx.workerId} (handlers: ${known})`;
      this.ctx.logger.warn("no handler for this task's type; failing it (retryable)", this.fields);
      return void this.decide(() => this.report("fail", (c) => this.ctx.client.fail(t.id, t.queue, t.token, msg, {}, c)));
    }
    const job: Job = {
      id: t.id,
      queue: t.queue,
      tenant: t.tenant,
      type: t.type,
      payload: t.payload,
      attempt: t.attempt,
      maxRetries: t.max_retries,
      epoch: t.epoch,
      token: t.token,
      leaseMs: t.lease_ms,
      timeoutMs: t.timeout_ms ?? null,
      priority: t.priority,
      createdAt: t.created_at,
      traceparent: t.traceparent ?? null,
      tracestate: t.tracestate ?? null,
      signal: this.abort.signal,
    };
    let outcome: { ok: true; value: unknown } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await handler(job) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    this.settleHandler();
    if (this.decided) {
      const what = outcome.ok ? "returned" : `threw ${errorText(outcome.error)}`;
      this.ctx.logger.warn(`handler ${what} after its task was given up (${String(this.abort.signal.reason)}); outcome not reported`, this.fields);
      return;
    }
    if (!outcome.ok) {
      const permanent = outcome.error instanceof Permanent;
      const text = errorText(outcome.error);
      this.ctx.logger.warn(`handler failed${permanent ? " permanently" : ""}`, { ...this.fields, error: text });
      return void this.decide(() => this.report("fail", (c) => this.ctx.client.fail(t.id, t.queue, t.token, text, { permanent }, c)));
    }
    const result = jsonResult(outcome.value);
    if (!result.ok) {
      const text = `the handler's result is not JSON-serialisable: ${result.why}`;
      this.ctx.logger.error(text + "; failing the task permanently", this.fields);
      return void this.decide(() => this.report("fail", (c) => this.ctx.client.fail(t.id, t.queue, t.token, text, { permanent: true }, c)));
    }
    return void this.decide(() => this.completeWith(result.value, result.bytes));
  }

  /**
   * Complete with `value` (`bytes` as JSON): with the worker's other completions when it can
   * ({@link Completer}), else alone; a result over the server's limit fails the task permanently
   * instead.
   */
  private async completeWith(value: unknown, bytes: number): Promise<void> {
    const t = this.task;
    const together = await this.ctx.completer?.complete(t.queue, t.id, t.token, value, bytes);
    if (together !== undefined) {
      this.ctx.logger.debug(`complete ${together}`, this.fields);
      return;
    }
    try {
      await this.report("complete", (c) => this.ctx.client.complete(t.id, t.queue, t.token, value, c), true);
    } catch (err) {
      const text = `the handler's result was refused: ${errorText(err)}`;
      this.ctx.logger.error(text + "; failing the task permanently", this.fields);
      await this.report("fail", (c) => this.ctx.client.fail(t.id, t.queue, t.token, text, { permanent: true }, c));
    }
  }

  /** Mark the handler as returned. */
  private settleHandler(): void {
    this.handlerSettled = true;
    clearTimeout(this.timeoutTimer);
    this.resolveHandlerDone();
  }

  /** Decide the outcome (once): stop the timeout, run `send` (heartbeats go on), then stop them. */
  private async decide(send: () => Promise<void>): Promise<void> {
    if (this.decided) return;
    this.decided = true;
    clearTimeout(this.timeoutTimer);
    try {
      await send();
    } catch (err) {
      this.ctx.logger.error("reporting the outcome failed", { ...this.fields, error: err });
    } finally {
      this.stopTimers();
      this.resolveFinished();
    }
  }

  /** Stop heartbeating and the timeout. */
  private stopTimers(): void {
    this.beatsOver = true;
    clearTimeout(this.beatTimer);
    clearTimeout(this.timeoutTimer);
  }

  /**
   * Send a report (complete, fail, release), resending on transient errors until the lease's
   * deadline has passed. A lost lease or a cancelled task is logged and dropped. With
   * `throwTooLarge`, a 413 is thrown to the caller instead of being logged.
   */
  private async report(kind: string, send: (call: { retries: number }) => Promise<Report>, throwTooLarge = false): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      try {
        const r = await send({ retries: 0 });
        this.ctx.logger.debug(`${kind} ${r.reported}`, this.fields);
        return;
      } catch (err) {
        if (err instanceof LeaseLost || err instanceof TaskCancelled) {
          this.ctx.logger.warn(`${kind} not applied: ${err.message}; dropping the task`, this.fields);
          return;
        }
        if (throwTooLarge && err instanceof PayloadTooLarge) throw err;
        let left = this.deadline - performance.now();
        // A heartbeat out now may answer that the lease lives on (its deadline was an estimate):
        // wait for it before giving up, or the worker would hold a live lease and report nothing.
        if (left <= 0 && this.beating !== undefined) {
          await this.beating;
          left = this.deadline - performance.now();
        }
        if (!(err instanceof OrqError && err.transient) || left <= 0) {
          const why = err instanceof OrqError && err.transient ? "the lease's deadline has passed" : "not a transient error";
          this.ctx.logger.error(`${kind} failed, giving up (${why}); the server retries the task once its lease expires`, { ...this.fields, error: err });
          return;
        }
        const wait = Math.min(left, backoffMs(attempt, REPORT_RETRY_BASE_MS, REPORT_RETRY_MAX_MS, err.retryAfterMs));
        this.ctx.logger.warn(`${kind} failed, sending it again in ${Math.round(wait)} ms`, { ...this.fields, error: err });
        await sleep(wait);
      }
    }
  }

  /** Heartbeat after `ms`. */
  private scheduleBeat(ms: number): void {
    this.beatTimer = setTimeout(() => {
      const beat = this.beat().finally(() => {
        if (this.beating === beat) this.beating = undefined;
      });
      this.beating = beat;
    }, Math.max(0, ms));
  }

  /**
   * Extend the lease; learn of a cancel or a lost lease; retry a transient failure sooner. While
   * the outcome is being reported, a refusal is left to the report, which hears it too.
   */
  private async beat(): Promise<void> {
    if (this.beatsOver) return;
    const t = this.task;
    const sentAt = performance.now();
    try {
      // A heartbeat slower than half the time left is given up, leaving time to try again.
      const timeoutMs = Math.max(500, Math.floor((this.deadline - sentAt) / 2));
      const hb = await this.ctx.client.heartbeat(t.id, t.queue, t.token, undefined, { retries: 0, timeoutMs });
      // `lease_left_ms` is counted from when the store ran the heartbeat, which answered at once:
      // reckon from the answer's arrival (from the request, a slow call would make the deadline
      // look earlier than it is; the simulator's pull worker showed that, design note 59).
      this.deadline = performance.now() + hb.lease_left_ms;
      this.ctx.logger.debug("heartbeat", { ...this.fields, lease_left_ms: hb.lease_left_ms });
      if (!this.beatsOver) this.scheduleBeat(t.heartbeat_ms);
    } catch (err) {
      if (this.beatsOver) return;
      const lost = err instanceof TaskCancelled || err instanceof LeaseLost;
      // Reporting: the report hears the same answer and decides.
      if (this.decided && lost) return;
      if (err instanceof TaskCancelled) return this.drop("cancelled", err.message);
      if (err instanceof LeaseLost) return this.drop("lease_lost", err.message);
      const left = this.deadline - performance.now();
      if (left <= 0 && this.decided) return;
      if (left <= 0) return this.drop("lease_lost", `no heartbeat got through before the lease's deadline (${errorText(err)})`);
      const transient = err instanceof OrqError && err.transient;
      const next = transient ? Math.min(t.heartbeat_ms, left / 2) : t.heartbeat_ms;
      this.ctx.logger.warn(`heartbeat failed, trying again in ${Math.round(next)} ms`, { ...this.fields, error: err, lease_left_ms: left });
      this.scheduleBeat(next);
    }
  }

  /** Give the task up without reporting (cancelled, or the lease is gone): abort the handler. */
  private drop(reason: AbortReason, why: string): void {
    if (this.decided) return;
    this.decided = true;
    this.stopTimers();
    this.ctx.logger.warn(`task ${reason === "cancelled" ? "cancelled" : "lease lost"}: ${why}; aborting the handler`, this.fields);
    this.abort.abort(reason);
    this.resolveFinished();
  }

  /** The task's `timeout_ms` passed: abort the handler and fail the attempt (retryable). */
  private onTimeout(): void {
    if (this.decided || this.handlerSettled) return;
    const t = this.task;
    const text = `timeout: the handler ran longer than timeout_ms=${t.timeout_ms}`;
    this.ctx.logger.warn(text + "; aborting it and failing the attempt", this.fields);
    void this.decide(async () => {
      this.abort.abort("timeout" satisfies AbortReason);
      await this.report("fail", (c) => this.ctx.client.fail(t.id, t.queue, t.token, text, {}, c));
    });
  }

  /** Shutdown stops waiting for the handler: abort it and release the task (no attempt spent). */
  giveUp(): void {
    if (this.decided || this.handlerSettled) return;
    const t = this.task;
    this.ctx.logger.warn("shutdown grace is over; aborting the handler and releasing the task", this.fields);
    void this.decide(async () => {
      this.abort.abort("shutdown" satisfies AbortReason);
      await this.report("release", (c) => this.ctx.client.release(t.id, t.queue, t.token, c));
    });
  }

  /** Release the task without running it (leased after shutdown began). */
  static async releaseUnrun(ctx: RunContext, task: LeasedTask): Promise<void> {
    try {
      await ctx.client.release(task.id, task.queue, task.token);
      ctx.logger.info("released a task leased as shutdown began", { task: task.id, queue: task.queue });
    } catch (err) {
      ctx.logger.error("could not release a task leased as shutdown began; it runs again once its lease expires", { task: task.id, queue: task.queue, error: err });
    }
  }
}
