/**
 * Transport: one JSON request to the API with a time limit per attempt, typed errors, and
 * retries with exponential backoff and jitter that honour `Retry-After`, only where safe.
 */
import { ConnectionFailed, OrqError, ServerError, errorFromAnswer } from "./errors.js";
import type { CallOptions } from "./types.js";

/** Options of a {@link Transport}. */
export interface TransportOptions {
  /** The server's address, e.g. `http://127.0.0.1:8080` (a trailing `/api/v1` is accepted). */
  url: string;
  /** An API key, sent as `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** Time limit of each attempt (ms), answer body included. */
  timeoutMs: number;
  /** Retries on transient errors after the first attempt, where the call allows them. */
  retries: number;
  /** First retry wait (ms); each next one doubles, up to `retryMaxMs`, with jitter. */
  retryBaseMs?: number;
  /** Cap on one retry wait (ms), unless `Retry-After` asks for longer. */
  retryMaxMs?: number;
  /** The `fetch` to use (default: Node's built-in one). */
  fetch?: typeof fetch;
}

/**
 * When a call may be sent again after a transient error: `always` (reads, cancels, leases,
 * protocol reports, submits with an idempotency key), or `unsent` (only when the request
 * certainly never reached the server: a refused connection).
 */
export type RetryPolicy = "always" | "unsent";

/** One call of the API. */
export interface RequestSpec {
  /** The HTTP method. */
  method: "GET" | "POST" | "DELETE";
  /** The path under `/api/v1`, starting with `/` (segments already encoded). */
  path: string;
  /** Query parameters; undefined and null ones are left out. */
  query?: Record<string, string | number | boolean | null | undefined>;
  /** The JSON body, if any. */
  body?: unknown;
  /** When the call may be retried. */
  retry: RetryPolicy;
  /** The caller's per-call options. */
  call?: CallOptions;
  /** Time added to each attempt's limit (ms), for a long poll's wait. */
  extraTimeoutMs?: number;
}

/** A successful answer: its status and parsed JSON body. */
export interface Answer<T> {
  /** The HTTP status (2xx). */
  status: number;
  /** The parsed body. */
  body: T;
}

/** Error codes of a connection that certainly did not carry the request. */
const NOT_SENT_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT",
]);

/** The library's version, sent in `User-Agent`. */
const USER_AGENT = "orq-client-ts/0.1.0";

/** Sleep `ms` milliseconds; rejects with the signal's reason when it aborts first. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, Math.max(0, ms));
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * The wait before retry number `attempt` (0 for the first retry), in ms: `baseMs * 2^attempt`
 * capped at `maxMs`, jittered down to half of it at random, and at least `retryAfterMs`.
 */
export function backoffMs(attempt: number, baseMs: number, maxMs: number, retryAfterMs: number | null): number {
  const full = Math.min(maxMs, baseMs * 2 ** attempt);
  const jittered = full / 2 + Math.random() * (full / 2);
  return Math.max(jittered, retryAfterMs ?? 0);
}

/** The error codes in a failed fetch's cause (an AggregateError carries one per address). */
function causeCodes(err: unknown): string[] {
  const cause = (err as { cause?: { code?: unknown; errors?: unknown } } | null)?.cause;
  if (cause === undefined || cause === null) return [];
  const inner = Array.isArray(cause.errors) ? (cause.errors as { code?: unknown }[]) : [];
  const codes = inner.map((e) => e?.code).filter((c): c is string => typeof c === "string");
  if (codes.length === 0 && typeof cause.code === "string") codes.push(cause.code);
  return codes;
}

/** True when a failed fetch certainly never sent its request (every address refused, ...). */
export function neverSent(err: unknown): boolean {
  const codes = causeCodes(err);
  return codes.length > 0 && codes.every((c) => NOT_SENT_CODES.has(c));
}

/** True for a fetch that failed on the network (not a bug such as a bad header value). */
function isNetworkError(err: unknown): boolean {
  const e = err as { message?: unknown; cause?: unknown; code?: unknown } | null;
  return e?.message === "fetch failed" || (e?.cause !== undefined && e?.cause !== null) || typeof e?.code === "string";
}

