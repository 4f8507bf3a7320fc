"use client";
// The submit form of the tasks view: POST /api/v1/tasks with the fields an operator needs
// (queue, tenant, type, JSON payload, priority, delay, retries, idempotency key).

import Link from "next/link";
import { useState } from "react";
import { api, errorMessage } from "@/lib/api";
import type { SubmitBody, Task } from "@/lib/types";
import { useQueue, useToast } from "./providers";

const NAME = /^[A-Za-z0-9._-]{1,64}$/;
const TYPES = ["echo", "sleep", "fail", "http"];
const EXAMPLES: Record<string, string> = {
  echo: '{"hello": "world"}',
  sleep: '{"ms": 1000}',
  fail: '{"times": 1}',
  http: '{"url": "http://127.0.0.1:9000/hook", "method": "POST", "body": {}}',
};

/** Ids listed after a batch submit; the rest are counted. */
const SHOWN_IDS = 5;

export function SubmitForm({ queue, onSubmitted }: { queue: string; onSubmitted: (t: Task) => void }) {
  const toast = useToast();
  const { queues, refreshQueues } = useQueue();
  const [f, setF] = useState({
    queue,
    tenant: "default",
    type: "echo",
    payload: EXAMPLES.echo!,
    priority: "0",
    delay_ms: "",
    max_retries: "",
    idempotency_key: "",
    count: "1",
  });
  const [error, setError] = useState<string | null>(null);
  const [busy, setBusy] = useState(false);
  /** The tasks of the last submit (one, or every task of a batch). */
  const [last, setLast] = useState<Task[]>([]);
  // Any edit makes an earlier error stale (it may be about what was just fixed): clear it. The
  // browser's own checks (min, max, required) may block the next submit before build() runs.
  const set = (k: keyof typeof f) => (e: { target: { value: string } }) => {
    setError(null);
    setF((x) => ({ ...x, [k]: e.target.value }));
  };

  const build = (): { body: SubmitBody; count: number } | string => {
    if (!NAME.test(f.queue)) return "queue: letters, digits, . _ - (1 to 64)";
    if (!NAME.test(f.tenant)) return "tenant: letters, digits, . _ - (1 to 64)";
    if (!NAME.test(f.type)) return "type: letters, digits, . _ - (1 to 64)";
    let payload: unknown;
    try {
      payload = JSON.parse(f.payload);
    } catch (e) {
      return `payload: not JSON (${e instanceof Error ? e.message : String(e)})`;
    }
    const int = (v: string, lo: number, hi: number, name: string): number | string | undefined => {
      if (v.trim() === "") return undefined;
      const n = Number(v);
      return Number.isInteger(n) && n >= lo && n <= hi ? n : `${name}: a whole number from ${lo} to ${hi}`;
    };
    const priority = int(f.priority, 0, 9, "priority");
    const delay = int(f.delay_ms, 0, 31_536_000_000, "delay");
    const retries = int(f.max_retries, 0, 100, "max retries");
    const count = int(f.count, 1, 1000, "count");
    for (const v of [priority, delay, retries, count]) if (typeof v === "string") return v;
    if (f.idempotency_key && (count ?? 1) !== 1) return "an idempotency key names one task: count must be 1";
    const body: SubmitBody = { queue: f.queue, tenant: f.tenant, type: f.type, payload };
    if (priority !== undefined) body.priority = priority as number;
    if (delay !== undefined) body.delay_ms = delay as number;
    if (retries !== undefined) body.max_retries = retries as number;
    if (f.idempotency_key.trim()) body.idempotency_key = f.idempotency_key.trim();
    return { body, count: (count as number | undefined) ?? 1 };
  };

  const submit = async () => {
    const b = build();
    if (typeof b === "string") {
      setError(b);
      return;
    }
    setError(null);
    setBusy(true);
    try {
      let tasks: Task[];
      if (b.count === 1) {
        tasks = [await api.submit(b.body)];
      } else {
        const page = await api.submitBatch(Array.from({ length: b.count }, () => b.body));
        tasks = page.tasks;
      }
      const task = tasks[0]!;
      setLast(tasks);
      toast("ok", b.count === 1 ? `Submitted ${task.id} (${task.status})` : `Submitted ${tasks.length} tasks`);
      // A queue's first task creates it: the queue picker lists it after this.
      if (!queues.includes(task.queue)) refreshQueues();
      onSubmitted(task);
    } catch (e) {
      setError(errorMessage(e));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form
      aria-label="Submit a task"
      onSubmit={(e) => {
        e.preventDefault();
        void submit();
      }}
    >
      <div className="form-grid">
        <label className="field">
          Queue
          <input name="queue" value={f.queue} onChange={set("queue")} required />
        </label>
        <label className="field">
          Tenant
          <input name="tenant" value={f.tenant} onChange={set("tenant")} required />
        </label>
        <label className="field">
          Type
          <input
            name="type"
            list="task-types"
            value={f.type}
            onChange={(e) => {
              const type = e.target.value;
              setError(null);
              setF((x) => ({
                ...x,
                type,
                // Switch the example payload while the payload is still an untouched example.
                payload: Object.values(EXAMPLES).includes(x.payload) && EXAMPLES[type] ? EXAMPLES[type] : x.payload,
              }));
            }}
            required
          />
          <datalist id="task-types">
            {TYPES.map((t) => (
              <option key={t} value={t} />
            ))}
          </datalist>
        </label>
        <label className="field">
          Priority (0–9)
          <input name="priority" type="number" min={0} max={9} value={f.priority} onChange={set("priority")} />
        </label>
        <label className="field">
          Delay (ms)
          <input name="delay_ms" type="number" min={0} value={f.delay_ms} onChange={set("delay_ms")} placeholder="0" />
        </label>
        <label className="field">
          Max retries
          <input name="max_retries" type="number" min={0} max={100} value={f.max_retries} onChange={set("max_retries")} placeholder="queue default (3)" />
        </label>
        <label className="field">
          Idempotency key
          <input name="idempotency_key" value={f.idempotency_key} onChange={set("idempotency_key")} placeholder="optional" />
        </label>
        <label className="field">
          Count
          <input name="count" type="number" min={1} max={1000} value={f.count} onChange={set("count")} />
        </label>
        <label className="field span-all">
          Payload (JSON)
          <textarea name="payload" rows={4} value={f.payload} onChange={set("payload")} spellCheck={false} />
        </label>
      </div>
      <div className="row" style={{ marginTop: 10 }}>
        <button type="submit" className="primary" disabled={busy} data-testid="submit-task">
          {busy ? "Submitting…" : "Submit"}
        </button>
        {error && (
          <span className="field-error" role="alert">
            {error}
          </span>
        )}
        {last.length > 0 && !error && (
          <span data-testid="submitted" data-count={last.length}>
            Last submitted{last.length > 1 ? ` (${last.length} tasks)` : ""}:{" "}
            {last.slice(0, SHOWN_IDS).map((t, i) => (
              <span key={t.id}>
                {i > 0 ? ", " : ""}
                <Link href={`/task/?id=${t.id}&queue=${encodeURIComponent(t.queue)}`} className="mono" data-testid="submitted-id">
                  {t.id}
                </Link>
              </span>
            ))}
            {last.length > SHOWN_IDS ? ` and ${last.length - SHOWN_IDS} more` : ""}
          </span>
        )}
      </div>
    </form>
  );
}
