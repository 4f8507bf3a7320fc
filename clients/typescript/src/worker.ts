/**
 * `Worker`: runs handlers for tasks of some queues over the worker protocol. One long-poll lease
 * loop asks for as many tasks as there are free slots; each task runs as a {@link RunningTask}
 * (heartbeats, abort signal, outcome report). `run()` resolves after `stop()` or SIGTERM/SIGINT,
 * once running handlers finished within the grace or were released.
 */
import { hostname } from "node:os";
import { Client } from "./client.js";
import { BadRequest, Forbidden, NotFound, OrqError, Unauthorized } from "./errors.js";
import { backoffMs, sleep } from "./http.js";
import type { Handler } from "./job.js";
import { stderrLogger, type Logger } from "./logger.js";
import { Completer } from "./completer.js";
import { RunningTask, type RunContext } from "./running.js";
import type { LeasedTask } from "./types.js";

/** Options of a {@link Worker}. */
export interface WorkerOptions {
  /** The server's address, e.g. `http://127.0.0.1:8080`. */
  url: string;
  /** A worker or admin API key. */
  apiKey?: string;
  /** The queues to take tasks from (1..16). */
  queues: string[];
  /** Take only these tenants' tasks (1..16; default: every tenant's, or those the worker key is limited to). */
  tenants?: string[];
  /** Most handlers running at once (default 4). */
  concurrency?: number;
  /** This worker's id, `[A-Za-z0-9._-]{1,64}` (default: host name and process id). */
  workerId?: string;
  /** How long one lease call waits for work (ms, 0..30000; default 20000). */
  waitMs?: number;
  /** On stop, how long running handlers may take to finish before they are released (ms; default 30000). */
  shutdownGraceMs?: number;
  /** Where to log (default: lines on stderr). */
  logger?: Logger;
  /** Stop on SIGTERM and SIGINT while running (default true); a second signal ends the grace at once. */
  handleSignals?: boolean;
  /** Pause before leasing again after a 404 for a queue that does not exist yet (ms; default 5000). */
  unknownQueuePauseMs?: number;
  /** Time limit of each request (ms; default 30000); a lease adds its wait. */
  timeoutMs?: number;
  /** The `fetch` to use (default: Node's built-in one). */
  fetch?: typeof fetch;
}

/** The form of a worker id. */
const WORKER_ID = /^[A-Za-z0-9._-]{1,64}$/;
/** Most tasks one lease call may ask for. */
const LEASE_COUNT_MAX = 100;
/** First pause after a failed lease call (ms); doubles per failure, with jitter. */
const LEASE_RETRY_BASE_MS = 500;
/** Cap on the pause after a failed lease call (ms), unless `Retry-After` asks for longer. */
const LEASE_RETRY_MAX_MS = 10_000;
/**
 * Least time between the starts of two lease calls that both came back empty (ms): a server
 * that answers at once (waitMs 0, or shutting down) is not polled in a busy loop.
 */
const EMPTY_LEASE_MIN_INTERVAL_MS = 1_000;

/** The default worker id: host name and process id, made to fit the id's form. */
function defaultWorkerId(): string {
  const host = hostname().replace(/[^A-Za-z0-9._-]/g, "-").slice(0, 40) || "node";
  return `${host}-${process.pid}`;
}

/** Runs handlers for the tasks of some queues. */
export class Worker {
  /** This worker's id, as recorded on its leases. */
  readonly id: string;
  /** The client the worker talks through. */
  readonly client: Client;

  private readonly queues: string[];
  private readonly tenants: string[] | undefined;
  private readonly concurrency: number;
  private readonly waitMs: number;
  private readonly graceMs: number;
  private readonly unknownQueuePauseMs: number;
  private readonly handleSignals: boolean;
  private readonly logger: Logger;
  private readonly handlers = new Map<string, Handler>();
  private readonly tasks = new Set<RunningTask>();
  private active = 0;
  private stopping = false;
  private running: Promise<void> | null = null;
  /** Aborts the lease call in flight and the loop's pauses when stop begins. */
  private stopLeasing = new AbortController();
  /** Aborts the shutdown grace (a second signal). */
  private endGrace = new AbortController();
  /** Wakes the lease loop when a slot frees or stop begins. */
  private wake: (() => void) | null = null;

