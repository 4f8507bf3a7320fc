/**
 * Test fixtures: a live `orq serve` per test file (embedded store, no built-in worker), API keys,
 * child processes that are always cleaned up, a logger that keeps its entries, and `waitFor`,
 * which polls a condition with a generous deadline instead of asserting on elapsed time.
 */
import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, writeFileSync, appendFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import type { LogFields, Logger } from "../src/index.js";

/** The package's root (this file runs from dist/test/). */
export const PACKAGE_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");
/** The orq binary: ORQ_BIN, else the repository's debug build. */
export const ORQ_BIN = process.env.ORQ_BIN ?? resolve(PACKAGE_ROOT, "..", "..", "target", "debug", "orq");
/** How long any condition may take to come true on a loaded machine (ms). */
export const DEADLINE_MS = 60_000;

const children = new Set<ChildProcess>();
process.on("exit", () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill("SIGKILL");
});

/** Spawn a child process that {@link killChild} (or the test process's exit) will end. */
export function spawnTracked(cmd: string, args: string[], env: NodeJS.ProcessEnv = process.env): ChildProcess {
  const child = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}

/** Resolves with the child's exit code (or signal name) once it has exited. */
export function exited(child: ChildProcess): Promise<number | string> {
  if (child.exitCode !== null) return Promise.resolve(child.exitCode);
  if (child.signalCode !== null) return Promise.resolve(child.signalCode);
  return new Promise((r) => child.once("exit", (code, signal) => r(code ?? signal ?? -1)));
}

/** End a child: SIGTERM, then SIGKILL if it is still there after 10 s. */
export async function killChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited(child);
  clearTimeout(timer);
}

/** Keep the last `max` characters a stream wrote, for diagnostics. */
export function tail(stream: NodeJS.ReadableStream | null, max = 20_000): () => string {
  let text = "";
  stream?.on("data", (d: Buffer) => {
    text = (text + d.toString()).slice(-max);
  });
  return () => text;
}

/** A running `orq serve`. */
export interface OrqServer {
  /** The server's address, e.g. `http://127.0.0.1:40123`. */
  url: string;
  /** Its stderr so far. */
  logs: () => string;
  /** Stop it and wait for it to exit. */
  stop: () => Promise<void>;
}

/** Start `orq serve` on a free loopback port, with `extraArgs`; resolves once it listens. */
export async function startServer(extraArgs: string[] = []): Promise<OrqServer> {
  const args = ["serve", "--no-dashboard-build", "--listen", "127.0.0.1:0", "--concurrency", "0", ...extraArgs];
  const child = spawnTracked(ORQ_BIN, args);
  const logs = tail(child.stderr);
  const url = await new Promise<string>((resolveUrl, reject) => {
    const timer = setTimeout(() => reject(new Error(`orq serve did not start within ${DEADLINE_MS} ms:\n${logs()}`)), DEADLINE_MS);
    const lines = createInterface({ input: child.stdout! });
    lines.on("line", (line) => {
      const m = /orq API listening on (http:\/\/\S+?)\/api\/v1/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolveUrl(m[1]!);
      }
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`cannot run ${ORQ_BIN} (set ORQ_BIN): ${err.message}`));
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`orq serve exited (${code}) before listening:\n${logs()}`));
    });
  });
  return { url, logs, stop: () => killChild(child) };
}

/** Make an API key with `orq key new ARGS`; returns the key and its TOML entry. */
export async function newKey(...args: string[]): Promise<{ key: string; entry: string }> {
  const { stdout } = await promisify(execFile)(ORQ_BIN, ["key", "new", ...args]);
  const [key, ...rest] = stdout.split("\n");
  return { key: key!.trim(), entry: rest.join("\n") };
}

/** A temporary keys file holding `entries`; removed by the returned function. */
export function keysFile(entries: string[]): { path: string; remove: () => void } {
  const dir = mkdtempSync(join(tmpdir(), "orq-ts-keys-"));
  const path = join(dir, "keys.toml");
  writeFileSync(path, "");
  for (const e of entries) appendFileSync(path, e + "\n");
  return { path, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** A fresh temporary directory; removed by the returned function. */
export function tempDir(): { path: string; remove: () => void } {
  const path = mkdtempSync(join(tmpdir(), "orq-ts-"));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

/**
 * Poll `check` every `everyMs` (ms) until it returns something other than undefined, null or
 * false; rejects naming `what` (or what the function says then) after `timeoutMs` (ms; default 60000).
 */
export async function waitFor<T>(
  what: string | (() => string),
  check: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs = DEADLINE_MS,
  everyMs = 100,
): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await check();
      if (v !== undefined && v !== null && v !== false) return v as T;
    } catch (err) {
      last = err;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${typeof what === "function" ? what() : what}${last ? ` (last error: ${String(last)})` : ""}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** `promise`, or a rejection naming `what` if it has not settled within `timeoutMs` (ms; default 60000). */
export async function within<T>(what: string, promise: Promise<T>, timeoutMs = DEADLINE_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), timeoutMs);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

let queueSeq = 0;
/** A queue name no other test uses: `prefix`, this process's id and a sequence number. */
export function uniqueQueue(prefix: string): string {
  queueSeq += 1;
  return `${prefix}-${process.pid}-${queueSeq}`;
}

/** One entry of a {@link memoryLogger}. */
export interface LogEntry {
  level: "debug" | "info" | "warn" | "error";
  message: string;
  fields: LogFields;
}

/** A logger that keeps its entries (and echoes warnings and errors when ORQ_TEST_LOG is set). */
export function memoryLogger(): Logger & { entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const add = (level: LogEntry["level"]) => (message: string, fields: LogFields = {}) => {
    entries.push({ level, message, fields });
    if (process.env.ORQ_TEST_LOG && level !== "debug") process.stderr.write(`[${level}] ${message} ${JSON.stringify(fields, (_k, v) => (v instanceof Error ? v.message : v))}\n`);
  };
  return { entries, debug: add("debug"), info: add("info"), warn: add("warn"), error: add("error") };
}
