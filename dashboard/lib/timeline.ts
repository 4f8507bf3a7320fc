// The simulator timeline model: parse a timeline (JSON Lines, docs/timeline.md) and compute, for
// any virtual time t, each task's status, each worker's state (up / crashed / stalled, with its
// clock offset), the store's clock offset, whether the queue is paused, whether the store is
// refusing calls (a refusal episode or a LOADING window) and the single refusals by actor; plus
// the fault markers on the time axis, the violation and the verdict. Pure TypeScript with no DOM
// or React, so the replay view's logic is unit-tested under `node --test` without a browser.
//
// Seeking is O(k) in the events since the nearest checkpoint: a full copy of the state is kept
// every CHECKPOINT_EVERY events, so scrubbing a long timeline stays smooth.

import { isStatus, type Status } from "./types";

/** Events between two saved copies of the replay state. */
export const CHECKPOINT_EVERY = 256;

/** Largest timeline opened in the browser (bytes): a file, or a simulation streamed by the server. */
export const TIMELINE_BYTES_MAX = 256 << 20;

/** The first line of a timeline. `config` is the whole drawn simulation configuration. */
export interface TimelineHeader {
  kind: "header";
  version: number;
  seed: number | string | null;
  config: Record<string, unknown>;
  /** The command that reproduces the run. */
  replay: string | null;
}

/** One event line, normalised: empty `task`/`tenant` strings become null. */
export interface TimelineEvent {
  /** Position in the file's event list (0 = first event after the header). */
  index: number;
  t_ms: number;
  actor: string;
  kind: string;
  task: string | null;
  tenant: string | null;
  attempt: number | null;
  details: Record<string, unknown>;
}

/**
 * The last line of a simulation the server stopped (its deadline passed, its memory limit, the
 * simulator process died): `{"t_ms": null, "actor": "server", "kind": "aborted", ...,
 * "details": {"reason": "..."}}`, in place of the `end` line. Not an event: it has no time.
 */
export interface TimelineAborted {
  reason: string;
}

export interface Timeline {
  header: TimelineHeader | null;
  events: TimelineEvent[];
  /** Set when the server stopped the run before its end (an `aborted` line). */
  aborted: TimelineAborted | null;
  /** Lines that could not be read, as `line N: why` (at most PROBLEMS_MAX of them). */
  problems: string[];
}

/** Most unreadable lines reported by name; the rest are counted. */
export const PROBLEMS_MAX = 20;

/** The fault kinds the harness injects: drawn as markers on the time axis. */
export const FAULT_KINDS = [
  "crash",
  "stall",
  "clock_jump",
  "lost_reply",
  "duplicate",
  "fail_before",
  "script_flush",
  "lossy_restart",
  "pause",
  "refusal",
  "refusal_episode",
  "loading",
  "slow_call",
] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

/**
 * Redis's transient error words that refuse only scripts that write (Redis still runs orq's
 * read-only scripts: get, list, stats, queues); the other words (BUSY, LOADING, MASTERDOWN,
 * TRYAGAIN, CLUSTERDOWN, and the authentication refusals WRONGPASS, NOAUTH, NOPERM) refuse every
 * call.
 */
export const WRITES_ONLY_WORDS = ["OOM", "READONLY", "NOREPLICAS"] as const;

/** True when a store refusing with `word` refuses only the scripts that write. */
export function refusesWritesOnly(word: string): boolean {
  return (WRITES_ONLY_WORDS as readonly string[]).includes(word);
}

/** Markers that are not faults but matter on the time axis. */
export const LANDMARK_KINDS = ["violation", "faults_off", "end", "snapshot"] as const;

/** Store event kinds that set a task's status, and the status they set. */
const TRANSITION_STATUS: Record<string, TaskStatus> = {
  scheduled: "scheduled",
  queued: "queued",
  leased: "leased",
  retrying: "retrying",
  completed: "completed",
  dead: "dead",
  cancelled: "cancelled",
  released: "queued",
  replayed: "queued",
  purged: "purged",
};

