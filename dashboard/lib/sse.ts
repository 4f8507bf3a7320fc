// Server-Sent Events: an incremental parser of the `text/event-stream` format (pure, tested) and
// `openEventStream`, which follows `GET /api/v1/events?queue=`. Without an API key it uses the
// browser's EventSource; with one it streams with fetch, because EventSource cannot send an
// Authorization header and a key must never travel in a URL (URLs end up in logs and history).

import { API_BASE, authHeaders } from "./api";
import type { LiveEvent } from "./types";

export interface SseMessage {
  /** The `event:` field; `message` when absent. */
  event: string;
  data: string;
  id: string | null;
}

/** Longest partial line kept between chunks (bytes of text): a guard against a runaway stream. */
export const SSE_LINE_MAX = 1 << 20;

/** Parses the event-stream format chunk by chunk (WHATWG HTML, "Parsing an event stream"). */
export class SseParser {
  private buffer = "";
  private event = "";
  private data: string[] = [];
  private id: string | null = null;

  /** Feed a chunk of text; returns the messages completed by it. */
  push(chunk: string): SseMessage[] {
    this.buffer += chunk;
    const out: SseMessage[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) {
        break;
      }
      // A lone \r at the end may be the first half of \r\n: wait for more.
      if (m[0] === "\r" && m.index === this.buffer.length - 1) {
        break;
      }
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const msg = this.line(line);
      if (msg) {
        out.push(msg);
      }
    }
    if (this.buffer.length > SSE_LINE_MAX) {
      this.buffer = "";
    }
    return out;
  }

  private line(line: string): SseMessage | null {
    if (line === "") {
      if (this.data.length === 0) {
        this.event = "";
        return null;
      }
      const msg = { event: this.event || "message", data: this.data.join("\n"), id: this.id };
      this.event = "";
      this.data = [];
      return msg;
    }
    if (line.startsWith(":")) {
      return null; // a comment (keep-alive)
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    if (field === "event") {
      this.event = value;
    } else if (field === "data") {
      this.data.push(value);
    } else if (field === "id" && !value.includes("\0")) {
      this.id = value;
    }
    return null;
  }
}

/** Decode one `data:` payload of the events route; null when it is not an event object. */
export function decodeLiveEvent(data: string): LiveEvent | null {
  try {
    const v = JSON.parse(data) as Partial<LiveEvent>;
    if (typeof v !== "object" || v === null || typeof v.kind !== "string") {
      return null;
    }
    return {
      queue: String(v.queue ?? ""),
      stream_id: String(v.stream_id ?? ""),
      kind: v.kind,
      ts: typeof v.ts === "number" ? v.ts : Number(v.ts ?? 0),
      task_id: v.task_id ? String(v.task_id) : null,
      tenant: v.tenant ? String(v.tenant) : null,
      attempt: typeof v.attempt === "number" ? v.attempt : null,
      fields: typeof v.fields === "object" && v.fields !== null ? v.fields : {},
    };
  } catch {
    return null;
  }
}

export interface StreamHandlers {
  onOpen: () => void;
  onEvent: (e: LiveEvent, type: string) => void;
  /** The server dropped events for this slow client (`event: lagged`): reload everything. */
  onLagged: () => void;
  /** The stream failed or ended; the caller decides whether to poll or reconnect. */
  onError: () => void;
}

/** Follow the queue's events. Returns a function that closes the stream. */
export function openEventStream(queue: string, h: StreamHandlers): () => void {
  const url = `${API_BASE}/events?queue=${encodeURIComponent(queue)}`;
  const headers = authHeaders();
  if (!headers.Authorization && typeof EventSource !== "undefined") {
    const es = new EventSource(url);
    let failed = false;
    const handle = (type: string) => (m: MessageEvent<string>) => {
      const e = decodeLiveEvent(m.data);
      if (e) {
        h.onEvent(e, type);
      }
    };
    es.onopen = () => h.onOpen();
    es.addEventListener("task", handle("task"));
    es.addEventListener("queue", handle("queue"));
    es.addEventListener("lagged", () => h.onLagged());
    es.onerror = () => {
      if (!failed) {
        failed = true;
        es.close();
        h.onError();
      }
    };
    return () => {
      failed = true;
      es.close();
    };
  }
  const ctrl = new AbortController();
  void (async () => {
    try {
      const res = await fetch(url, {
        headers: { Accept: "text/event-stream", ...headers },
        signal: ctrl.signal,
        cache: "no-store",
      });
      if (!res.ok || !res.body) {
        throw new Error(`events: HTTP ${res.status}`);
      }
      h.onOpen();
      const parser = new SseParser();
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) {
          break;
        }
        for (const m of parser.push(value)) {
          if (m.event === "lagged") {
            h.onLagged();
            continue;
          }
          const e = decodeLiveEvent(m.data);
          if (e) {
            h.onEvent(e, m.event);
          }
        }
      }
      throw new Error("events: stream ended");
    } catch {
      if (!ctrl.signal.aborted) {
        h.onError();
      }
    }
  })();
  return () => ctrl.abort();
}
