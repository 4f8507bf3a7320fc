/**
 * Typed errors. Every failed call rejects with an {@link OrqError}: the API's error answers
 * (`{"error": {"code", "message"}}`) become one subclass per family of codes, and a request that
 * got no answer becomes {@link ConnectionFailed}. Catch a family with `instanceof`.
 */
import type { ErrorCode } from "./types.js";

/** The code of an error the client makes itself: no answer came (see {@link ConnectionFailed}). */
export type ClientErrorCode = "connection_failed";

/** What {@link OrqError} takes. */
export interface OrqErrorInit {
  /** The API's error code, or `connection_failed`; an unknown code from a newer server is kept. */
  code: ErrorCode | ClientErrorCode | (string & {});
  /** The HTTP status (0 when no answer came). */
  status: number;
  /** What went wrong, as the server said it. */
  message: string;
  /** How long the server asked to wait before trying again (ms), from `Retry-After`. */
  retryAfterMs?: number | null;
  /** The underlying error, if any. */
  cause?: unknown;
}

/** The codes worth sending the same request again for: the condition passes. */
const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  "connection_failed",
  "unavailable",
  "store_unavailable",
  "limited",
  "request_timeout",
]);

/** The base of every error of this library. */
export class OrqError extends Error {
  /** The API's error code (`bad_request`, `lease_lost`, ...) or `connection_failed`. */
  readonly code: string;
  /** The HTTP status of the answer; 0 when no answer came. */
  readonly status: number;
  /** The wait the server asked for before a retry (ms, from `Retry-After`), or null. */
  readonly retryAfterMs: number | null;

  /** Make an error from its code, status and message. */
  constructor(init: OrqErrorInit) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.code = init.code;
    this.status = init.status;
    this.retryAfterMs = init.retryAfterMs ?? null;
  }

  /** True when the same request may succeed if sent again later (503, 429, 408, no answer). */
  get transient(): boolean {
    return TRANSIENT_CODES.has(this.code);
  }
}

/** 400 `bad_request` (and 405 `method_not_allowed`): a malformed body, field or query. */
export class BadRequest extends OrqError {}
/** 401 `unauthorized`: no API key, or an unknown one. */
export class Unauthorized extends OrqError {}
/** 403 `forbidden`: the key lacks the right (admin only, another tenant or queue). */
export class Forbidden extends OrqError {}
/** 404 `not_found`: no such task or queue (a queue exists once a task was submitted to it). */
export class NotFound extends OrqError {}
/** 409 `conflict`: the task or queue is not in a state that allows this. */
export class Conflict extends OrqError {}
/** 409 `lease_lost`: the lease token no longer holds the task; drop the work. */
export class LeaseLost extends Conflict {}
/** 409 `cancelled`: the task was cancelled while leased; abort the handler. */
export class TaskCancelled extends Conflict {}
/** 413 `payload_too_large`: the body, a payload (1 MiB) or a result (1 MiB) is over its limit. */
export class PayloadTooLarge extends OrqError {}
/** 422 `unprocessable`: a payload its handler refuses. */
export class Unprocessable extends OrqError {}
/** 429 `limited`: over a submit rate or a tenant's cap; `retryAfterMs` says how long to wait. */
export class RateLimited extends OrqError {}
/**
 * 503 `unavailable` / `store_unavailable`, and 408 `request_timeout`: the server cannot take
 * the request now. Transient: send it again (after `retryAfterMs` when given).
 */
export class Unavailable extends OrqError {}
/** 500 `internal` (or any other 5xx): the server failed. */
export class ServerError extends OrqError {}

/**
 * No answer came: the connection could not be made, broke, or the attempt's time limit (ms)
 * passed. Transient. `sent` is false only when the request certainly never reached the server
 * (the connection was refused or could not be opened), so even a non-idempotent call may be
 * sent again.
 */
export class ConnectionFailed extends OrqError {
  /** False when the request certainly never reached the server. */
  readonly sent: boolean;

  /** Make one from what failed and whether the request may have been sent. */
  constructor(message: string, sent: boolean, cause?: unknown) {
    super({ code: "connection_failed", status: 0, message, cause });
    this.sent = sent;
  }
}

/** A class of {@link OrqError} built from an answer's code, status and message. */
export type OrqErrorClass = new (init: OrqErrorInit) => OrqError;

/**
 * The class of each API error code. Typed over the generated `ErrorCode` union, so a code added
 * to the OpenAPI document fails the build until it is mapped here.
 */
export const ERROR_CLASSES: { readonly [C in ErrorCode]: OrqErrorClass } = {
  bad_request: BadRequest,
  unauthorized: Unauthorized,
  forbidden: Forbidden,
  not_found: NotFound,
  method_not_allowed: BadRequest,
  request_timeout: Unavailable,
  conflict: Conflict,
  lease_lost: LeaseLost,
  cancelled: TaskCancelled,
  payload_too_large: PayloadTooLarge,
  unprocessable: Unprocessable,
  limited: RateLimited,
  unavailable: Unavailable,
  store_unavailable: Unavailable,
  internal: ServerError,
};

/** The class for an answer whose code is unknown (or absent), by its HTTP status. */
function classForStatus(status: number): OrqErrorClass {
  switch (status) {
    case 400:
    case 405:
      return BadRequest;
    case 401:
      return Unauthorized;
    case 403:
      return Forbidden;
    case 404:
      return NotFound;
    case 408:
    case 503:
      return Unavailable;
    case 409:
      return Conflict;
    case 413:
      return PayloadTooLarge;
    case 422:
      return Unprocessable;
    case 429:
      return RateLimited;
    default:
      return status >= 500 ? ServerError : OrqError;
  }
}

/** The code a status stands for when the body names none. */
function codeForStatus(status: number): string {
  const codes: Record<number, ErrorCode> = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    413: "payload_too_large",
    422: "unprocessable",
    429: "limited",
    503: "unavailable",
  };
  return codes[status] ?? (status >= 500 ? "internal" : `http_${status}`);
}

/**
 * Parse `Retry-After` (seconds, or an HTTP date) into ms; null when absent or unreadable.
 * `nowMs` is the current time (ms since the epoch) for the date form.
 */
export function parseRetryAfter(value: string | null, nowMs = Date.now()): number | null {
  if (value === null || value.trim() === "") return null;
  const text = value.trim();
  if (/^\d+(\.\d+)?$/.test(text)) return Math.round(Number(text) * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, at - nowMs);
}

/**
 * The error for an answer with a non-2xx `status`: its body's code picks the class (the status
 * when the body is not an API error, e.g. from a proxy). `bodyText` is the raw body.
 */
export function errorFromAnswer(status: number, bodyText: string, retryAfter: string | null): OrqError {
  let code: string | undefined;
  let message: string | undefined;
  try {
    const parsed = JSON.parse(bodyText) as { error?: { code?: unknown; message?: unknown } };
    if (typeof parsed?.error?.code === "string") code = parsed.error.code;
    if (typeof parsed?.error?.message === "string") message = parsed.error.message;
  } catch {
    // Not JSON: a proxy's page, say. The status decides.
  }
  const known = code !== undefined && Object.hasOwn(ERROR_CLASSES, code);
  const cls = known ? ERROR_CLASSES[code as ErrorCode] : classForStatus(status);
  return new cls({
    code: code ?? codeForStatus(status),
    status,
    message: message ?? (`HTTP ${status}` + (bodyText ? `: ${bodyText.slice(0, 200)}` : "")),
    retryAfterMs: parseRetryAfter(retryAfter),
  });
}