/** A task's status in a replay: a store status, or gone from the store (`purged`). */
export type TaskStatus = Status | "purged";

/** The columns of the replay board, in lifecycle order. */
export const BOARD_STATUSES: readonly TaskStatus[] = [
  "scheduled",
  "queued",
  "leased",
  "retrying",
  "completed",
  "dead",
  "cancelled",
  "purged",
];

export interface TaskState {
  id: string;
  tenant: string | null;
  status: TaskStatus;
  attempt: number;
  /** Worker holding the lease while leased (details.w), else null. */
  worker: string | null;
  /** Virtual time of the event that set the status. */
  since_ms: number;
  /** Kind of the last store transition (e.g. `released` while the status is queued). */
  last_kind: string;
}

export type WorkerCondition = "up" | "crashed" | "stalled";

export interface WorkerState {
  /** Slot name (`w1`); incarnations (`w1.2`) share it. */
  name: string;
  /** Latest actor id of the slot (`w1.2`). */
  id: string;
  incarnation: number;
  condition: WorkerCondition;
  since_ms: number;
  /** Virtual time a stall ends at, while stalled. */
  stalled_until_ms: number | null;
  /** Virtual time the supervisor restarts a crashed worker (crash time + down_ms), if known. */
  restart_at_ms: number | null;
  /** Sum of the clock_jump deltas whose actor is this worker, plus any offset it started with. */
  clock_offset_ms: number;
  crashes: number;
  stalls: number;
}

/**
 * A window in which the store refuses calls with one error word: a `refusal_episode`, or the
 * `loading` window after a store restart. It lasts from `since_ms` until `until_ms` (exclusive),
 * unless a later episode replaces it or the faults end first (`faults_off`).
 */
export interface StoreRefusal {
  /** The event that opened the window. */
  kind: "refusal_episode" | "loading";
  /** Redis's error word: `OOM`, `READONLY`, `LOADING`, ... */
  word: string;
  /** Only scripts that write are refused (refusesWritesOnly); else every call is. */
  writes_only: boolean;
  /** Virtual time the window opened (the event's t_ms). */
  since_ms: number;
  /** Virtual time the store serves again (the event's t_ms + ms). */
  until_ms: number;
}

export interface ReplayState {
  t_ms: number;
  /** Number of events applied (events[0..applied) have t_ms <= t). */
  applied: number;
  tasks: Map<string, TaskState>;
  workers: Map<string, WorkerState>;
  /** Sum of the store's clock_jump deltas so far (ms; negative = behind). */
  store_clock_offset_ms: number;
  /** The queue is paused (a `paused` store event without a later `resumed`). */
  paused: boolean;
  /** The store's refusal window in force at this time, or null while it serves every call. */
  store_refusal: StoreRefusal | null;
  /**
   * Single `refusal` events so far, by actor slot (`w1` for `w1.2`; `client`, `supervisor`, `s1`).
   * Calls refused during a refusal window are not on the timeline (the `end` stats count them).
   */
  refusals: Map<string, number>;
  /** Set once the time passes the first violation. */
  violation: TimelineEvent | null;
  /** The task statuses saved by a `snapshot` event, restored by `lossy_restart`. */
  snapshot: Map<string, TaskState> | null;
}

export interface Marker {
  index: number;
  t_ms: number;
  kind: string;
  actor: string;
  /** One line for a tooltip: kind, actor and the details that matter. */
  label: string;
  /** `fault`, or `landmark` for violation / faults_off / end / snapshot. */
  group: "fault" | "landmark";
}

export interface Verdict {
  /** `Pass`, or `Safety(...)`, `Liveness(...)`, `Crash(...)` as the simulator prints it. */
  text: string;
  passed: boolean;
  t_ms: number;
  stats: Record<string, unknown> | null;
}

