// Goal: the replay view's model gives the right task statuses, worker states, clock offsets,
// store refusal windows, markers, violation and verdict at any time. Method: small hand-written
// timelines whose state at each instant is known (tests/fixtures/small.jsonl, and refusals.jsonl
// for the store's refusals), plus real timelines when a test run provides one (ORQ_TIMELINE),
// checked against a direct scan of the events.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  appliedAt,
  buildModel,
  CHECKPOINT_EVERY,
  countByStatus,
  nextEventTime,
  nextMarkerTime,
  parseTimeline,
  prevEventTime,
  refusesWritesOnly,
  stateAt,
  statusOfKind,
  statusSeries,
  taskIdsIn,
  taskStory,
  verdictShown,
  workerName,
  type ReplayState,
  type TimelineEvent,
} from "../../lib/timeline";

const A = "01AAAAAAAAAAAAAAAAAAAAAAAA";
const B = "01BBBBBBBBBBBBBBBBBBBBBBBB";
const C = "01CCCCCCCCCCCCCCCCCCCCCCCC";
const small = readFileSync(join(__dirname, "..", "fixtures", "small.jsonl"), "utf8");

test("parse reads the header and normalises events (empty task and tenant become null)", () => {
  const tl = parseTimeline(small);
  assert.equal(tl.header?.seed, 99);
  assert.equal(tl.header?.replay, "cargo run -p orq-sim -- run --seed 99");
  assert.equal(tl.events.length, 20);
  assert.equal(tl.events[0]!.task, null);
  assert.equal(tl.events[0]!.tenant, "t0");
  assert.deepEqual(tl.problems, []);
});

test("parse skips unreadable lines, reports them by number, and keeps the rest", () => {
  const text = small.split("\n").slice(0, 4).join("\n") + "\n{broken\n[1]\n{\"kind\":\"x\"}\n\n";
  const tl = parseTimeline(text);
  assert.equal(tl.events.length, 3);
  assert.deepEqual(tl.problems, [
    "line 5: not JSON",
    "line 6: not a JSON object",
    "line 7: an event needs t_ms and kind",
  ]);
});

test("parse sorts events that are out of time order and says so", () => {
  const tl = parseTimeline(
    '{"t_ms":5,"actor":"a","kind":"queued","task":"X"}\n{"t_ms":2,"actor":"b","kind":"stall","details":{"ms":1}}\n',
  );
  assert.deepEqual(tl.events.map((e) => e.t_ms), [2, 5]);
  assert.deepEqual(tl.events.map((e) => e.index), [0, 1]);
  assert.match(tl.problems[0]!, /not in time order/);
});

test("a run the server stopped: the aborted line (t_ms null) is kept apart, with no end line and no verdict", () => {
  // The server ends a stopped simulation with its own line, whose t_ms is null, in place of the
  // end line; what arrived before it is a timeline the player can show.
  const cut = small.split("\n").slice(0, 11).join("\n");
  const aborted =
    '{"t_ms":null,"actor":"server","kind":"aborted","task":null,"tenant":null,"attempt":null,"details":{"reason":"the run passed its 60 s deadline"}}';
  const tl = parseTimeline(`${cut}\n${aborted}\n`);
  assert.deepEqual(tl.problems, []);
  assert.deepEqual(tl.aborted, { reason: "the run passed its 60 s deadline" });
  assert.equal(tl.events.length, 10);
  assert.ok(tl.events.every((e) => e.kind !== "aborted"));
  const m = buildModel(tl);
  assert.equal(m.verdict, null);
  assert.equal(m.end_ms, tl.events[9]!.t_ms, "the time axis ends at the last event");
  assert.equal(m.end_ms, 100);
  assert.equal(stateAt(m, m.end_ms).tasks.get(A)?.status, "leased");
  assert.equal(stateAt(m, m.end_ms).tasks.get(B)?.status, "queued");
  assert.equal(nextEventTime(m, m.end_ms), null);
  // A header and the aborted line only: nothing to scrub, and nothing breaks.
  const bare = buildModel(parseTimeline(`${small.split("\n")[0]}\n${aborted}`));
  assert.equal(bare.events.length, 0);
  assert.equal(bare.timeline.aborted?.reason, "the run passed its 60 s deadline");
  assert.equal(stateAt(bare, 0).tasks.size, 0);
  assert.deepEqual(statusSeries(bare, 10).length, 10);
  // An aborted line without a reason still says the run was stopped; one not from the server is
  // an unreadable event, not a stop.
  assert.equal(parseTimeline('{"t_ms":null,"actor":"server","kind":"aborted","details":{}}').aborted?.reason, "no reason given");
  const other = parseTimeline('{"t_ms":null,"actor":"w1","kind":"aborted","details":{}}');
  assert.equal(other.aborted, null);
  assert.deepEqual(other.problems, ["line 1: an event needs t_ms and kind"]);
});

