// Running the simulator from the Replay view (`POST /api/v1/simulations`): the request built from
// the run form and checked against the server's limits, the streamed timeline split into lines
// (a chunk may end in the middle of one), the progress read from those lines (events so far, the
// verdict, or the server's reason for stopping the run), and how long to wait before asking again
// while the server builds the simulator. `streamSimulation` does the I/O (fetch, read the body,
// abort); the rest is pure and unit-tested.

import { API_BASE, ApiError, authHeaders, failure } from "./api";
import { formatBytes } from "./format";
import { TIMELINE_BYTES_MAX } from "./timeline";
import type { SimulationRequest, SimulatorInfo } from "./types";

/** Largest seed the random seed button draws: short enough to read out and type. */
export const RANDOM_SEED_MAX = 2 ** 32 - 1;

/** Longest the view keeps asking again while the server builds the simulator (seconds, in all). */
export const RETRY_WAIT_S_MAX = 15 * 60;

/** Shortest wait before asking again, whatever Retry-After says (seconds): no busy loop. */
export const RETRY_WAIT_S_MIN = 1;

/** How often the view asks whether the simulator is ready while it is built or busy (ms). */
export const SIM_POLL_MS = 3_000;

/** The run form as typed: strings for the number fields, so a half-typed value stays as it is. */
export interface SimForm {
  seed: string;
  /** `seed`: the seed's own fault families (swarm testing); `chosen`: exactly `families`. */
  mix: "seed" | "chosen";
  families: string[];
  planted: string;
  lossy: boolean;
  /** Empty: the seed's own number of tasks. */
  tasks: string;
}

export function defaultForm(seed: number): SimForm {
  return { seed: String(seed), mix: "seed", families: [], planted: "none", lossy: false, tasks: "" };
}

/** A seed in 0..=RANDOM_SEED_MAX from `rand` (a number in [0, 1)). */
export function randomSeed(rand: () => number = Math.random): number {
  return Math.min(RANDOM_SEED_MAX, Math.floor(rand() * (RANDOM_SEED_MAX + 1)));
}

/** A whole number typed in decimal digits only (no sign, exponent, hex or spaces). */
function digits(v: string): number | null {
  const t = v.trim();
  return /^\d{1,20}$/.test(t) ? Number(t) : null;
}

/**
 * The request body of the form, or why the form is not valid (a sentence naming the field). The
 * checks follow the server's limits so a user learns before a round trip; the server checks again
 * and stays the authority. A seed is checked against `seed_max` but never above 2^53 - 1, where
 * JavaScript numbers stop being exact (the seed sent would not be the seed typed).
 */
export function buildRequest(form: SimForm, info: Pick<SimulatorInfo, "families" | "planted" | "limits">): SimulationRequest | string {
  const seed_max = Math.min(info.limits.seed_max, Number.MAX_SAFE_INTEGER);
  const seed = digits(form.seed);
  if (seed === null || seed > seed_max) return `seed: a whole number from 0 to ${seed_max}`;
  let faults: string[] | null = null;
  if (form.mix === "chosen") {
    const unknown = form.families.filter((f) => !info.families.includes(f));
    if (unknown.length > 0) return `fault families: this simulator has no ${unknown.join(", ")}`;
    // In the server's order, once each: the same choice always makes the same request.
    faults = info.families.filter((f) => form.families.includes(f));
  }
  if (form.planted !== "none" && !info.planted.includes(form.planted)) {
    return `planted bug: this simulator has no ${form.planted}`;
  }
  let tasks: number | null = null;
  if (form.tasks.trim() !== "") {
    // A server without the simulator says tasks_max 0: the bound is then its to check.
    const tasks_max = info.limits.tasks_max >= 1 ? info.limits.tasks_max : Number.MAX_SAFE_INTEGER;
    tasks = digits(form.tasks);
    if (tasks === null || tasks < 1 || tasks > tasks_max) {
      return tasks_max === Number.MAX_SAFE_INTEGER
        ? "tasks: a whole number from 1, or empty for the seed's own"
        : `tasks: a whole number from 1 to ${tasks_max}, or empty for the seed's own`;
    }
  }
  return { seed, faults, planted: form.planted, lossy: form.lossy, tasks };
}