export interface TimelineModel {
  timeline: Timeline;
  header: TimelineHeader | null;
  events: TimelineEvent[];
  start_ms: number;
  end_ms: number;
  markers: Marker[];
  /** Event indexes of each task, in order. */
  taskEvents: Map<string, number[]>;
  /** Task ids in order of first appearance. */
  taskIds: string[];
  violation: TimelineEvent | null;
  verdict: Verdict | null;
  checkpoints: ReplayState[];
}

// ---------------------------------------------------------------------------------------------
// Parsing

function asRecord(v: unknown): Record<string, unknown> | null {
  return v !== null && typeof v === "object" && !Array.isArray(v)
    ? (v as Record<string, unknown>)
    : null;
}

function optString(v: unknown): string | null {
  if (typeof v === "string") {
    return v === "" ? null : v;
  }
  if (typeof v === "number") {
    return String(v);
  }
  return null;
}

function optNumber(v: unknown): number | null {
  if (typeof v === "number" && Number.isFinite(v)) {
    return v;
  }
  if (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v))) {
    return Number(v);
  }
  return null;
}

/**
 * Parse timeline text: the header (the line whose kind is `header`, normally the first), then
 * events. Blank lines are skipped; unreadable lines are reported in `problems` and skipped, so one
 * truncated line (a run killed mid-write) does not lose the rest. Events keep file order, which is
 * the order they happened in; `t_ms` is documented as monotonic.
 */
export function parseTimeline(text: string): Timeline {
  const lines = text.split(/\r?\n/);
  const events: TimelineEvent[] = [];
  const problems: string[] = [];
  let problemCount = 0;
  let header: TimelineHeader | null = null;
  let aborted: TimelineAborted | null = null;
  const problem = (line: number, why: string) => {
    problemCount += 1;
    if (problems.length < PROBLEMS_MAX) {
      problems.push(`line ${line}: ${why}`);
    }
  };
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === "") {
      return;
    }
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      problem(i + 1, "not JSON");
      return;
    }
    const obj = asRecord(value);
    if (!obj) {
      problem(i + 1, "not a JSON object");
      return;
    }
    if (obj.kind === "header") {
      if (header) {
        problem(i + 1, "a second header");
        return;
      }
      header = {
        kind: "header",
        version: optNumber(obj.version) ?? 0,
        seed:
          typeof obj.seed === "number" || typeof obj.seed === "string" ? obj.seed : null,
        config: asRecord(obj.config) ?? {},
        replay: optString(obj.replay),
      };
      return;
    }
    if (obj.kind === "aborted" && obj.actor === "server") {
      // The server's own line, with t_ms null: kept apart from the events, whose times the
      // model's binary searches need.
      aborted = { reason: optString(asRecord(obj.details)?.reason) ?? "no reason given" };
      return;
    }
    const t = optNumber(obj.t_ms);
    const kind = optString(obj.kind);
    if (t === null || kind === null) {
      problem(i + 1, "an event needs t_ms and kind");
      return;
    }
    events.push({
      index: events.length,
      t_ms: t,
      actor: optString(obj.actor) ?? "",
      kind,
      task: optString(obj.task),
      tenant: optString(obj.tenant),
      attempt: optNumber(obj.attempt),
      details: asRecord(obj.details) ?? {},
    });
  });
  if (problemCount > problems.length) {
    problems.push(`... and ${problemCount - problems.length} more unreadable lines`);
  }
  // Keep the model's binary searches valid even if a file breaks the monotonic promise.
  let sorted = true;
  for (let i = 1; i < events.length; i++) {
    if ((events[i]?.t_ms ?? 0) < (events[i - 1]?.t_ms ?? 0)) {
      sorted = false;
      break;
    }
  }
  if (!sorted) {
    problems.push("events are not in time order: sorted by t_ms (stable)");
    events.sort((a, b) => a.t_ms - b.t_ms || a.index - b.index);
    events.forEach((e, i) => (e.index = i));
  }
  return { header, events, aborted, problems };
}