/** What went wrong in a failed fetch, for people. */
function describe(err: unknown): string {
  const codes = causeCodes(err);
  const cause = (err as { cause?: { message?: unknown } } | null)?.cause;
  const why = typeof cause?.message === "string" && cause.message !== "" ? cause.message : String(err);
  return codes.length > 0 && !why.includes(codes[0]!) ? `${codes.join(", ")}: ${why}` : why;
}

/** Marks an attempt that ran out of time (told apart from the caller's own abort). */
class AttemptTimeout extends Error {}

/** Sends requests to one orq server. */
export class Transport {
  /** The API's base address, ending in `/api/v1`. */
  readonly base: string;
  private readonly opts: Required<Omit<TransportOptions, "apiKey">> & { apiKey?: string };

  /** A transport for `opts.url`. */
  constructor(opts: TransportOptions) {
    const root = opts.url.replace(/\/+$/, "").replace(/\/api\/v1$/, "");
    this.base = `${root}/api/v1`;
    this.opts = {
      url: opts.url,
      apiKey: opts.apiKey,
      timeoutMs: opts.timeoutMs,
      retries: opts.retries,
      retryBaseMs: opts.retryBaseMs ?? 200,
      retryMaxMs: opts.retryMaxMs ?? 10_000,
      fetch: opts.fetch ?? globalThis.fetch.bind(globalThis),
    };
  }

  /** Send `spec`, retrying transient failures where its policy allows; the answer or an {@link OrqError}. */
  async request<T>(spec: RequestSpec): Promise<Answer<T>> {
    const retries = spec.call?.retries ?? this.opts.retries;
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once<T>(spec);
      } catch (err) {
        if (!(err instanceof OrqError) || attempt >= retries || !mayRetry(err, spec.retry)) throw err;
        const wait = backoffMs(attempt, this.opts.retryBaseMs, this.opts.retryMaxMs, err.retryAfterMs);
        await sleep(wait, spec.call?.signal);
      }
    }
  }

  /** One attempt of `spec`. */
  private async once<T>(spec: RequestSpec): Promise<Answer<T>> {
    const url = new URL(this.base + spec.path);
    for (const [k, v] of Object.entries(spec.query ?? {})) {
      if (v !== undefined && v !== null) url.searchParams.set(k, String(v));
    }
    const headers: Record<string, string> = { accept: "application/json", "user-agent": USER_AGENT };
    if (this.opts.apiKey) headers.authorization = `Bearer ${this.opts.apiKey}`;
    let body: string | undefined;
    if (spec.body !== undefined) {
      body = JSON.stringify(spec.body);
      headers["content-type"] = "application/json";
    }
    const limitMs = (spec.call?.timeoutMs ?? this.opts.timeoutMs) + (spec.extraTimeoutMs ?? 0);
    const outer = spec.call?.signal;
    if (outer?.aborted) throw outer.reason;
    const ac = new AbortController();
    const onAbort = () => ac.abort(outer!.reason);
    outer?.addEventListener("abort", onAbort, { once: true });
    const timer = setTimeout(() => ac.abort(new AttemptTimeout()), limitMs);
    let status: number;
    let text: string;
    let retryAfter: string | null;
    try {
      const res = await this.opts.fetch(url, { method: spec.method, headers, body, signal: ac.signal });
      status = res.status;
      retryAfter = res.headers.get("retry-after");
      text = await res.text();
    } catch (err) {
      if (outer?.aborted) throw outer.reason;
      const where = `${spec.method} ${url.pathname}`;
      if (ac.signal.reason instanceof AttemptTimeout) {
        throw new ConnectionFailed(`${where}: no answer within ${limitMs} ms`, true, err);
      }
      if (!isNetworkError(err)) throw err;
      throw new ConnectionFailed(`${where}: ${describe(err)}`, !neverSent(err), err);
    } finally {
      clearTimeout(timer);
      outer?.removeEventListener("abort", onAbort);
    }
    if (status < 200 || status > 299) throw errorFromAnswer(status, text, retryAfter);
    try {
      return { status, body: (text === "" ? undefined : JSON.parse(text)) as T };
    } catch (err) {
      throw new ServerError({ code: "bad_answer", status, message: `answer is not JSON: ${text.slice(0, 200)}`, cause: err });
    }
  }
}

/** True when `err` may be retried under `policy`. */
function mayRetry(err: OrqError, policy: RetryPolicy): boolean {
  if (!err.transient) return false;
  if (policy === "always") return true;
  return err instanceof ConnectionFailed && !err.sent;
}
