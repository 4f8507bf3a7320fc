// Goal: running a simulation from the Replay view sends what the form says, reads the streamed
// timeline right whatever the chunk boundaries, tells a finished run from one the server stopped
// or one cut short, and waits for the simulator's build as long as the server asks and no longer.
// Method: the pure functions of lib/simulate.ts over hand-made forms, chunks and errors; and the
// stream reader over a real timeline from this run's orq-sim when there is one (ORQ_SIM_BIN or
// ../target/debug/orq-sim), cut into chunks of every size, checked against the whole text.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { ApiError } from "../../lib/api";
import {
  advance,
  buildRequest,
  classifyLine,
  defaultForm,
  emptyProgress,
  LineSplitter,
  outcome,
  randomSeed,
  RANDOM_SEED_MAX,
  refusal,
  RETRY_WAIT_S_MAX,
  retryWait,
  timelineName,
  type SimForm,
} from "../../lib/simulate";
import type { SimulatorInfo } from "../../lib/types";

const INFO: SimulatorInfo = {
  available: true,
  building: false,
  buildable: false,
  reason: null,
  running: false,
  families: ["crash", "stall", "clock", "restart", "network", "refusal"],
  planted: ["none", "complete_ignores_token", "lease_ignores_run_at"],
  limits: { seed_max: 9007199254740991, tasks_max: 1000, timeout_ms: 60000, memory_bytes: 1073741824 },
};

const form = (f: Partial<SimForm>): SimForm => ({ ...defaultForm(42), ...f });

test("the request says the seed's own fault mix as null, chosen families in the server's order, and no faults as []", () => {
  assert.deepEqual(buildRequest(form({}), INFO), { seed: 42, faults: null, planted: "none", lossy: false, tasks: null });
  assert.deepEqual(buildRequest(form({ mix: "chosen", families: ["network", "crash"] }), INFO), {
    seed: 42,
    faults: ["crash", "network"],
    planted: "none",
    lossy: false,
    tasks: null,
  });
  assert.deepEqual((buildRequest(form({ mix: "chosen", families: [] }), INFO) as { faults: unknown }).faults, []);
  // Families ticked before switching back to the seed's own draw are not sent.
  assert.equal((buildRequest(form({ mix: "seed", families: ["crash"] }), INFO) as { faults: unknown }).faults, null);
  assert.deepEqual(buildRequest(form({ seed: " 7 ", planted: "complete_ignores_token", lossy: true, tasks: "1000" }), INFO), {
    seed: 7,
    faults: null,
    planted: "complete_ignores_token",
    lossy: true,
    tasks: 1000,
  });
});

test("the form is checked against the server's limits: seeds exact in JavaScript, tasks within 1..tasks_max", () => {
  const seedError = /^seed: a whole number from 0 to 9007199254740991$/;
  for (const seed of ["", "-1", "1.5", "1e3", "0x10", "abc", "9007199254740992", "18446744073709551615"]) {
    assert.match(String(buildRequest(form({ seed }), INFO)), seedError, `seed ${JSON.stringify(seed)}`);
  }
  assert.equal((buildRequest(form({ seed: "0" }), INFO) as { seed: number }).seed, 0);
  assert.equal((buildRequest(form({ seed: "9007199254740991" }), INFO) as { seed: number }).seed, 9007199254740991);
  // A server that allows more than JavaScript can say exactly is held to 2^53 - 1.
  const wide = { ...INFO, limits: { ...INFO.limits, seed_max: 2 ** 64 } };
  assert.match(String(buildRequest(form({ seed: "9007199254740993" }), wide)), seedError);
  // A smaller limit is the server's.
  const narrow = { ...INFO, limits: { ...INFO.limits, seed_max: 100, tasks_max: 50 } };
  assert.equal(buildRequest(form({ seed: "101" }), narrow), "seed: a whole number from 0 to 100");
  for (const tasks of ["0", "51", "2.5", "-3", "many"]) {
    assert.equal(buildRequest(form({ tasks }), narrow), "tasks: a whole number from 1 to 50, or empty for the seed's own", tasks);
  }
  assert.equal((buildRequest(form({ tasks: "50" }), narrow) as { tasks: number }).tasks, 50);
  // Without the simulator the server's tasks_max is 0: only the lower bound is the form's.
  const none = { ...INFO, families: [], planted: [], limits: { ...INFO.limits, tasks_max: 0 } };
  assert.equal((buildRequest(form({ tasks: "5000" }), none) as { tasks: number }).tasks, 5000);
  assert.equal(buildRequest(form({ tasks: "0" }), none), "tasks: a whole number from 1, or empty for the seed's own");
  assert.equal(buildRequest(form({ mix: "chosen", families: ["crash", "meteor"] }), INFO), "fault families: this simulator has no meteor");
  assert.equal(buildRequest(form({ planted: "typo" }), INFO), "planted bug: this simulator has no typo");
});

