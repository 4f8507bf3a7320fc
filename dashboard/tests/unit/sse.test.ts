// Goal: the event-stream parser used with an API key (fetch streaming) reads what EventSource
// would: events split across chunks, CRLF and CR line ends, comments, multi-line data, ids.
// Method: feed the same stream in every chunking and compare.

import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeLiveEvent, SseParser, type SseMessage } from "../../lib/sse";

const STREAM =
  ": keep-alive\n\n" +
  "event: task\r\nid: 1-0\r\ndata: {\"kind\":\"queued\",\"queue\":\"q\",\"stream_id\":\"1-0\",\"ts\":5,\"task_id\":\"T\",\"tenant\":\"a\",\"attempt\":0,\"fields\":{}}\r\n\r\n" +
  "event: queue\rdata: {\"kind\":\"paused\",\"queue\":\"q\"}\r\r" +
  "data: line one\ndata: line two\n\n" +
  "event: ignored-without-data\n\n";

function parseAll(chunks: string[]): SseMessage[] {
  const p = new SseParser();
  return chunks.flatMap((c) => p.push(c));
}

test("whole stream: three messages with their event names, ids and data", () => {
  const got = parseAll([STREAM]);
  assert.equal(got.length, 3);
  assert.equal(got[0]!.event, "task");
  assert.equal(got[0]!.id, "1-0");
  assert.equal(got[1]!.event, "queue");
  assert.equal(got[2]!.event, "message");
  assert.equal(got[2]!.data, "line one\nline two");
});

test("any split into chunks gives the same messages", () => {
  const want = parseAll([STREAM]);
  for (let i = 1; i < STREAM.length; i++) {
    assert.deepEqual(parseAll([STREAM.slice(0, i), STREAM.slice(i)]), want, `split at ${i}`);
  }
  assert.deepEqual(parseAll(STREAM.split("")), want, "one character at a time");
});

test("event data decodes to a live event; other data is refused", () => {
  const [m] = parseAll([STREAM]);
  const e = decodeLiveEvent(m!.data)!;
  assert.equal(e.kind, "queued");
  assert.equal(e.task_id, "T");
  assert.equal(e.attempt, 0);
  assert.equal(decodeLiveEvent("not json"), null);
  assert.equal(decodeLiveEvent('{"no":"kind"}'), null);
});