test("task statuses follow the store transitions at each instant", () => {
  const m = buildModel(parseTimeline(small));
  assert.equal(stateAt(m, 4).tasks.size, 0);
  const at5 = stateAt(m, 5);
  assert.equal(at5.tasks.get(A)?.status, "queued");
  assert.equal(at5.tasks.get(B)?.status, "scheduled");
  const at10 = stateAt(m, 10);
  assert.equal(at10.tasks.get(A)?.status, "leased");
  assert.equal(at10.tasks.get(A)?.worker, "w1");
  assert.equal(at10.tasks.get(A)?.attempt, 1);
  assert.equal(stateAt(m, 99).tasks.get(B)?.status, "scheduled");
  assert.equal(stateAt(m, 100).tasks.get(B)?.status, "queued");
  assert.equal(stateAt(m, 160).tasks.get(A)?.status, "retrying");
  assert.equal(stateAt(m, 170).tasks.get(C)?.status, "queued");
});

test("a lossy restart puts every task back to its state at the snapshot", () => {
  const m = buildModel(parseTimeline(small));
  const before = stateAt(m, 179);
  assert.equal(before.tasks.get(A)?.status, "retrying");
  assert.equal(before.tasks.get(B)?.status, "queued");
  assert.ok(before.tasks.has(C));
  const after = stateAt(m, 180);
  assert.equal(after.tasks.get(A)?.status, "leased", "A was leased at the snapshot (t=20)");
  assert.equal(after.tasks.get(B)?.status, "scheduled");
  assert.equal(after.tasks.has(C), false, "C was submitted after the snapshot: lost");
  assert.equal(stateAt(m, 250).tasks.get(B)?.status, "completed");
});

test("workers are up, crashed until their next incarnation starts, stalled for the stall's length", () => {
  const m = buildModel(parseTimeline(small));
  assert.equal(stateAt(m, 1).workers.get("w1")?.condition, "up");
  const crashed = stateAt(m, 30).workers.get("w1")!;
  assert.equal(crashed.condition, "crashed");
  assert.equal(crashed.restart_at_ms, 80);
  assert.equal(crashed.crashes, 1);
  assert.equal(stateAt(m, 149).workers.get("w1")?.condition, "crashed");
  const restarted = stateAt(m, 150).workers.get("w1")!;
  assert.equal(restarted.condition, "up");
  assert.equal(restarted.id, "w1.1");
  assert.equal(restarted.incarnation, 1);
  assert.equal(stateAt(m, 109).workers.get("w2")?.condition, "up");
  const stalled = stateAt(m, 110).workers.get("w2")!;
  assert.equal(stalled.condition, "stalled");
  assert.equal(stalled.stalled_until_ms, 310);
  // The stall ends at 310, after the last event (300): the state at 300 still shows it, and the
  // settle step ends it at the right time even with no event after it.
  assert.equal(stateAt(m, 300).workers.get("w2")?.condition, "stalled");
  const model2 = buildModel(parseTimeline(small.replace('"ms": 200', '"ms": 50')));
  assert.equal(stateAt(model2, 159).workers.get("w2")?.condition, "stalled");
  assert.equal(stateAt(model2, 160).workers.get("w2")?.condition, "up");
  assert.equal(stateAt(model2, 165).workers.get("w2")?.since_ms, 160);
});

