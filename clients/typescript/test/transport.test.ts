/**
 * Retries and error mapping of the transport, against small local HTTP servers that answer what
 * a test needs (a 503 with Retry-After, a dropped connection, silence) and count the requests.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, test } from "node:test";
import { Client, ConnectionFailed, RateLimited, ServerError, Unavailable, parseRetryAfter } from "../src/index.js";

type Reply = (req: IncomingMessage, res: ServerResponse, n: number) => void;

const servers: { close: () => void }[] = [];
after(() => {
  for (const s of servers) s.close();
});

/** A local server answering request number n (from 1) with `reply`; counts requests. */
async function fake(reply: Reply): Promise<{ url: string; count: () => number }> {
  let n = 0;
  const server = createServer((req, res) => {
    n += 1;
    req.resume();
    req.on("end", () => reply(req, res, n));
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  servers.push({ close: () => server.close() && server.closeAllConnections() });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, count: () => n };
}

/** Answer JSON `body` with `status` and extra headers. */
function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { "content-type": "application/json", ...headers });
  res.end(JSON.stringify(body));
}

const TASK = { id: "01ARZ3NDEKTSV4RRFFQ69G5FAV", status: "queued" };
const unavailable = (res: ServerResponse) =>
  json(res, 503, { error: { code: "store_unavailable", message: "busy" } }, { "retry-after": "0" });

describe("retries", () => {
  test("a read is retried on 503 until it succeeds", async () => {
    const srv = await fake((_q, res, n) => (n < 3 ? unavailable(res) : json(res, 200, TASK)));
    const client = new Client({ url: srv.url, retries: 3 });
    assert.equal((await client.get(TASK.id)).id, TASK.id);
    assert.equal(srv.count(), 3);
  });

  test("a read gives up after `retries` retries with the last error", async () => {
    const srv = await fake((_q, res) => unavailable(res));
    const client = new Client({ url: srv.url, retries: 2 });
    const err = await client.get(TASK.id).catch((e: unknown) => e);
    assert.ok(err instanceof Unavailable);
    assert.equal(err.code, "store_unavailable");
    assert.equal(err.retryAfterMs, 0);
    assert.ok(err.transient);
    assert.equal(srv.count(), 3);
  });

  test("a submit without idempotency key is not retried on 503; with one it is", async () => {
    const srv = await fake((_q, res, n) => (n < 3 ? unavailable(res) : json(res, 201, TASK)));
    const client = new Client({ url: srv.url, retries: 3 });
    await assert.rejects(client.submit("t", 1), Unavailable);
    assert.equal(srv.count(), 1);
    assert.equal((await client.submit("t", 1, { idempotency_key: "k" })).id, TASK.id);
    assert.equal(srv.count(), 3);
  });

  test("429 carries Retry-After in ms", async () => {
    const srv = await fake((_q, res) => json(res, 429, { error: { code: "limited", message: "slow down" } }, { "retry-after": "2" }));
    const client = new Client({ url: srv.url, retries: 3 });
    const err = await client.submit("t", 1).catch((e: unknown) => e);
    assert.ok(err instanceof RateLimited);
    assert.equal(err.retryAfterMs, 2000);
    assert.equal(srv.count(), 1);
  });

  test("a connection dropped after sending: reads retried, a plain submit not", async () => {
    const srv = await fake((req) => req.socket.destroy());
    const client = new Client({ url: srv.url, retries: 2 });
    const err = await client.submit("t", 1).catch((e: unknown) => e);
    assert.ok(err instanceof ConnectionFailed, String(err));
    assert.equal(err.sent, true);
    assert.equal(srv.count(), 1);
    await assert.rejects(client.queues(), ConnectionFailed);
    assert.equal(srv.count(), 4);
  });

  test("a refused connection is not sent, so even a plain submit is retried", async () => {
    const closed = await fake(() => undefined);
    servers.pop()!.close();
    const direct = new Client({ url: closed.url, retries: 0 });
    const err = await direct.submit("t", 1).catch((e: unknown) => e);
    assert.ok(err instanceof ConnectionFailed, String(err));
    assert.equal(err.sent, false, `ECONNREFUSED means not sent: ${err.message}`);

    const srv = await fake((_q, res) => json(res, 201, TASK));
    let refused = 0;
    const flaky: typeof fetch = async (input, init) => {
      if (refused < 2) {
        refused += 1;
        return fetch(closed.url, init);
      }
      return fetch(input, init);
    };
    const client = new Client({ url: srv.url, retries: 3, fetch: flaky });
    assert.equal((await client.submit("t", 1)).id, TASK.id);
    assert.equal(refused, 2);
    assert.equal(srv.count(), 1);
  });
});

describe("answers", () => {
  test("an attempt with no answer in time fails as ConnectionFailed", async () => {
    const srv = await fake(() => undefined);
    const client = new Client({ url: srv.url, timeoutMs: 200, retries: 1 });
    const err = await client.get(TASK.id).catch((e: unknown) => e);
    assert.ok(err instanceof ConnectionFailed, String(err));
    assert.match(err.message, /no answer within 200 ms/);
    assert.equal(srv.count(), 2);
  });

  test("a non-JSON error page becomes an error by its status", async () => {
    const srv = await fake((_q, res) => {
      res.writeHead(502, { "content-type": "text/html" });
      res.end("<html>bad gateway</html>");
    });
    const err = await new Client({ url: srv.url }).submit("t", 1).catch((e: unknown) => e);
    assert.ok(err instanceof ServerError);
    assert.equal(err.status, 502);
    assert.match(err.message, /bad gateway/);
  });

  test("the caller's abort signal ends the call and its retries", async () => {
    const srv = await fake((_q, res) => unavailable(res));
    const ac = new AbortController();
    const client = new Client({ url: srv.url, retries: 1000 });
    const p = client.get(TASK.id, {}, { signal: ac.signal });
    setTimeout(() => ac.abort(new Error("enough")), 50);
    await assert.rejects(p, /enough/);
  });

  test("the API key is sent as a bearer token; a trailing /api/v1 on the url is accepted", async () => {
    let auth: string | undefined;
    let path: string | undefined;
    const srv = await fake((req, res) => {
      auth = req.headers.authorization;
      path = req.url;
      json(res, 200, { queues: [] });
    });
    await new Client({ url: `${srv.url}/api/v1/`, apiKey: "orq_secret" }).queues();
    assert.equal(auth, "Bearer orq_secret");
    assert.equal(path, "/api/v1/queues");
  });

  test("Retry-After as seconds or as an HTTP date", () => {
    assert.equal(parseRetryAfter("3"), 3000);
    assert.equal(parseRetryAfter(null), null);
    assert.equal(parseRetryAfter("soon"), null);
    const now = Date.parse("2030-01-01T00:00:00Z");
    assert.equal(parseRetryAfter("Tue, 01 Jan 2030 00:00:05 GMT", now), 5000);
  });
});