// ---------------------------------------------------------------------------------------------
// Actors

/** True for worker actors: `w1`, `w1.2` (and schedulers `s1`, which the faults hit too). */
export function isWorkerActor(actor: string): boolean {
  return /^[ws]\d+(\.\d+)?$/.test(actor);
}

/** The slot name of a worker actor: `w1.2` → `w1`. */
export function workerName(actor: string): string {
  const dot = actor.indexOf(".");
  return dot < 0 ? actor : actor.slice(0, dot);
}

function incarnationOf(actor: string): number {
  const dot = actor.indexOf(".");
  if (dot < 0) {
    return 0;
  }
  const n = Number(actor.slice(dot + 1));
  return Number.isFinite(n) ? n : 0;
}

// ---------------------------------------------------------------------------------------------
// State

export function emptyState(start_ms: number): ReplayState {
  return {
    t_ms: start_ms,
    applied: 0,
    tasks: new Map(),
    workers: new Map(),
    store_clock_offset_ms: 0,
    paused: false,
    store_refusal: null,
    refusals: new Map(),
    violation: null,
    snapshot: null,
  };
}

function cloneTasks(tasks: Map<string, TaskState>): Map<string, TaskState> {
  const out = new Map<string, TaskState>();
  for (const [id, s] of tasks) {
    out.set(id, { ...s });
  }
  return out;
}

function cloneState(s: ReplayState): ReplayState {
  const workers = new Map<string, WorkerState>();
  for (const [k, w] of s.workers) {
    workers.set(k, { ...w });
  }
  return {
    ...s,
    tasks: cloneTasks(s.tasks),
    workers,
    store_refusal: s.store_refusal ? { ...s.store_refusal } : null,
    refusals: new Map(s.refusals),
    snapshot: s.snapshot ? cloneTasks(s.snapshot) : null,
  };
}

function worker(state: ReplayState, actor: string, t: number): WorkerState {
  const name = workerName(actor);
  let w = state.workers.get(name);
  if (!w) {
    w = {
      name,
      id: actor,
      incarnation: incarnationOf(actor),
      condition: "up",
      since_ms: t,
      stalled_until_ms: null,
      restart_at_ms: null,
      clock_offset_ms: 0,
      crashes: 0,
      stalls: 0,
    };
    state.workers.set(name, w);
  }
  return w;
}

/** Ends stalls whose time has come (a stall lasts `ms` of virtual time). */
function settleWorkers(state: ReplayState, t: number): void {
  for (const w of state.workers.values()) {
    if (w.condition === "stalled" && w.stalled_until_ms !== null && w.stalled_until_ms <= t) {
      w.condition = "up";
      w.since_ms = w.stalled_until_ms;
      w.stalled_until_ms = null;
    }
  }
}

/** Ends the store's refusal window once its time has come. */
function settleStore(state: ReplayState, t: number): void {
  if (state.store_refusal && state.store_refusal.until_ms <= t) {
    state.store_refusal = null;
  }
}