test("a random seed stays within 0..RANDOM_SEED_MAX, and the timeline is named after the seed", () => {
  assert.equal(randomSeed(() => 0), 0);
  assert.equal(randomSeed(() => 0.999999999999), RANDOM_SEED_MAX);
  assert.ok(RANDOM_SEED_MAX <= INFO.limits.seed_max);
  assert.equal(timelineName(42), "seed-42.jsonl");
});

test("the line splitter keeps a partial line until its end arrives, and hands over an unterminated last line", () => {
  const s = new LineSplitter();
  assert.deepEqual(s.push('{"kind":"hea'), []);
  assert.deepEqual(s.push('der"}\n{"t_ms":1,'), ['{"kind":"header"}']);
  assert.deepEqual(s.push('"kind":"x"}\r\n\n{"t_ms":2'), ['{"t_ms":1,"kind":"x"}', ""]);
  assert.deepEqual(s.push("\r"), []);
  assert.deepEqual(s.push("\n"), ['{"t_ms":2']);
  assert.equal(s.finish(), null, "nothing left after a line end");
  s.push('{"t_ms":3}');
  assert.equal(s.finish(), '{"t_ms":3}');
  assert.equal(s.finish(), null, "finish hands the rest over once");
});

const HEADER = JSON.stringify({
  kind: "header",
  version: 1,
  seed: 7,
  config: { faults: { families: ["crash"] } },
  replay: "cargo run -p orq-sim -- run --seed 7 --faults crash",
});
const ABORTED = '{"t_ms":null,"actor":"server","kind":"aborted","task":null,"tenant":null,"attempt":null,"details":{"reason":"the run passed its 60 s deadline"}}';

test("lines are recognised: the header, events, a violation, the end with its verdict, the server's aborted line", () => {
  assert.deepEqual(classifyLine(HEADER), {
    kind: "header",
    seed: 7,
    replay: "cargo run -p orq-sim -- run --seed 7 --faults crash",
    families: ["crash"],
  });
  assert.deepEqual(classifyLine('{"t_ms":5,"actor":"w1","kind":"leased","details":{}}'), { kind: "event", event: "leased", t_ms: 5, message: null });
  assert.deepEqual(classifyLine('{"t_ms":9,"actor":"checker","kind":"violation","details":{"message":"two leases"}}'), {
    kind: "event",
    event: "violation",
    t_ms: 9,
    message: "two leases",
  });
  assert.deepEqual(classifyLine('{"t_ms":10,"actor":"harness","kind":"end","details":{"verdict":"Pass","stats":{}}}'), { kind: "end", t_ms: 10, verdict: "Pass" });
  assert.deepEqual(classifyLine(ABORTED), { kind: "aborted", reason: "the run passed its 60 s deadline" });
  assert.deepEqual(classifyLine('{"t_ms":null,"actor":"server","kind":"aborted","details":{}}'), { kind: "aborted", reason: "no reason given" });
  assert.deepEqual(classifyLine("  "), { kind: "blank" });
  for (const bad of ["{broken", "[1]", '{"t_ms":1}', "null"]) assert.deepEqual(classifyLine(bad), { kind: "unreadable" }, bad);
});