test("clock jumps of the store add up; a worker's own jumps go to that worker", () => {
  const m = buildModel(parseTimeline(small));
  assert.equal(stateAt(m, 39).store_clock_offset_ms, 0);
  assert.equal(stateAt(m, 40).store_clock_offset_ms, -700);
  const own = buildModel(
    parseTimeline(
      '{"t_ms":1,"actor":"w3","kind":"worker_start","details":{"incarnation":0,"clock_offset_ms":12}}\n' +
        '{"t_ms":2,"actor":"w3","kind":"clock_jump","details":{"delta_ms":30}}\n',
    ),
  );
  assert.equal(stateAt(own, 1).workers.get("w3")?.clock_offset_ms, 12);
  assert.equal(stateAt(own, 2).workers.get("w3")?.clock_offset_ms, 42);
  assert.equal(stateAt(own, 2).store_clock_offset_ms, 0);
});

test("markers: every fault and landmark, in order, with a readable label", () => {
  const m = buildModel(parseTimeline(small));
  assert.deepEqual(
    m.markers.map((x) => [x.t_ms, x.kind, x.group]),
    [
      [20, "snapshot", "landmark"],
      [30, "crash", "fault"],
      [40, "clock_jump", "fault"],
      [110, "stall", "fault"],
      [120, "lost_reply", "fault"],
      [180, "lossy_restart", "fault"],
      [260, "violation", "landmark"],
      [300, "end", "landmark"],
    ],
  );
  assert.equal(m.markers[2]!.label, "clock_jump · store · -700 ms");
  assert.equal(m.markers[4]!.label, "lost_reply · w2 · script=lease");
});

test("the violation and a failed verdict are found, with the task ids the message names", () => {
  const m = buildModel(parseTimeline(small));
  assert.equal(m.violation?.t_ms, 260);
  assert.equal(m.verdict?.passed, false);
  assert.match(m.verdict!.text, /^Safety/);
  assert.equal(stateAt(m, 259).violation, null);
  assert.equal(stateAt(m, 260).violation?.kind, "violation");
  assert.deepEqual(taskIdsIn(String(m.violation!.details.message)), [B]);
});

test("stepping moves to the previous and next event and marker", () => {
  const m = buildModel(parseTimeline(small));
  assert.equal(nextEventTime(m, 5), 10);
  assert.equal(nextEventTime(m, 7), 10);
  assert.equal(nextEventTime(m, 300), null);
  assert.equal(prevEventTime(m, 10), 5);
  assert.equal(prevEventTime(m, 0), null);
  assert.equal(nextMarkerTime(m, 30), 40);
  assert.equal(appliedAt(m, 5), 5);
  assert.equal(appliedAt(m, -1), 0);
});

test("a task's story is every event that names it, in order", () => {
  const m = buildModel(parseTimeline(small));
  assert.deepEqual(
    taskStory(m, B).map((e) => e.kind),
    ["scheduled", "queued", "leased", "completed"],
  );
  assert.deepEqual(taskStory(m, "nope"), []);
});

test("counts and the status series agree with the states", () => {
  const m = buildModel(parseTimeline(small));
  const c = countByStatus(stateAt(m, 170));
  assert.equal(c.queued, 2);
  assert.equal(c.retrying, 1);
  const series = statusSeries(m, 31);
  assert.equal(series.length, 31);
  assert.equal(series[0]!.t_ms, 0);
  assert.equal(series[30]!.t_ms, 300);
  assert.equal(series[17]!.queued, 2); // t = 170
});

/** One harness event line (task, tenant and attempt null, as the simulator writes them). */
function harness(t_ms: number, actor: string, kind: string, details: Record<string, unknown>): string {
  return JSON.stringify({ t_ms, actor, kind, task: null, tenant: null, attempt: null, details });
}

