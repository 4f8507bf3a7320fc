// The browser tests' world: a live `orq serve` on the embedded store (no Redis), on a free
// loopback port, serving the built dashboard (`out/`) and a directory of simulator timelines; a
// headless Debian Chromium driven by playwright-core; and helpers that wait for conditions with
// generous deadlines (the machine is a loaded 2-core box: never assert on elapsed time).
// `stop()` kills orq and the browser whatever happened; an exit hook does it too.

import assert from "node:assert/strict";
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

export const DASHBOARD_DIR = resolve(__dirname, "..", "..");
export const REPO_DIR = resolve(DASHBOARD_DIR, "..");
export const OUT_DIR = join(DASHBOARD_DIR, "out");
export const SCREENSHOT_DIR = join(DASHBOARD_DIR, "test-results", "screenshots");
export const ORQ_BIN = process.env.ORQ_BIN ?? join(REPO_DIR, "target", "debug", "orq");
export const SIM_BIN = process.env.ORQ_SIM_BIN ?? join(REPO_DIR, "target", "debug", "orq-sim");
export const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";

/** Deadline of one wait-for-condition (ms): generous, because CI shares two cores. */
export const WAIT_MS = 60_000;
/** Deadline for orq to answer /healthz after start (ms). */
export const START_MS = 120_000;

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Poll `check` until it returns a truthy value; throw `what` with the last value at the deadline. */
export async function waitFor<T>(what: string, check: () => Promise<T> | T, timeout_ms = WAIT_MS): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeout_ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v) return v as NonNullable<T>;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    }
    await sleep(200);
  }
}

async function freePort(): Promise<number> {
  return new Promise((res, rej) => {
    const s = createServer();
    s.once("error", rej);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      const port = typeof addr === "object" && addr ? addr.port : 0;
      s.close(() => res(port));
    });
  });
}

export interface World {
  base: string;
  timelinesDir: string;
  browser: Browser;
  orq: ChildProcess;
  /** The admin API key when started with `auth`. */
  key: string | null;
  /** The tenant API key when started with `tenantKey`. */
  tenantKey: string | null;
  /** orq's output so far (for failure messages). */
  log: () => string;
  api: <T = unknown>(path: string, init?: { method?: string; body?: unknown; headers?: Record<string, string> }) => Promise<{ status: number; body: T }>;
  stop: () => Promise<void>;
}

/** Run the simulator for one seed; returns the timeline path (a violation's non-zero exit is fine). */
export function simulate(dir: string, name: string, args: string[]): string {
  const file = join(dir, name);
  const r = spawnSync(SIM_BIN, ["run", ...args, "--timeline", file], { encoding: "utf8", timeout: 300_000 });
  if (!existsSync(file)) {
    throw new Error(`orq-sim ${args.join(" ")} wrote no timeline: ${r.stderr || r.stdout || r.error?.message}`);
  }
  return file;
}

export interface WorldOptions {
  /** Start orq with authentication: an API keys file holding one admin key, returned in `key`. */
  auth?: boolean;
  /** With `auth`: also a key limited to this tenant and these queues, returned in `tenantKey`. */
  tenantKey?: { tenant: string; queues: string[] };
  /** Start orq without `--timelines DIR` (default: with a fresh directory). */
  noTimelines?: boolean;
}

/** True when this orq can make API keys (`orq key new`): the auth test needs it. */
export function orqHasKeys(): boolean {
  return (spawnSync(ORQ_BIN, ["key", "new", "--help"], { encoding: "utf8" }).status ?? 1) === 0;
}

