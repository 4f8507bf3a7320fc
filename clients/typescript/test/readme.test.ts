/**
 * The README's JavaScript walk-through, run as written: its `worker.mjs` and `producer.mjs`
 * blocks (marked `<!-- example: node NAME -->`) as two Node processes against a live orq, with
 * this package installed as `@orq/client` (a symlink, as `npm install <path>` makes).
 */
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { exited, killChild, PACKAGE_ROOT, spawnTracked, startServer, tail, within, type OrqServer } from "./fixture.js";

let server: OrqServer;
before(async () => {
  server = await startServer();
});
after(async () => {
  await server.stop();
});

/** The README's examples, by file name. */
function examples(): Map<string, string> {
  const text = readFileSync(resolve(PACKAGE_ROOT, "..", "..", "README.md"), "utf8");
  const found = new Map<string, string>();
  for (const m of text.matchAll(/<!-- example: node (\S+) -->\n```js\n([\s\S]*?)```/g)) {
    found.set(m[1], m[2]);
  }
  return found;
}

test("the README's JavaScript walk-through runs", async () => {
  const files = examples();
  assert.deepEqual([...files.keys()].sort(), ["producer.mjs", "worker.mjs"]);
  const dir = mkdtempSync(join(tmpdir(), "orq-readme-"));
  mkdirSync(join(dir, "node_modules", "@orq"), { recursive: true });
  symlinkSync(PACKAGE_ROOT, join(dir, "node_modules", "@orq", "client"));
  for (const [name, code] of files) writeFileSync(join(dir, name), code);
  const env = { ...process.env, ORQ_URL: server.url };
  const worker = spawnTracked(process.execPath, [join(dir, "worker.mjs")], env);
  const workerLog = tail(worker.stderr);
  try {
    const producer = spawnTracked(process.execPath, [join(dir, "producer.mjs")], env);
    const out = tail(producer.stdout);
    const err = tail(producer.stderr);
    const code = await within("the producer to finish", exited(producer));
    assert.equal(code, 0, `${err()}\n${workerLog()}`);
    assert.equal(out().trim(), 'completed {"thumbnail":"cat.png@640px","attempt":1}');
  } finally {
    await killChild(worker);
    rmSync(dir, { recursive: true, force: true });
  }
});