/** The name of a run's timeline (and of its download): `seed-<N>.jsonl`, as `orq-sim check` names them. */
export function timelineName(seed: number): string {
  return `seed-${seed}.jsonl`;
}

/**
 * Splits streamed text into lines. A chunk may end in the middle of a line: that part is kept
 * until the rest arrives (or `finish` hands it over at the end of the stream). `\r\n` ends a line
 * like `\n`.
 */
export class LineSplitter {
  private rest = "";

  /** Feed a chunk; returns the lines it completed, without their line ends. */
  push(chunk: string): string[] {
    const parts = (this.rest + chunk).split("\n");
    this.rest = parts.pop() ?? "";
    return parts.map((l) => (l.endsWith("\r") ? l.slice(0, -1) : l));
  }

  /** The last line when the stream ended without a line end, else null. */
  finish(): string | null {
    const last = this.rest.endsWith("\r") ? this.rest.slice(0, -1) : this.rest;
    this.rest = "";
    return last === "" ? null : last;
  }
}

/** What one timeline line is, as far as the progress of a run cares. */
export type LineInfo =
  | { kind: "header"; seed: number | string | null; replay: string | null; families: string[] | null }
  | { kind: "event"; event: string; t_ms: number | null; message: string | null }
  | { kind: "end"; t_ms: number | null; verdict: string }
  | { kind: "aborted"; reason: string }
  | { kind: "blank" }
  | { kind: "unreadable" };

function record(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
}

function num(v: unknown): number | null {
  return typeof v === "number" && Number.isFinite(v) ? v : null;
}

/** Read one line of a streamed timeline (docs/timeline.md, and the server's `aborted` line). */
export function classifyLine(line: string): LineInfo {
  if (line.trim() === "") return { kind: "blank" };
  let obj: Record<string, unknown> | null;
  try {
    obj = record(JSON.parse(line));
  } catch {
    return { kind: "unreadable" };
  }
  if (!obj || typeof obj.kind !== "string") return { kind: "unreadable" };
  const details = record(obj.details) ?? {};
  switch (obj.kind) {
    case "header": {
      const families = record(record(obj.config)?.faults)?.families;
      return {
        kind: "header",
        seed: typeof obj.seed === "number" || typeof obj.seed === "string" ? obj.seed : null,
        replay: typeof obj.replay === "string" ? obj.replay : null,
        families: Array.isArray(families) ? families.map(String) : null,
      };
    }
    case "end":
      return { kind: "end", t_ms: num(obj.t_ms), verdict: typeof details.verdict === "string" ? details.verdict : "unknown" };
    case "aborted":
      if (obj.actor === "server") {
        return { kind: "aborted", reason: typeof details.reason === "string" && details.reason ? details.reason : "no reason given" };
      }
      break;
  }
  return {
    kind: "event",
    event: obj.kind,
    t_ms: num(obj.t_ms),
    message: obj.kind === "violation" && typeof details.message === "string" ? details.message : null,
  };
}

/** A run's progress, from the lines received so far. */
export interface SimProgress {
  /** The header line arrived (a timeline to open, even if the run is cut short). */
  header: boolean;
  seed: number | string | null;
  replay: string | null;
  /** The fault families the run has on (the header's `config.faults.families`). */
  families: string[] | null;
  /** Event lines received, the `end` line among them (as the player counts them); not the header or an `aborted` line. */
  events: number;
  /** Virtual time of the latest event (ms). */
  last_t_ms: number | null;
  /** The first violation's message. */
  violation: string | null;
  /** The `end` line's verdict: `Pass`, `Safety(...)`, `Liveness(...)`, `Crash(...)`. */
  verdict: string | null;
  /** Why the server stopped the run (its `aborted` line). */
  aborted: string | null;
  /** Lines that were not JSON objects with a kind. */
  unreadable: number;
}

export function emptyProgress(): SimProgress {
  return {
    header: false,
    seed: null,
    replay: null,
    families: null,
    events: 0,
    last_t_ms: null,
    violation: null,
    verdict: null,
    aborted: null,
    unreadable: 0,
  };
}