  /** A worker for `opts.queues`; add handlers with {@link Worker.handle}, then {@link Worker.run}. */
  constructor(opts: WorkerOptions) {
    if (!Array.isArray(opts.queues) || opts.queues.length === 0) throw new TypeError("Worker: queues must name at least one queue");
    this.id = opts.workerId ?? defaultWorkerId();
    if (!WORKER_ID.test(this.id)) throw new TypeError(`Worker: workerId must match ${WORKER_ID.source}`);
    this.concurrency = opts.concurrency ?? 4;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) throw new TypeError("Worker: concurrency must be a positive integer");
    this.queues = [...opts.queues];
    this.tenants = opts.tenants === undefined ? undefined : [...opts.tenants];
    this.waitMs = opts.waitMs ?? 20_000;
    this.graceMs = opts.shutdownGraceMs ?? 30_000;
    this.unknownQueuePauseMs = opts.unknownQueuePauseMs ?? 5_000;
    this.handleSignals = opts.handleSignals ?? true;
    this.logger = opts.logger ?? stderrLogger();
    this.client = new Client({ url: opts.url, apiKey: opts.apiKey, timeoutMs: opts.timeoutMs, fetch: opts.fetch });
  }

  /** Run `handler` for tasks of `type` (replacing any earlier one); returns the worker. */
  handle<P = any, R = unknown>(type: string, handler: Handler<P, R>): this {
    this.handlers.set(type, handler as Handler);
    return this;
  }

  /** Handlers running now. */
  get busy(): number {
    return this.active;
  }

  /**
   * Lease and run tasks until {@link Worker.stop} (or SIGTERM/SIGINT). Resolves once leasing has
   * stopped and every task is reported or released; rejects when leasing cannot go on (a 401,
   * 403 or 400 on the lease call), after the same shutdown.
   */
  run(): Promise<void> {
    if (this.running) return Promise.reject(new Error("Worker: already running"));
    this.stopping = false;
    this.stopLeasing = new AbortController();
    this.endGrace = new AbortController();
    this.running = this.main().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  /** Begin shutdown: stop leasing, let handlers finish within the grace. Resolves when run() does. */
  async stop(): Promise<void> {
    this.beginStop();
    await this.running?.catch(() => undefined);
  }

  /** Stop leasing now (idempotent). */
  private beginStop(): void {
    if (this.stopping) return;
    this.stopping = true;
    this.stopLeasing.abort(new Error("worker stopping"));
    this.wake?.();
  }

  /** The worker's life: signals, lease loop, drain. */
  private async main(): Promise<void> {
    const onSignal = (sig: NodeJS.Signals) => {
      if (this.stopping) {
        this.logger.warn(`${sig} again: ending the shutdown grace now`, { worker: this.id });
        this.endGrace.abort();
        return;
      }
      this.logger.info(`${sig}: stopping (handlers have ${this.graceMs} ms to finish)`, { worker: this.id });
      this.beginStop();
    };
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    this.logger.info("worker started", { worker: this.id, queues: this.queues, concurrency: this.concurrency });
    let fatal: unknown = undefined;
    try {
      await this.leaseLoop();
    } catch (err) {
      fatal = err;
      this.beginStop();
    }
    try {
      await this.drain();
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    this.logger.info("worker stopped", { worker: this.id });
    if (fatal !== undefined) throw fatal;
  }

  /** Lease as many tasks as there are free slots, long-polling, until stop; throws on a fatal error. */
  private async leaseLoop(): Promise<void> {
    const ctx: RunContext = { client: this.client, logger: this.logger, workerId: this.id, completer: new Completer(this.client, this.logger) };
    for (let failures = 0; !this.stopping; ) {
      await this.slotFree();
      if (this.stopping) break;
      const count = Math.min(LEASE_COUNT_MAX, this.concurrency - this.active);
      let leased: LeasedTask[];
      const startedAt = Date.now();
      try {
        leased = await this.client.lease(
          { worker: this.id, queues: this.queues, count, waitMs: this.waitMs, tenants: this.tenants },
          { signal: this.stopLeasing.signal, retries: 0 },
        );
        failures = 0;
      } catch (err) {
        if (this.stopping) break;
        if (err instanceof Unauthorized || err instanceof Forbidden || err instanceof BadRequest) {
          this.logger.error("lease refused; the worker stops", { worker: this.id, queues: this.queues, error: err });
          throw err;
        }
        if (err instanceof NotFound) {
          this.logger.warn(`lease: ${err.message}; trying again in ${this.unknownQueuePauseMs} ms`, { worker: this.id, queues: this.queues });
          await this.pause(this.unknownQueuePauseMs);
          continue;
        }
        const retryAfter = err instanceof OrqError ? err.retryAfterMs : null;
        const wait = backoffMs(failures++, LEASE_RETRY_BASE_MS, LEASE_RETRY_MAX_MS, retryAfter);
        this.logger.warn(`lease failed; trying again in ${Math.round(wait)} ms`, { worker: this.id, error: err });
        await this.pause(wait);
        continue;
      }
      if (this.stopping) {
        await Promise.all(leased.map((t) => RunningTask.releaseUnrun(ctx, t)));
        break;
      }
      for (const task of leased) this.start(ctx, task);
      const elapsed = Date.now() - startedAt;
      if (leased.length === 0 && elapsed < EMPTY_LEASE_MIN_INTERVAL_MS) await this.pause(EMPTY_LEASE_MIN_INTERVAL_MS - elapsed);
    }
  }

  /** Run one leased task in a slot. */
  private start(ctx: RunContext, task: LeasedTask): void {
    this.active++;
    this.logger.debug("leased", { task: task.id, queue: task.queue, type: task.type, attempt: task.attempt });
    const rt = new RunningTask(ctx, task, this.handlers.get(task.type), [...this.handlers.keys()]);
    this.tasks.add(rt);
    void rt.handlerDone.then(() => {
      this.active--;
      this.wake?.();
    });
    void Promise.all([rt.handlerDone, rt.finished]).then(() => this.tasks.delete(rt));
  }

  /** Resolves when a slot is free or stop began. */
  private slotFree(): Promise<void> {
    if (this.active < this.concurrency || this.stopping) return Promise.resolve();
    return new Promise((resolve) => {
      this.wake = () => {
        if (this.active < this.concurrency || this.stopping) {
          this.wake = null;
          resolve();
        }
      };
    });
  }

  /** Sleep `ms`, cut short by stop. */
  private async pause(ms: number): Promise<void> {
    await sleep(ms, this.stopLeasing.signal).catch(() => undefined);
  }

  /** After leasing stopped: wait for handlers up to the grace, release the rest, await every report. */
  private async drain(): Promise<void> {
    const all = () => Promise.all([...this.tasks].map((t) => Promise.all([t.handlerDone, t.finished])));
    if (this.tasks.size > 0) {
      this.logger.info(`waiting up to ${this.graceMs} ms for ${this.active} running handler(s)`, { worker: this.id });
      const cut = new AbortController();
      const endGrace = () => cut.abort();
      this.endGrace.signal.addEventListener("abort", endGrace, { once: true });
      const grace = sleep(this.graceMs, cut.signal).catch(() => undefined);
      await Promise.race([all(), grace]);
      cut.abort();
      this.endGrace.signal.removeEventListener("abort", endGrace);
    }
    for (const t of this.tasks) t.giveUp();
    await Promise.all([...this.tasks].map((t) => t.finished));
  }
}