/** Apply one event to `state` (mutates it). Exported for tests. */
export function applyEvent(state: ReplayState, e: TimelineEvent): void {
  settleWorkers(state, e.t_ms);
  settleStore(state, e.t_ms);
  const status = TRANSITION_STATUS[e.kind];
  if (status !== undefined && e.task) {
    const prev = state.tasks.get(e.task);
    const w = optString(e.details.w);
    state.tasks.set(e.task, {
      id: e.task,
      tenant: e.tenant ?? prev?.tenant ?? null,
      status,
      attempt: e.attempt ?? prev?.attempt ?? 0,
      worker: status === "leased" ? (w ?? (isWorkerActor(e.actor) ? e.actor : null)) : null,
      since_ms: e.t_ms,
      last_kind: e.kind,
    });
  }
  if (e.kind === "paused") {
    state.paused = true;
  } else if (e.kind === "resumed") {
    state.paused = false;
  }
  switch (e.kind) {
    case "worker_start": {
      const w = worker(state, e.actor, e.t_ms);
      w.id = e.actor;
      w.incarnation = optNumber(e.details.incarnation) ?? incarnationOf(e.actor);
      w.condition = "up";
      w.since_ms = e.t_ms;
      w.stalled_until_ms = null;
      w.restart_at_ms = null;
      const offset = optNumber(e.details.clock_offset_ms);
      if (offset !== null) {
        w.clock_offset_ms = offset;
      }
      break;
    }
    case "crash": {
      if (isWorkerActor(e.actor)) {
        const w = worker(state, e.actor, e.t_ms);
        w.condition = "crashed";
        w.since_ms = e.t_ms;
        w.stalled_until_ms = null;
        const down = optNumber(e.details.down_ms);
        w.restart_at_ms = down === null ? null : e.t_ms + down;
        w.crashes += 1;
      }
      break;
    }
    case "stall": {
      if (isWorkerActor(e.actor)) {
        const w = worker(state, e.actor, e.t_ms);
        const ms = optNumber(e.details.ms) ?? 0;
        if (w.condition !== "crashed") {
          w.condition = "stalled";
          w.since_ms = e.t_ms;
          w.stalled_until_ms = e.t_ms + ms;
        }
        w.stalls += 1;
      }
      break;
    }
    case "clock_jump": {
      const delta = optNumber(e.details.delta_ms) ?? 0;
      if (isWorkerActor(e.actor)) {
        worker(state, e.actor, e.t_ms).clock_offset_ms += delta;
      } else {
        state.store_clock_offset_ms += delta;
      }
      break;
    }
    case "refusal_episode":
    case "loading": {
      // A later window replaces the one in force (the store has one refusal state at a time).
      const word = optString(e.details.word) ?? (e.kind === "loading" ? "LOADING" : "?");
      const ms = Math.max(0, optNumber(e.details.ms) ?? 0);
      state.store_refusal =
        ms > 0
          ? {
              kind: e.kind,
              word,
              writes_only: refusesWritesOnly(word),
              since_ms: e.t_ms,
              until_ms: e.t_ms + ms,
            }
          : null;
      break;
    }
    case "refusal": {
      const slot = isWorkerActor(e.actor) ? workerName(e.actor) : e.actor || "?";
      if (isWorkerActor(e.actor)) {
        worker(state, e.actor, e.t_ms);
      }
      state.refusals.set(slot, (state.refusals.get(slot) ?? 0) + 1);
      break;
    }
    case "faults_off":
      // The store refuses only while faults are on: the liveness phase ends any window.
      state.store_refusal = null;
      break;
    case "snapshot":
      state.snapshot = cloneTasks(state.tasks);
      break;
    case "lossy_restart":
      // The store went back to its snapshot: tasks written since then are gone or older.
      if (state.snapshot) {
        state.tasks = cloneTasks(state.snapshot);
        state.snapshot = null;
      }
      break;
    case "violation":
      if (!state.violation) {
        state.violation = e;
      }
      break;
    default:
      // Any other event by a worker shows the worker exists (a timeline cut before its start).
      if (isWorkerActor(e.actor)) {
        worker(state, e.actor, e.t_ms);
      }
  }
  state.applied = e.index + 1;
  state.t_ms = e.t_ms;
}