/** Count one line into `p` (mutated: a stream has many lines, and the view copies it to show it). */
export function advance(p: SimProgress, line: string): void {
  const l = classifyLine(line);
  switch (l.kind) {
    case "header":
      p.header = true;
      p.seed = l.seed;
      p.replay = l.replay;
      p.families = l.families;
      break;
    case "event":
      p.events += 1;
      if (l.t_ms !== null) p.last_t_ms = l.t_ms;
      if (l.message !== null && p.violation === null) p.violation = l.message;
      break;
    case "end":
      p.events += 1;
      p.verdict = l.verdict;
      if (l.t_ms !== null) p.last_t_ms = l.t_ms;
      break;
    case "aborted":
      p.aborted = l.reason;
      break;
    case "unreadable":
      p.unreadable += 1;
      break;
    case "blank":
      break;
  }
}

/**
 * How a run ended, from its lines: `passed` / `failed` (an `end` line with its verdict), `aborted`
 * (the server stopped it), or `cut` (the stream ended with neither: stopped by the user, or the
 * connection broke).
 */
export function outcome(p: SimProgress): "passed" | "failed" | "aborted" | "cut" {
  if (p.verdict !== null) return p.verdict === "Pass" ? "passed" : "failed";
  return p.aborted !== null ? "aborted" : "cut";
}

/**
 * Seconds to wait before asking to run again after `e`, when `waited_s` have passed since the
 * first refusal: a 503 with Retry-After (the server is building the simulator, or it is not
 * available yet), capped so the wait in all stays within RETRY_WAIT_S_MAX. Null: do not ask again
 * (another error, no Retry-After, or the cap is reached).
 */
export function retryWait(e: unknown, waited_s: number): number | null {
  if (!(e instanceof ApiError) || e.status !== 503 || e.retry_after_s === null) return null;
  const left_s = RETRY_WAIT_S_MAX - waited_s;
  if (left_s <= 0) return null;
  return Math.min(left_s, Math.max(RETRY_WAIT_S_MIN, e.retry_after_s));
}

/** Where an error answering a run belongs in the view. */
export type RunRefusal =
  /** Bad values or over the limits (422, 400): next to the form. */
  | { place: "form"; message: string }
  /** Another run is in progress (409): a notice, and Run waits for it to end. */
  | { place: "busy"; message: string }
  /** Anything else: an error box. */
  | { place: "error"; error: unknown };

export function refusal(e: unknown): RunRefusal {
  if (e instanceof ApiError && (e.status === 422 || e.status === 400)) {
    return { place: "form", message: e.message };
  }
  if (e instanceof ApiError && e.status === 409) {
    return {
      place: "busy",
      message: "A simulation is already running on this orq (one at a time): Run is enabled again when it ends.",
    };
  }
  return { place: "error", error: e };
}

/**
 * POST the run and read its timeline as it streams: `onLines` receives each batch of complete
 * lines (and the last line when the body does not end with a line end). Throws the API's error
 * for an answer that is not ok (before any line), an AbortError when `signal` aborts, and an
 * Error when the body passes TIMELINE_BYTES_MAX (the lines so far have been handed over).
 */
export async function streamSimulation(
  body: SimulationRequest,
  signal: AbortSignal,
  onLines: (lines: string[]) => void,
): Promise<void> {
  let res: Response;
  try {
    res = await fetch(`${API_BASE}/simulations`, {
      method: "POST",
      headers: { Accept: "application/x-ndjson, application/json", "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(body),
      signal,
      cache: "no-store",
    });
  } catch (e) {
    if (e instanceof DOMException && e.name === "AbortError") throw e;
    throw new ApiError(0, "unreachable", "orq is not reachable (network error)");
  }
  if (!res.ok) throw failure(res, await res.text(), true);
  if (!res.body) throw new ApiError(res.status, "bad_reply", "the run's answer has no body");
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const splitter = new LineSplitter();
  let bytes = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      bytes += value.byteLength;
      if (bytes > TIMELINE_BYTES_MAX) {
        throw new Error(`the timeline passed ${formatBytes(TIMELINE_BYTES_MAX)}: stopped reading it`);
      }
      const lines = splitter.push(decoder.decode(value, { stream: true }));
      if (lines.length > 0) onLines(lines);
    }
    const tail = splitter.push(decoder.decode());
    const last = splitter.finish();
    if (last !== null) tail.push(last);
    if (tail.length > 0) onLines(tail);
  } finally {
    // Stops the download (and with it the run) when we stop early; harmless after the end.
    reader.cancel().catch(() => {});
  }
}