export async function startWorld(opts: WorldOptions = {}): Promise<World> {
  for (const [what, path] of [
    ["orq (cargo build --bin orq)", ORQ_BIN],
    ["orq-sim (cargo build --bin orq-sim)", SIM_BIN],
    ["the dashboard export (npm run build)", join(OUT_DIR, "index.html")],
    ["Chromium (apt-get install chromium)", CHROMIUM],
  ]) {
    if (!existsSync(path!)) throw new Error(`missing ${what}: ${path}`);
  }
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const timelinesDir = mkdtempSync(join(tmpdir(), "orq-dash-timelines-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const help = spawnSync(ORQ_BIN, ["serve", "--help"], { encoding: "utf8" }).stdout ?? "";
  const args = ["serve", "--listen", `127.0.0.1:${port}`, "--dashboard", OUT_DIR, "--concurrency", "4"];
  if (!opts.noTimelines) args.push("--timelines", timelinesDir);
  if (help.includes("--no-dashboard-build")) args.push("--no-dashboard-build");
  let key: string | null = null;
  let tenantKey: string | null = null;
  if (opts.auth) {
    const newKey = (flags: string[]): [string, string] => {
      const made = spawnSync(ORQ_BIN, ["key", "new", ...flags], { encoding: "utf8" });
      if (made.status !== 0) throw new Error(`orq key new: ${made.stderr}`);
      const [first, ...entry] = made.stdout.split("\n");
      return [(first ?? "").trim(), entry.join("\n")];
    };
    const [admin, adminEntry] = newKey(["--admin", "--name", "dashboard-test"]);
    key = admin;
    let entries = adminEntry;
    if (opts.tenantKey) {
      const [k, entry] = newKey(["--tenant", opts.tenantKey.tenant, "--queues", opts.tenantKey.queues.join(","), "--name", "dashboard-tenant"]);
      tenantKey = k;
      entries += "\n" + entry;
    }
    const file = join(timelinesDir, "keys.toml");
    writeFileSync(file, entries);
    args.push("--api-keys", file);
  }
  let output = "";
  // The embedded store, always: never a Redis named by the environment.
  const env: NodeJS.ProcessEnv = { ...process.env, RUST_LOG: process.env.RUST_LOG ?? "warn" };
  delete env.ORQ_REDIS_URL;
  delete env.ORQ_QUEUES;
  const orq = spawn(ORQ_BIN, args, { stdio: ["ignore", "pipe", "pipe"], env });
  const keep = (b: Buffer) => {
    output = (output + b.toString()).slice(-20_000);
  };
  orq.stdout?.on("data", keep);
  orq.stderr?.on("data", keep);
  const killOrq = () => {
    if (orq.exitCode === null && orq.signalCode === null) orq.kill("SIGKILL");
  };
  process.once("exit", killOrq);
  let browser: Browser | null = null;
  const stop = async () => {
    try {
      await browser?.close();
    } catch {
      // already gone
    }
    if (orq.exitCode === null && orq.signalCode === null) {
      orq.kill("SIGTERM");
      const exited = await Promise.race([
        new Promise<boolean>((r) => orq.once("exit", () => r(true))),
        sleep(10_000).then(() => false),
      ]);
      if (!exited) killOrq();
    }
    process.removeListener("exit", killOrq);
    rmSync(timelinesDir, { recursive: true, force: true });
  };
  const api = async <T,>(path: string, init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const headers: Record<string, string> = { ...(init.body === undefined ? {} : { "Content-Type": "application/json" }), ...init.headers };
    if (key) headers.Authorization = `Bearer ${key}`;
    const res = await fetch(`${base}/api/v1${path}`, {
      method: init.method ?? "GET",
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // text body
    }
    return { status: res.status, body: body as T };
  };
  try {
    await waitFor(
      "orq to answer /api/v1/healthz",
      async () => {
        if (orq.exitCode !== null) throw new Error(`orq exited with ${orq.exitCode}: ${output}`);
        return (await fetch(`${base}/api/v1/healthz`).catch(() => null))?.ok;
      },
      START_MS,
    );
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      // Root in a container: Chromium's sandbox needs user namespaces it may not have.
      args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
    });
  } catch (e) {
    await stop();
    throw e;
  }
  return { base, timelinesDir, browser, orq, key, tenantKey, log: () => output, api, stop };
}

/** A page that records console errors, uncaught exceptions and Content-Security-Policy violations. */
export interface TestPage {
  page: Page;
  context: BrowserContext;
  errors: string[];
  close: () => Promise<void>;
}

export async function newPage(world: World): Promise<TestPage> {
  const context = await world.browser.newContext({ viewport: { width: 1440, height: 1000 }, baseURL: world.base });
  // A violation of orq's Content-Security-Policy (server/src/security_headers.rs) fails the test
  // like a console error: every view must work under the policy as it is.
  await context.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) => {
      console.error(`CSP violation: ${e.effectiveDirective} blocked ${e.blockedURI || "an inline script or style"} at ${e.sourceFile}:${e.lineNumber}`);
    });
  });
  const page = await context.newPage();
  page.setDefaultTimeout(WAIT_MS);
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console: ${m.text()} @ ${m.location().url}`);
  });
  page.on("pageerror", (e) => errors.push(`pageerror: ${e.message}`));
  return { page, context, errors, close: () => context.close() };
}

/** Wait until the locator's text content, trimmed, satisfies `ok`. */
/**
 * Run `body` with a fresh page of `world` (its tab holding the API key `key` when given); fails
 * on console errors other than the `allowed` ones, and adds the tail of orq's output to a failure.
 */
export async function withPage(
  world: World,
  body: (p: TestPage) => Promise<void>,
  opts: { allowed?: RegExp | null; key?: string } = {},
): Promise<void> {
  const p = await newPage(world);
  if (opts.key !== undefined) {
    await p.context.addInitScript((k) => window.sessionStorage.setItem("orq.apiKey", k), opts.key);
  }
  const allowed = opts.allowed ?? null;
  try {
    await body(p);
    assert.deepEqual(
      p.errors.filter((e) => !(allowed && allowed.test(e))),
      [],
      "no console errors or uncaught exceptions",
    );
  } catch (e) {
    if (e instanceof Error) e.message += `\n--- orq output (tail) ---\n${world.log().slice(-3000)}`;
    throw e;
  } finally {
    await p.close();
  }
}

export async function waitText(page: Page, selector: string, ok: (t: string) => boolean, what: string): Promise<string> {
  return waitFor(what, async () => {
    const loc = page.locator(selector).first();
    if ((await loc.count()) === 0) return null;
    const t = ((await loc.textContent()) ?? "").trim();
    return ok(t) ? t : null;
  });
}

export async function screenshot(page: Page, view: string): Promise<void> {
  await page.screenshot({ path: join(SCREENSHOT_DIR, `${view}.png`), fullPage: true });
}

/** Wait until a task (read through the API) has the status. */
export async function waitTaskStatus(world: World, id: string, status: string): Promise<void> {
  await waitFor(`task ${id} to be ${status}`, async () => {
    const r = await world.api<{ status: string }>(`/tasks/${id}`);
    return r.status === 200 && r.body.status === status;
  });
}
