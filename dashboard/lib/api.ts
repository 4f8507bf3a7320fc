// The API client: relative URLs under /api/v1 (the dashboard is served by orq on the same origin),
// JSON errors turned into ApiError, and the API key. The key lives only in sessionStorage (gone
// when the tab closes) and goes out as `Authorization: Bearer <key>`; a 401 asks for it. Request
// and reply shapes are the server's OpenAPI schemas (`api-types.ts`, generated; see `types.ts`).

import type { components } from "./api-types";
import type {
  MetricsReply,
  QueueStats,
  SimulatorInfo,
  SubmitBody,
  Task,
  TaskPage,
  TenantLimits,
  WorkersReply,
} from "./types";

type Schemas = components["schemas"];

export const API_BASE = "/api/v1";
const KEY_STORAGE = "orq.apiKey";
export const AUTH_REQUIRED_EVENT = "orq:auth-required";
/** Dispatched on window when an admin-only route answers 403: the key in use is not an admin key. */
export const ADMIN_REQUIRED_EVENT = "orq:admin-required";

export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  /** True when the route needs an admin key (pause, limits, workers, metrics, purge, timelines, simulations). */
  readonly adminOnly: boolean;
  /** The answer's `Retry-After` in seconds (a 503 while a resource is being prepared), or null. */
  readonly retry_after_s: number | null;
  constructor(status: number, code: string, message: string, adminOnly = false, retry_after_s: number | null = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.code = code;
    this.adminOnly = adminOnly;
    this.retry_after_s = retry_after_s;
  }
}

/**
 * A `Retry-After` header in whole seconds from `now_ms`: delta-seconds (`"120"`) or an HTTP date
 * (RFC 9110 10.2.3); a date in the past is 0. Null when absent or unreadable.
 */
export function parseRetryAfter(value: string | null, now_ms: number = Date.now()): number | null {
  if (value === null) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) {
    const s = Number(v);
    return Number.isSafeInteger(s) ? s : null;
  }
  // A date names a day of the week and a year; a bare number or word is not one.
  if (!/[A-Za-z]{3}, .*\d{4}/.test(v)) return null;
  const at = Date.parse(v);
  return Number.isFinite(at) ? Math.max(0, Math.ceil((at - now_ms) / 1000)) : null;
}

/** The explanation shown in place of an admin-only view or control refused to a non-admin key. */
export const NEEDS_ADMIN = "needs an admin key";

/** True when an admin-only route answered 403: the key in use is not an admin key. */
export function needsAdmin(e: unknown): boolean {
  return e instanceof ApiError && e.status === 403 && e.adminOnly;
}

/**
 * True when a route is not served by this orq (the timelines routes without `--timelines DIR`):
 * the view says so. orq answers
 * an unknown route with 404 "no such route"; a 404 that is not orq's JSON (a proxy, a static
 * server) counts too. A 404 about a queue or task ("no queue named q") does not.
 */
export function isMissingRoute(e: unknown): boolean {
  if (!(e instanceof ApiError)) return false;
  if (e.status === 405) return true;
  return e.status === 404 && (e.code.startsWith("http_") || /no such route/i.test(e.message));
}

/**
 * True when the timelines list (`GET /timelines`) is not served: orq started without
 * `--timelines DIR` answers it 404 (the list route has no resource to miss, so any 404 means
 * that), or the route is missing altogether.
 */
export function timelinesOff(e: unknown): boolean {
  return (e instanceof ApiError && e.status === 404) || isMissingRoute(e);
}

export function getApiKey(): string | null {
  if (typeof window === "undefined") {
    return null;
  }
  try {
    return window.sessionStorage.getItem(KEY_STORAGE);
  } catch {
    return null;
  }
}

export function setApiKey(key: string | null): void {
  if (key === null || key === "") {
    window.sessionStorage.removeItem(KEY_STORAGE);
  } else {
    window.sessionStorage.setItem(KEY_STORAGE, key);
  }
}

export function authHeaders(): Record<string, string> {
  const key = getApiKey();
  return key ? { Authorization: `Bearer ${key}` } : {};
}

interface RequestOptions {
  method?: string;
  body?: unknown;
  signal?: AbortSignal;
  /** Return the body as text instead of parsing JSON. */
  text?: boolean;
  /** An admin-only route: a 403 means the key is not an admin key. */
  admin?: boolean;
}

/**
 * The ApiError of an answer that is not ok, from its body `raw` (orq's JSON error, or the text of
 * another server's); a 401 asks for a key, and a 403 of an admin-only route (`admin`) tells the
 * views the key is not an admin key.
 */
export function failure(res: Response, raw: string, admin: boolean): ApiError {
  if (res.status === 401 && typeof window !== "undefined") {
    window.dispatchEvent(new Event(AUTH_REQUIRED_EVENT));
  }
  let code = "http_" + String(res.status);
  let message = raw.slice(0, 300) || res.statusText || `HTTP ${res.status}`;
  try {
    const j = JSON.parse(raw) as Partial<Schemas["ApiError"]>;
    if (j.error) {
      code = j.error.code ?? code;
      message = j.error.message ?? message;
    }
  } catch {
    // Not our JSON error (a proxy, a static server): keep the text.
  }
  const adminOnly = res.status === 403 && admin;
  if (adminOnly && typeof window !== "undefined") {
    window.dispatchEvent(new Event(ADMIN_REQUIRED_EVENT));
  }
  return new ApiError(res.status, code, message, adminOnly, parseRetryAfter(res.headers.get("Retry-After")));
}