test("progress counts events and ends as passed, failed, aborted by the server, or cut short", () => {
  const run = (lines: string[]) => {
    const p = emptyProgress();
    for (const l of lines) advance(p, l);
    return p;
  };
  const events = ['{"t_ms":1,"actor":"w1","kind":"worker_start"}', '{"t_ms":4,"actor":"w1","kind":"leased"}'];
  const passed = run([HEADER, ...events, '{"t_ms":8,"actor":"harness","kind":"end","details":{"verdict":"Pass"}}']);
  assert.equal(passed.header, true);
  assert.deepEqual(passed.families, ["crash"]);
  assert.equal(passed.events, 3, "the end line counts, as in the player");
  assert.equal(passed.last_t_ms, 8);
  assert.equal(outcome(passed), "passed");
  const failed = run([
    HEADER,
    ...events,
    '{"t_ms":6,"actor":"checker","kind":"violation","details":{"message":"first"}}',
    '{"t_ms":7,"actor":"checker","kind":"violation","details":{"message":"second"}}',
    '{"t_ms":9,"actor":"harness","kind":"end","details":{"verdict":"Safety(\\"first\\")"}}',
  ]);
  assert.equal(failed.violation, "first");
  assert.equal(failed.verdict, 'Safety("first")');
  assert.equal(outcome(failed), "failed");
  const aborted = run([HEADER, ...events, ABORTED]);
  assert.equal(aborted.events, 2, "the aborted line is not an event");
  assert.equal(aborted.last_t_ms, 4);
  assert.equal(aborted.aborted, "the run passed its 60 s deadline");
  assert.equal(outcome(aborted), "aborted");
  const cut = run([HEADER, events[0]!, "{half a li"]);
  assert.equal(outcome(cut), "cut");
  assert.equal(cut.unreadable, 1);
  assert.equal(run([ABORTED]).header, false, "stopped before the header: nothing to open");
});

test("a 503 with Retry-After is asked again after that wait, within 15 minutes in all; other errors are not", () => {
  const building = new ApiError(503, "unavailable", "building orq-sim", false, 30);
  assert.equal(retryWait(building, 0), 30);
  assert.equal(retryWait(new ApiError(503, "unavailable", "x", false, 0), 0), 1, "never a busy loop");
  assert.equal(retryWait(building, RETRY_WAIT_S_MAX - 10), 10, "the last wait ends at the cap");
  assert.equal(retryWait(building, RETRY_WAIT_S_MAX), null, "the cap is reached");
  assert.equal(retryWait(new ApiError(503, "unavailable", "no simulator"), 0), null, "no Retry-After: not asked again");
  assert.equal(retryWait(new ApiError(409, "conflict", "busy", false, 5), 0), null);
  assert.equal(retryWait(new Error("boom"), 0), null);
});

test("a refused run is explained where it belongs: bad values by the form, a run in progress as a notice, the rest as errors", () => {
  assert.deepEqual(refusal(new ApiError(422, "unprocessable", "tasks: at most 1000")), { place: "form", message: "tasks: at most 1000" });
  const busy = refusal(new ApiError(409, "conflict", "a simulation is running"));
  assert.equal(busy.place, "busy");
  assert.equal(
    (busy as { message: string }).message,
    "A simulation is already running on this orq (one at a time): Run is enabled again when it ends.",
    "the server's own wording is not repeated after the view's",
  );
  const admin = new ApiError(403, "forbidden", "needs an admin key", true);
  assert.deepEqual(refusal(admin), { place: "error", error: admin });
});

test("a real streamed timeline reads the same in chunks of any size as in one piece", (t) => {
  // The simulator of this run, when built: its timeline, fed in chunks of several sizes (so that
  // chunk ends fall inside lines and inside multi-byte characters do not matter: the text is
  // already decoded), must give the same lines and progress as the whole text.
  const bin = process.env.ORQ_SIM_BIN ?? join(__dirname, "..", "..", "..", "target", "debug", "orq-sim");
  if (!existsSync(bin)) {
    t.skip(`no simulator at ${bin}`);
    return;
  }
  const dir = mkdtempSync(join(tmpdir(), "orq-sim-stream-"));
  try {
    const file = join(dir, "seed.jsonl");
    spawnSync(bin, ["run", "--seed", "5", "--planted", "complete_ignores_token", "--timeline", file], { encoding: "utf8", timeout: 300_000 });
    if (!existsSync(file)) {
      t.skip("the simulator wrote no timeline");
      return;
    }
    const text = readFileSync(file, "utf8");
    const whole = text.split("\n").filter((l) => l !== "");
    for (const size of [1, 7, 100, 4096, text.length]) {
      const s = new LineSplitter();
      const lines: string[] = [];
      const p = emptyProgress();
      for (let i = 0; i < text.length; i += size) {
        for (const l of s.push(text.slice(i, i + size))) {
          lines.push(l);
          advance(p, l);
        }
      }
      const last = s.finish();
      if (last !== null) lines.push(last);
      assert.deepEqual(lines.filter((l) => l !== ""), whole, `chunks of ${size}`);
      assert.equal(p.header, true);
      assert.equal(p.events, whole.length - 1, "every line but the header is an event");
      assert.notEqual(p.verdict, null, "the end line's verdict");
      assert.equal(p.unreadable, 0);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
