"use client";
// One task (`/task/?id=<id>&queue=<q>`): its fields, payload and result, its attempt history, the
// live events that concern it, and the actions that apply to its status.

import Link from "next/link";
import { useRouter, useSearchParams } from "next/navigation";
import { Suspense } from "react";
import { DataTable } from "@/components/DataTable";
import { useLive } from "@/components/providers";
import { TaskActions } from "@/components/TaskActions";
import { Card, Empty, ErrorBox, JsonBlock, Loading, PageTitle, StatusBadge, Time } from "@/components/ui";
import { ApiError, api } from "@/lib/api";
import { attemptKey, lastErrorLabel, noAttemptsText } from "@/lib/attempts";
import { formatDuration, formatTime } from "@/lib/format";
import { useNow, useResource } from "@/lib/hooks";
import type { Attempt, Task } from "@/lib/types";
import { createColumnHelper } from "@tanstack/react-table";

const hcol = createColumnHelper<Attempt & { key: string }>();
const historyColumns = [
  hcol.accessor("attempt", { header: "Attempt" }),
  hcol.accessor("at", { header: "Ended", cell: (c) => formatTime(c.getValue(), true) }),
  hcol.accessor("worker", { header: "Worker", cell: (c) => <span className="mono">{c.getValue()}</span> }),
  hcol.accessor("outcome", { header: "Outcome", cell: (c) => <StatusBadge status={c.getValue()} /> }),
  hcol.accessor("error", { header: "Error", cell: (c) => <span className="error-text">{c.getValue() ?? "—"}</span> }),
];

function Details({ task, now }: { task: Task; now: number }) {
  return (
    <dl className="props">
      <dt>Queue</dt>
      <dd>{task.queue}</dd>
      <dt>Tenant</dt>
      <dd>{task.tenant}</dd>
      <dt>Type</dt>
      <dd>{task.type}</dd>
      <dt>Attempt</dt>
      <dd>
        {task.attempt} of {task.max_retries + 1}
        {task.replays > 0 && ` (replayed ${task.replays}×)`}
      </dd>
      <dt>Priority</dt>
      <dd>{task.priority}</dd>
      <dt>Created</dt>
      <dd>
        {formatTime(task.created_at, true)} (<Time at={task.created_at} now={now} />)
      </dd>
      <dt>Due</dt>
      <dd>
        {formatTime(task.run_at, true)} (<Time at={task.run_at} now={now} />)
      </dd>
      <dt>Updated</dt>
      <dd>
        {formatTime(task.updated_at, true)} (<Time at={task.updated_at} now={now} />)
      </dd>
      {task.finished_at && (
        <>
          <dt>Finished</dt>
          <dd>{formatTime(task.finished_at, true)}</dd>
        </>
      )}
      {task.lease && (
        <>
          <dt>Lease</dt>
          <dd>
            worker <span className="mono">{task.lease.worker}</span>, epoch {task.lease.epoch}, expires{" "}
            <Time at={task.lease.expires_at} now={now} />
          </dd>
        </>
      )}
      <dt>Lease length</dt>
      <dd>{formatDuration(task.lease_ms)}</dd>
      <dt>Timeout</dt>
      <dd>{task.timeout_ms ? formatDuration(task.timeout_ms) : "none"}</dd>
      <dt>Backoff</dt>
      <dd>
        {formatDuration(task.backoff.initial_ms)} × {task.backoff.multiplier}, at most{" "}
        {formatDuration(task.backoff.max_ms)}, jitter ±{Math.round(task.backoff.jitter * 100)} %
      </dd>
      {task.idempotency_key && (
        <>
          <dt>Idempotency key</dt>
          <dd className="mono">{task.idempotency_key}</dd>
        </>
      )}
      {task.traceparent && (
        <>
          <dt>Trace</dt>
          <dd className="mono" data-testid="task-trace" title={task.tracestate ? `tracestate: ${task.tracestate}` : undefined}>
            {task.traceparent.split("-")[1]}
          </dd>
        </>
      )}
      {task.last_error && (
        <>
          <dt>{lastErrorLabel(task)}</dt>
          <dd className="error-text" data-testid="task-last-error">
            {task.last_error}
          </dd>
        </>
      )}
    </dl>
  );
}

function TaskView() {
  const params = useSearchParams();
  const router = useRouter();
  const id = (params.get("id") ?? "").trim().toUpperCase();
  const queue = params.get("queue");
  const { tick, events, mode } = useLive();
  const now = useNow();
  const task = useResource(id ? (signal) => api.task(id, queue, signal) : null, [id, queue, tick]);
  if (!id) {
    return (
      <Empty>
        No task id given. Open a task from the <Link href="/tasks/">tasks</Link> or{" "}
        <Link href="/dlq/">dead letters</Link> view.
      </Empty>
    );
  }
  if (task.loading) {
    return <Loading what="Loading task" />;
  }
  if (task.error && !task.data) {
    const gone = task.error instanceof ApiError && task.error.status === 404;
    return gone ? (
      <Empty>
        No task <span className="mono">{id}</span>
        {queue ? ` in queue ${queue}` : ""}: it never existed, was purged, or its retention ran out.
      </Empty>
    ) : (
      <ErrorBox error={task.error} retry={task.reload} />
    );
  }
  const t = task.data!;
  const history = t.attempts.map((a, i) => ({ ...a, key: attemptKey(a, i) }));
  const mine = events.filter((e) => e.task_id === t.id);
  return (
    <>
      <PageTitle sub={<span className="mono">{t.id}</span>}>
        Task <StatusBadge status={t.status} />
      </PageTitle>
      <div className="row">
        <TaskActions
          task={t}
          onDone={(a) => {
            if (a === "purge") router.push("/dlq/");
            else task.reload();
          }}
        />
        {task.error ? <span className="pill bad">refresh failed</span> : null}
      </div>
      <div className="grid2">
        <Card title="Details" testid="task-details">
          <Details task={t} now={now} />
        </Card>
        <div style={{ display: "flex", flexDirection: "column", gap: 16 }}>
          <Card title="Payload">
            <JsonBlock value={t.payload} label="payload" />
          </Card>
          <Card title="Result">
            {t.result === null || t.result === undefined ? <Empty>No result yet.</Empty> : <JsonBlock value={t.result} label="result" />}
          </Card>
        </div>
      </div>
      <Card title={`Attempt history (${history.length})`} testid="task-history">
        <DataTable
          label="Attempt history"
          data={history}
          columns={historyColumns}
          rowId={(h) => h.key}
          empty={noAttemptsText(t)}
        />
      </Card>
      <Card title="Live events">
        {mode !== "live" ? (
          <Empty>The events stream is not available: the view refreshes by polling.</Empty>
        ) : mine.length === 0 ? (
          <Empty>No event for this task since the page opened.</Empty>
        ) : (
          <ul className="feed">
            {mine.map((e) => (
              <li key={`${e.stream_id}-${e.kind}`}>
                <span className="muted">{formatTime(e.ts, true)}</span> <StatusBadge status={e.kind} />
                {e.attempt ? ` attempt ${e.attempt}` : ""} {e.fields.w ? `worker ${e.fields.w}` : ""}
                {e.fields.m && <span className="error-text"> {e.fields.m}</span>}
              </li>
            ))}
          </ul>
        )}
      </Card>
    </>
  );
}

export default function TaskPage() {
  return (
    <Suspense fallback={<Loading what="Loading task" />}>
      <TaskView />
    </Suspense>
  );
}