async function request<T>(path: string, opts: RequestOptions = {}): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json", ...authHeaders() };
  let body: string | undefined;
  if (opts.body !== undefined) {
    headers["Content-Type"] = "application/json";
    body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await fetch(`${API_BASE}${path}`, {
      method: opts.method ?? "GET",
      headers,
      body,
      signal: opts.signal,
      cache: "no-store",
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") {
      throw e;
    }
    throw new ApiError(0, "unreachable", "orq is not reachable (network error)");
  }
  const raw = await res.text();
  if (!res.ok) {
    throw failure(res, raw, opts.admin === true);
  }
  if (opts.text) {
    return raw as T;
  }
  if (raw === "") {
    return undefined as T;
  }
  try {
    return JSON.parse(raw) as T;
  } catch {
    throw new ApiError(res.status, "bad_reply", `not JSON: ${raw.slice(0, 120)}`);
  }
}

function qs(params: Record<string, string | number | null | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== "") {
      u.set(k, String(v));
    }
  }
  const s = u.toString();
  return s ? `?${s}` : "";
}

const enc = encodeURIComponent;

export interface ListParams {
  queue: string;
  tenant?: string;
  status?: string;
  type?: string;
  cursor?: string | null;
  limit?: number;
}

export const api = {
  queues: (signal?: AbortSignal) =>
    request<Schemas["QueueList"]>("/queues", { signal }).then((r) => r.queues),
  queue: (q: string, signal?: AbortSignal) => request<QueueStats>(`/queues/${enc(q)}`, { signal }),
  /**
   * A queue's stats, or null when the queue has not received a task yet. Read from the list of
   * queues, so an unknown queue is not a 404 (which browsers log as an error).
   */
  queueOrNull: (q: string, signal?: AbortSignal) =>
    request<Schemas["QueueList"]>("/queues", { signal }).then(
      (r) => r.queues.find((x) => x.queue === q) ?? null,
    ),
  /** A page of a queue's tenants (100, by name); `cursor` is the previous page's `next_cursor`. */
  tenants: (q: string, cursor: string | null, signal?: AbortSignal) =>
    request<Schemas["TenantList"]>(`/queues/${enc(q)}/tenants${cursor ? `?cursor=${enc(cursor)}` : ""}`, { signal }),
  putTenant: (q: string, t: string, limits: TenantLimits) =>
    request<Schemas["TenantEntry"]>(`/queues/${enc(q)}/tenants/${enc(t)}`, { method: "PUT", body: limits, admin: true }),
  pause: (q: string) =>
    request<Schemas["Paused"]>(`/queues/${enc(q)}/pause`, { method: "POST", admin: true }),
  resume: (q: string) =>
    request<Schemas["Paused"]>(`/queues/${enc(q)}/resume`, { method: "POST", admin: true }),
  tasks: (p: ListParams, signal?: AbortSignal) =>
    request<TaskPage>(`/tasks${qs({ ...p })}`, { signal }),
  task: (id: string, queue?: string | null, signal?: AbortSignal) =>
    request<Task>(`/tasks/${enc(id)}${qs({ queue })}`, { signal }),
  submit: (body: SubmitBody) => request<Task>("/tasks", { method: "POST", body }),
  submitBatch: (tasks: SubmitBody[]) =>
    request<TaskPage>("/tasks/batch", { method: "POST", body: { tasks } }),
  cancel: (id: string, queue?: string | null) =>
    request<Task>(`/tasks/${enc(id)}/cancel${qs({ queue })}`, { method: "POST" }),
  dlq: (p: Omit<ListParams, "status">, signal?: AbortSignal) =>
    request<TaskPage>(`/dlq${qs({ ...p })}`, { signal }),
  replay: (id: string, queue?: string | null) =>
    request<Task>(`/dlq/${enc(id)}/replay${qs({ queue })}`, { method: "POST" }),
  replayBulk: (b: Schemas["BulkReplayBody"]) =>
    request<Schemas["BulkReplay"]>("/dlq/replay", {
      method: "POST",
      body: Object.fromEntries(Object.entries(b).filter(([, v]) => v !== undefined && v !== "")),
    }),
  purge: (id: string, queue?: string | null) =>
    request<Schemas["Purged"]>(`/dlq/${enc(id)}${qs({ queue })}`, {
      method: "DELETE",
      admin: true,
    }),
  workers: (q: string, signal?: AbortSignal) =>
    request<WorkersReply>(`/queues/${enc(q)}/workers`, { signal, admin: true }),
  metrics: (q: string, signal?: AbortSignal) =>
    request<MetricsReply>(`/queues/${enc(q)}/metrics`, { signal, admin: true }),
  timelines: (signal?: AbortSignal) =>
    request<Schemas["TimelineList"]>("/timelines", { signal, admin: true }).then((r) => r.timelines),
  timeline: (name: string, signal?: AbortSignal) =>
    request<string>(`/timelines/${enc(name)}`, { signal, text: true, admin: true }),
  /** Whether this orq can run the simulator now, and what a run can ask for. */
  simulator: (signal?: AbortSignal) => request<SimulatorInfo>("/simulations", { signal, admin: true }),
};

/** A message for any error: the API's own message, or the exception's. */
export function errorMessage(e: unknown): string {
  if (needsAdmin(e)) {
    return `This ${NEEDS_ADMIN}: ${(e as ApiError).message}`;
  }
  if (e instanceof ApiError) {
    return e.status ? `${e.message} (HTTP ${e.status})` : e.message;
  }
  return e instanceof Error ? e.message : String(e);
}