function markerLabel(e: TimelineEvent): string {
  const d = e.details;
  const parts = [e.kind, e.actor];
  switch (e.kind) {
    case "crash":
      parts.push(`why=${String(d.why ?? "?")}`, `down ${String(d.down_ms ?? "?")} ms`);
      break;
    case "stall":
    case "pause":
      parts.push(`${String(d.ms ?? "?")} ms`);
      break;
    case "clock_jump":
      parts.push(`${Number(d.delta_ms ?? 0) >= 0 ? "+" : ""}${String(d.delta_ms ?? "?")} ms`);
      break;
    case "lost_reply":
    case "duplicate":
    case "fail_before":
      parts.push(`script=${String(d.script ?? "?")}`);
      break;
    case "refusal":
      parts.push(String(d.word ?? "?"), `script=${String(d.script ?? "?")}`);
      break;
    case "refusal_episode":
    case "loading": {
      const word = String(d.word ?? (e.kind === "loading" ? "LOADING" : "?"));
      parts.push(refusesWritesOnly(word) ? `${word} (writes)` : word, `${String(d.ms ?? "?")} ms`);
      break;
    }
    case "slow_call":
      parts.push(`script=${String(d.script ?? "?")}`, `${String(d.ms ?? "?")} ms`);
      break;
    case "lossy_restart":
      parts.push(`rolled back to ${String(d.rolled_back_to_ms ?? "?")} ms`);
      break;
    case "violation":
      parts.push(String(d.message ?? ""));
      break;
    case "end":
      parts.push(String(d.verdict ?? ""));
      break;
  }
  return parts.filter((p) => p !== "").join(" · ");
}

/**
 * A verdict as people read it: the simulator writes Rust's debug form, `Safety("w1: … Some(\"x\")")`;
 * this is `Safety: w1: … Some("x")`. Any other text is returned as it is.
 */
export function verdictShown(text: string): string {
  const m = /^(\w+)\("(.*)"\)$/s.exec(text);
  if (!m) return text;
  try {
    return `${m[1]}: ${JSON.parse(`"${m[2]}"`) as string}`;
  } catch {
    return text; // an escape JSON does not know (Rust's \u{…}): the raw form
  }
}

/** Build the model: markers, per-task event index, violation, verdict and seek checkpoints. */
export function buildModel(timeline: Timeline): TimelineModel {
  const events = timeline.events;
  const start_ms = events.length > 0 ? Math.min(0, events[0]!.t_ms) : 0;
  const end_ms = events.length > 0 ? events[events.length - 1]!.t_ms : 0;
  const markers: Marker[] = [];
  const taskEvents = new Map<string, number[]>();
  const taskIds: string[] = [];
  let violation: TimelineEvent | null = null;
  let verdict: Verdict | null = null;
  const faults = new Set<string>(FAULT_KINDS);
  const landmarks = new Set<string>(LANDMARK_KINDS);
  const checkpoints: ReplayState[] = [emptyState(start_ms)];
  const state = emptyState(start_ms);
  for (const e of events) {
    if (faults.has(e.kind) || landmarks.has(e.kind)) {
      markers.push({
        index: e.index,
        t_ms: e.t_ms,
        kind: e.kind,
        actor: e.actor,
        label: markerLabel(e),
        group: faults.has(e.kind) ? "fault" : "landmark",
      });
    }
    if (e.task) {
      let list = taskEvents.get(e.task);
      if (!list) {
        list = [];
        taskEvents.set(e.task, list);
        taskIds.push(e.task);
      }
      list.push(e.index);
    }
    if (e.kind === "violation" && !violation) {
      violation = e;
    }
    if (e.kind === "end") {
      const text = optString(e.details.verdict) ?? "unknown";
      verdict = {
        text,
        passed: text === "Pass" || text.toLowerCase() === "pass",
        t_ms: e.t_ms,
        stats: asRecord(e.details.stats),
      };
    }
    applyEvent(state, e);
    if (state.applied % CHECKPOINT_EVERY === 0) {
      checkpoints.push(cloneState(state));
    }
  }
  return {
    timeline,
    header: timeline.header,
    events,
    start_ms,
    end_ms,
    markers,
    taskEvents,
    taskIds,
    violation,
    verdict,
    checkpoints,
  };
}

