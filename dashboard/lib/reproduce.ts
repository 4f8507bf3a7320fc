// The command that reproduces a simulator run, built from a timeline header's seed and options,
// never taken from the file's own `replay` text: the Replay view offers it for pasting into a
// terminal, and a crafted timeline could put any shell command there. Each part is checked before
// it goes in: the seed a whole number in orq-sim's range, the planted bug and the fault families
// names orq-sim knows, the numbers whole and in range, no option this dashboard does not know.
// When a part fails there is no command, and the reason says which part (the view shows it in
// place of Copy): a command without that part would run another simulation than the file's.
// Pure TypeScript, unit-tested (tests/unit/reproduce.test.ts, which also checks the names below
// against `orq-sim options` and the command against real runs' headers).

import type { TimelineHeader } from "./timeline";

/** What reproduces the run: `orq-sim run` from the source checkout, as orq-sim itself writes it. */
export const REPLAY_PREFIX = "cargo run -p orq-sim -- run";

/** The fault families of `orq-sim run --faults` (`orq-sim options`: `families`), in its order. */
export const SIM_FAULT_FAMILIES: readonly string[] = ["crash", "stall", "clock", "restart", "network", "refusal"];

/** The bugs of `orq-sim run --planted` (`orq-sim options`: `planted`), `none` first. */
export const SIM_PLANTED_BUGS: readonly string[] = [
  "none",
  "complete_ignores_token",
  "lease_ignores_run_at",
  "reap_does_not_count_attempt",
  "worker_ignores_lost_lease",
  "worker_drops_refused_outcome",
  "heartbeat_waits_interval",
  "store_loads_library_once",
  "pull_ignores_lost_lease",
  "lease_ignores_tenants",
  "lease_ignores_max_inflight",
  "lease_ignores_rate_limit",
  "lease_ignores_pause",
];

/** Most tasks of `orq-sim run --tasks` (`orq-sim options`: `tasks_max`). */
export const SIM_TASKS_MAX = 1000;

/** orq-sim's default `--full-check-every` (FULL_CHECK_EVERY in sim/src/harness/config.rs): left out of the command, as orq-sim leaves it out. */
export const SIM_FULL_CHECK_EVERY = 1000;

/** The largest seed (`orq-sim run --seed` takes a u64). */
export const SEED_MAX = 18446744073709551615n;

/** Longest piece of a refused value quoted in a reason. */
const SHOWN_CHARS_MAX = 40;

/** The options of `config.chosen` this dashboard can put in a command. */
const CHOSEN_KEYS = ["families", "tasks"];

/** The command, or why there is none (a sentence naming the part of the header at fault). */
export type Reproduce = { ok: true; command: string } | { ok: false; reason: string };

/** A value as a reason quotes it: JSON, cut short. */
function shown(v: unknown): string {
  const s = JSON.stringify(v) ?? String(v);
  return s.length > SHOWN_CHARS_MAX ? `${s.slice(0, SHOWN_CHARS_MAX)}…` : s;
}

/**
 * A seed as decimal digits, or null when it is not a whole number in 0..=SEED_MAX that the
 * browser read exactly (a JSON number above 2^53 - 1 has been rounded by the time it is read).
 */
export function seedDigits(seed: unknown): string | null {
  if (typeof seed === "number") {
    return Number.isSafeInteger(seed) && seed >= 0 ? String(seed) : null;
  }
  if (typeof seed === "string" && /^\d{1,20}$/.test(seed)) {
    const n = BigInt(seed);
    return n <= SEED_MAX ? n.toString() : null;
  }
  return null;
}

function wholeIn(v: unknown, min: number, max: number): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= min && v <= max;
}

/** The reproduce command of a timeline `header` (module comment). */
export function reproduceCommand(header: TimelineHeader | null): Reproduce {
  if (!header) return { ok: false, reason: "the file has no header line, so no seed" };
  const seed = seedDigits(header.seed);
  if (seed === null) {
    return { ok: false, reason: `seed ${shown(header.seed)} is not a whole number from 0 to ${SEED_MAX} that the browser can read exactly` };
  }
  const c = header.config;
  if (c.seed !== undefined && seedDigits(c.seed) !== seed) {
    return { ok: false, reason: `the header's seed ${seed} and its config's ${shown(c.seed)} differ` };
  }
  const parts = [REPLAY_PREFIX, "--seed", seed];
  if (c.planted !== undefined && c.planted !== null && c.planted !== "none") {
    if (typeof c.planted !== "string" || !SIM_PLANTED_BUGS.includes(c.planted)) {
      return { ok: false, reason: `planted bug ${shown(c.planted)} is not one orq-sim knows` };
    }
    parts.push("--planted", c.planted);
  }
  if (c.lossy_restart !== undefined && c.lossy_restart !== false) {
    if (c.lossy_restart !== true) return { ok: false, reason: `lossy_restart ${shown(c.lossy_restart)} is not true or false` };
    parts.push("--lossy");
  }
  if (c.full_check_every !== undefined && c.full_check_every !== SIM_FULL_CHECK_EVERY) {
    if (!wholeIn(c.full_check_every, 1, Number.MAX_SAFE_INTEGER)) {
      return { ok: false, reason: `full_check_every ${shown(c.full_check_every)} is not a whole number from 1` };
    }
    parts.push("--full-check-every", String(c.full_check_every));
  }
  if (c.chosen !== undefined) {
    const chosen = c.chosen;
    if (chosen === null || typeof chosen !== "object" || Array.isArray(chosen)) {
      return { ok: false, reason: `chosen ${shown(chosen)} is not an object` };
    }
    const ch = chosen as Record<string, unknown>;
    const unknown = Object.keys(ch).filter((k) => !CHOSEN_KEYS.includes(k));
    if (unknown.length > 0) return { ok: false, reason: `chosen ${shown(unknown[0])} is not an option this dashboard knows` };
    if (ch.families !== undefined) {
      const f = ch.families;
      const known = Array.isArray(f) && f.every((x) => typeof x === "string" && SIM_FAULT_FAMILIES.includes(x)) && new Set(f).size === f.length;
      if (!known) return { ok: false, reason: `fault families ${shown(f)} are not a list of the families orq-sim knows, each once` };
      // In orq-sim's order, as it writes them.
      const on = SIM_FAULT_FAMILIES.filter((x) => (f as string[]).includes(x));
      parts.push("--faults", on.length === 0 ? "none" : on.join(","));
    }
    if (ch.tasks !== undefined) {
      if (!wholeIn(ch.tasks, 1, SIM_TASKS_MAX)) return { ok: false, reason: `tasks ${shown(ch.tasks)} is not a whole number from 1 to ${SIM_TASKS_MAX}` };
      parts.push("--tasks", String(ch.tasks));
    }
  }
  return { ok: true, command: parts.join(" ") };
}