/** A timeline with every refusal kind: single refusals, episodes, a LOADING window, slow calls. */
const refusals = readFileSync(join(__dirname, "..", "fixtures", "refusals.jsonl"), "utf8");

test("refusal kinds parse, and are fault markers labelled with their word, script and length", () => {
  const tl = parseTimeline(refusals);
  assert.deepEqual(tl.problems, []);
  assert.deepEqual((tl.header?.config.faults as Record<string, unknown>).families, ["network", "refusal"]);
  assert.deepEqual(tl.events[1]!.details, { script: "complete_batch", word: "OOM" });
  assert.equal(tl.events[1]!.task, null);
  const m = buildModel(tl);
  assert.deepEqual(
    m.markers.filter((x) => x.group === "fault").map((x) => [x.t_ms, x.kind, x.label]),
    [
      [10, "refusal", "refusal · w1 · OOM · script=complete_batch"],
      [20, "refusal_episode", "refusal_episode · store · READONLY (writes) · 2400 ms"],
      [30, "refusal", "refusal · w1.2 · BUSY · script=lease"],
      [40, "refusal", "refusal · client · TRYAGAIN · script=enqueue"],
      [50, "slow_call", "slow_call · s1 · script=complete · 3100 ms"],
      [1000, "refusal_episode", "refusal_episode · store · BUSY · 500 ms"],
      [2000, "script_flush", "script_flush · store"],
      [2000, "loading", "loading · store · LOADING · 1200 ms"],
      [4000, "refusal_episode", "refusal_episode · store · NOREPLICAS (writes) · 9000 ms"],
    ],
  );
  assert.deepEqual(m.verdict?.stats, { accepted: 0, refused_calls: 17, reports_delivered_after_refusal: 2 });
});

test("the store's refusal window starts with an episode, ends when its time passes, and a later one replaces it", () => {
  const m = buildModel(parseTimeline(refusals));
  const window = (t: number) => stateAt(m, t).store_refusal;
  assert.equal(window(19), null, "a single refusal opens no window");
  assert.deepEqual(window(20), { kind: "refusal_episode", word: "READONLY", writes_only: true, since_ms: 20, until_ms: 2420 });
  assert.equal(window(999)?.word, "READONLY");
  // BUSY at 1000 replaces READONLY (which would have lasted to 2420) and ends at 1500.
  assert.deepEqual(window(1000), { kind: "refusal_episode", word: "BUSY", writes_only: false, since_ms: 1000, until_ms: 1500 });
  assert.equal(window(1499)?.word, "BUSY");
  assert.equal(window(1500), null, "ends at t_ms + ms (exclusive), with no event at that time");
  assert.equal(window(1999), null, "the replaced READONLY window does not come back");
  // A store restart: the LOADING window refuses every call.
  assert.deepEqual(window(2000), { kind: "loading", word: "LOADING", writes_only: false, since_ms: 2000, until_ms: 3200 });
  assert.equal(window(3199)?.kind, "loading");
  assert.equal(window(3200), null);
  assert.equal(window(4999)?.word, "NOREPLICAS");
  assert.equal(window(4999)?.until_ms, 13000);
  assert.equal(window(5000), null, "faults_off ends the window: the store refuses only while faults are on");
  assert.equal(window(6000), null);
});

test("a refusal window carries across seek checkpoints", () => {
  const lines = [harness(0, "store", "refusal_episode", { word: "OOM", ms: 10 * CHECKPOINT_EVERY })];
  for (let i = 1; i < 3 * CHECKPOINT_EVERY; i++) lines.push(harness(i, "w1", "heartbeat", {}));
  const m = buildModel(parseTimeline(lines.join("\n")));
  assert.ok(m.checkpoints.length >= 3);
  const far = stateAt(m, 2 * CHECKPOINT_EVERY + 5);
  assert.deepEqual(far.store_refusal, { kind: "refusal_episode", word: "OOM", writes_only: true, since_ms: 0, until_ms: 10 * CHECKPOINT_EVERY });
  // The states handed out are copies: changing one changes neither the model nor the next.
  far.store_refusal!.word = "changed";
  far.refusals.set("w1", 99);
  assert.equal(stateAt(m, 2 * CHECKPOINT_EVERY + 5).store_refusal?.word, "OOM");
  assert.equal(stateAt(m, 2 * CHECKPOINT_EVERY + 5).refusals.size, 0);
  assert.equal(stateAt(m, 10 * CHECKPOINT_EVERY).store_refusal, null);
});