/** Number of events with `t_ms <= t` (binary search). */
export function appliedAt(model: TimelineModel, t: number): number {
  let lo = 0;
  let hi = model.events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (model.events[mid]!.t_ms <= t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/**
 * The state at virtual time `t`: every event with `t_ms <= t` applied, in order, and stalls and
 * store refusal windows that ended by `t` ended. Starts from the last checkpoint at or before `t`.
 */
export function stateAt(model: TimelineModel, t: number): ReplayState {
  const n = appliedAt(model, t);
  let cp = model.checkpoints[0]!;
  for (const c of model.checkpoints) {
    if (c.applied <= n) {
      cp = c;
    } else {
      break;
    }
  }
  const state = cloneState(cp);
  for (let i = cp.applied; i < n; i++) {
    applyEvent(state, model.events[i]!);
  }
  settleWorkers(state, t);
  settleStore(state, t);
  state.t_ms = t;
  return state;
}

/** Tasks per board status at this state. */
export function countByStatus(state: ReplayState): Record<TaskStatus, number> {
  const out = Object.fromEntries(BOARD_STATUSES.map((s) => [s, 0])) as Record<TaskStatus, number>;
  for (const task of state.tasks.values()) {
    out[task.status] += 1;
  }
  return out;
}

/** Task counts per status at `samples` evenly spaced times (for the overview chart). */
export function statusSeries(
  model: TimelineModel,
  samples: number,
): Array<{ t_ms: number } & Record<TaskStatus, number>> {
  const out: Array<{ t_ms: number } & Record<TaskStatus, number>> = [];
  const span = Math.max(1, model.end_ms - model.start_ms);
  const n = Math.max(2, Math.min(samples, 2000));
  // One pass: walk the events once, sampling as time passes each point.
  const state = emptyState(model.start_ms);
  let i = 0;
  for (let k = 0; k < n; k++) {
    const t = model.start_ms + (span * k) / (n - 1);
    while (i < model.events.length && model.events[i]!.t_ms <= t) {
      applyEvent(state, model.events[i]!);
      i++;
    }
    out.push({ t_ms: Math.round(t), ...countByStatus(state) });
  }
  return out;
}

/** The time of the first event strictly after `t`, or null at the end. */
export function nextEventTime(model: TimelineModel, t: number): number | null {
  const n = appliedAt(model, t);
  return n < model.events.length ? model.events[n]!.t_ms : null;
}

/** The time of the last event strictly before `t`, or null at the start. */
export function prevEventTime(model: TimelineModel, t: number): number | null {
  let lo = 0;
  let hi = model.events.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (model.events[mid]!.t_ms < t) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo > 0 ? model.events[lo - 1]!.t_ms : null;
}

/** The time of the first fault or landmark marker strictly after `t`, or null. */
export function nextMarkerTime(model: TimelineModel, t: number): number | null {
  const m = model.markers.find((x) => x.t_ms > t);
  return m ? m.t_ms : null;
}

/** Every event of one task, in order: its whole story. */
export function taskStory(model: TimelineModel, id: string): TimelineEvent[] {
  return (model.taskEvents.get(id) ?? []).map((i) => model.events[i]!);
}

/** The last `count` events at or before `t`, newest last. */
export function recentEvents(model: TimelineModel, t: number, count: number): TimelineEvent[] {
  const n = appliedAt(model, t);
  return model.events.slice(Math.max(0, n - count), n);
}

/** Task ids (ULIDs) named in free text, e.g. a violation message. */
export function taskIdsIn(text: string): string[] {
  return Array.from(new Set(text.match(/\b[0-9A-HJKMNP-TV-Z]{26}\b/g) ?? []));
}

/** Store status of a status name in an event kind, for callers that only know the event. */
export function statusOfKind(kind: string): TaskStatus | null {
  const s = TRANSITION_STATUS[kind];
  return s ?? null;
}

/** True for kinds that are store statuses (not `purged`). */
export function isStoreStatus(s: TaskStatus): s is Status {
  return isStatus(s);
}