test("single refusals are counted by actor slot, incarnations together; a refusing worker exists", () => {
  const m = buildModel(parseTimeline(refusals));
  assert.deepEqual(Object.fromEntries(stateAt(m, 9).refusals), {});
  assert.deepEqual(Object.fromEntries(stateAt(m, 40).refusals), { w1: 2, client: 1 });
  assert.equal(stateAt(m, 30).workers.get("w1")?.condition, "up");
  assert.equal(stateAt(m, 40).workers.has("client"), false);
  assert.ok(stateAt(m, 50).workers.has("s1"), "a slow call's actor shows as a worker");
  const only = buildModel(parseTimeline(harness(7, "w4.1", "refusal", { script: "heartbeat", word: "MASTERDOWN" })));
  assert.equal(stateAt(only, 7).workers.get("w4")?.id, "w4.1");
});

test("which words refuse only writes", () => {
  for (const w of ["OOM", "READONLY", "NOREPLICAS"]) assert.equal(refusesWritesOnly(w), true, w);
  for (const w of ["BUSY", "LOADING", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN"]) assert.equal(refusesWritesOnly(w), false, w);
});

test("small helpers: worker slot names and transition kinds", () => {
  assert.equal(workerName("w1.2"), "w1");
  assert.equal(workerName("s1"), "s1");
  assert.equal(statusOfKind("released"), "queued");
  assert.equal(statusOfKind("replayed"), "queued");
  assert.equal(statusOfKind("side_effect"), null);
});

/** Status of each task after the events up to t, by the plainest scan (the oracle). */
function oracle(events: TimelineEvent[], t: number): Map<string, string> {
  const out = new Map<string, string>();
  let snap: Map<string, string> | null = null;
  for (const e of events) {
    if (e.t_ms > t) break;
    if (e.kind === "snapshot") snap = new Map(out);
    if (e.kind === "lossy_restart" && snap) {
      out.clear();
      for (const [k, v] of snap) out.set(k, v);
      snap = null;
    }
    const s = statusOfKind(e.kind);
    if (s && e.task) out.set(e.task, s);
  }
  return out;
}

test("seeking through checkpoints gives the same states as a scan from the start", () => {
  // A long synthetic timeline: many checkpoints, tasks moving through every status.
  const lines: string[] = ['{"kind":"header","version":1,"seed":1,"config":{},"replay":"x"}'];
  const kinds = ["queued", "leased", "retrying", "queued", "leased", "completed"];
  const n = CHECKPOINT_EVERY * 6;
  for (let i = 0; i < n; i++) {
    const task = `T${String(i % 97).padStart(25, "0")}`;
    const kind = i === n / 2 ? "snapshot" : i === n - 10 ? "lossy_restart" : kinds[i % kinds.length]!;
    lines.push(JSON.stringify({ t_ms: i * 3, actor: "w1", kind, task, tenant: "t", attempt: 1, details: {} }));
  }
  const m = buildModel(parseTimeline(lines.join("\n")));
  assert.ok(m.checkpoints.length >= 6);
  for (const t of [0, 1, 700, 1536, 2300, 3000, 4600, n * 3]) {
    const want = oracle(m.events, t);
    const got = stateAt(m, t);
    assert.equal(got.tasks.size, want.size, `t=${t}`);
    for (const [id, s] of want) assert.equal(got.tasks.get(id)?.status, s, `t=${t} ${id}`);
  }
});

/** The store's refusal window at t by the plainest scan: the last window opened, unless it ran out or the faults ended. */
function refusalOracle(events: TimelineEvent[], t: number): ReplayState["store_refusal"] {
  let out: ReplayState["store_refusal"] = null;
  for (const e of events) {
    if (e.t_ms > t) break;
    if (e.kind === "faults_off") out = null;
    if (e.kind === "refusal_episode" || e.kind === "loading") {
      const word = String(e.details.word);
      const ms = Number(e.details.ms);
      out = { kind: e.kind, word, writes_only: refusesWritesOnly(word), since_ms: e.t_ms, until_ms: e.t_ms + ms };
    }
  }
  return out && out.until_ms > t ? out : null;
}

/**
 * Real timelines: the committed one (a planted bug's violation), ORQ_TIMELINE when given, and two
 * fresh runs of the simulator when it is built (target/debug/orq-sim: a clean seed and a lossy one).
 */
function realTimelines(): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const fixture = join(__dirname, "..", "fixtures", "seed3-planted-lease_ignores_run_at.jsonl");
  out.push(["committed planted-bug timeline", readFileSync(fixture, "utf8")]);
  if (process.env.ORQ_TIMELINE) {
    out.push([process.env.ORQ_TIMELINE, readFileSync(process.env.ORQ_TIMELINE, "utf8")]);
  }
  const sim = join(__dirname, "..", "..", "..", "target", "debug", "orq-sim");
  if (existsSync(sim)) {
    const dir = mkdtempSync(join(tmpdir(), "orq-timeline-"));
    try {
      for (const args of [["--seed", "7"], ["--seed", "3", "--lossy"]]) {
        const file = join(dir, `${args.join("")}.jsonl`);
        // Exit code 1 or 2 (a violation) still writes the timeline.
        spawnSync(sim, ["run", ...args, "--timeline", file], { stdio: "ignore", timeout: 120_000 });
        if (existsSync(file)) out.push([`orq-sim run ${args.join(" ")}`, readFileSync(file, "utf8")]);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  return out;
}

test("real simulator timelines agree with the scan, and have a header and a verdict", () => {
  for (const [name, text] of realTimelines()) {
    const m = buildModel(parseTimeline(text));
    assert.deepEqual(m.timeline.problems, [], name);
    assert.ok(m.header?.replay, `${name}: a header with the replay command`);
    assert.ok(m.verdict, `${name}: an end event with a verdict`);
    const times = Array.from(new Set(m.events.map((e) => e.t_ms)));
    for (const t of times.filter((_, i) => i % 5 === 0).concat([m.end_ms])) {
      const want = oracle(m.events, t);
      const got = stateAt(m, t);
      assert.equal(got.tasks.size, want.size, `${name} t=${t}`);
      for (const [id, s] of want) assert.equal(got.tasks.get(id)?.status, s, `${name} t=${t} ${id}`);
    }
    // The refusal window, at each window's edges and inside it.
    for (const e of m.events.filter((x) => x.kind === "refusal_episode" || x.kind === "loading")) {
      const ms = Number(e.details.ms);
      for (const t of [e.t_ms - 1, e.t_ms, e.t_ms + Math.floor(ms / 2), e.t_ms + ms - 1, e.t_ms + ms]) {
        assert.deepEqual(stateAt(m, t).store_refusal, refusalOracle(m.events, t), `${name} refusal window t=${t}`);
      }
    }
    const refusalEvents = m.events.filter((x) => x.kind === "refusal").length;
    const counted = Array.from(stateAt(m, m.end_ms).refusals.values()).reduce((a, n) => a + n, 0);
    assert.equal(counted, refusalEvents, `${name}: every single refusal counted`);
    if (m.violation) {
      assert.equal(m.verdict!.passed, false, `${name}: a violation fails the run`);
    }
  }
});

test("a verdict in Rust's debug form reads as text", () => {
  assert.equal(verdictShown('Safety("w1: task was Some(\\"leased\\")")'), 'Safety: w1: task was Some("leased")');
  assert.equal(verdictShown("Pass"), "Pass");
  assert.equal(verdictShown('Crash("bad \\u{1f600}")'), 'Crash("bad \\u{1f600}")', "an escape JSON lacks: raw");
});
