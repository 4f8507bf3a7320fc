"use client";
// Workers of the selected queue and the leases each holds (GET /queues/{q}/workers). On an orq
// without that route, the leases are read from the leased tasks instead.

import { createColumnHelper } from "@tanstack/react-table";
import { useMemo } from "react";
import { DataTable } from "@/components/DataTable";
import { useAdminDenied, useLive, useQueue } from "@/components/providers";
import { AdminNeeded, Card, Empty, ErrorBox, Loading, PageTitle, TaskLink } from "@/components/ui";
import { api, needsAdmin } from "@/lib/api";
import { formatDuration, formatTime } from "@/lib/format";
import { useResource } from "@/lib/hooks";
import type { WorkerInfo, WorkerLease } from "@/lib/types";

/** A worker not seen for this long is shown as silent (ms). */
const SILENT_MS = 30_000;

const lcol = createColumnHelper<WorkerLease>();

function leaseColumns(now_ms: number, queue: string) {
  return [
    lcol.accessor("task_id", { header: "Task", cell: (c) => <TaskLink id={c.getValue()} queue={queue} /> }),
    lcol.accessor("type", { header: "Type" }),
    lcol.accessor("tenant", { header: "Tenant" }),
    lcol.accessor("leased_at_ms", {
      header: "Running for",
      cell: (c) => <span title={formatTime(c.getValue(), true)}>{formatDuration(now_ms - c.getValue())}</span>,
    }),
    lcol.accessor("lease_exp_ms", {
      header: "Lease expires",
      cell: (c) => {
        const left = c.getValue() - now_ms;
        return (
          <span className={left < 0 ? "pill bad" : left < 5000 ? "pill warn" : undefined} title={formatTime(c.getValue(), true)}>
            {left < 0 ? `expired ${formatDuration(-left)} ago` : `in ${formatDuration(left)}`}
          </span>
        );
      },
    }),
    lcol.accessor("heartbeat_age_ms", {
      header: "Last heartbeat",
      cell: (c) => `${formatDuration(c.getValue())} ago`,
    }),
  ];
}

function Worker({ w, now_ms, queue }: { w: WorkerInfo; now_ms: number; queue: string }) {
  const silent = now_ms - w.last_seen_ms > SILENT_MS;
  const columns = useMemo(() => leaseColumns(now_ms, queue), [now_ms, queue]);
  return (
    <Card
      testid={`worker-${w.id}`}
      title={
        <span className="row" style={{ gap: 8 }}>
          <span className="mono">{w.id}</span>
          {silent ? <span className="pill bad">silent</span> : w.leases.length > 0 ? <span className="pill good">busy</span> : <span className="pill">idle</span>}
        </span>
      }
      actions={
        <span className="muted">
          last seen {formatDuration(Math.max(0, now_ms - w.last_seen_ms))} ago · idle {formatDuration(w.idle_ms)} · {w.leases.length} lease
          {w.leases.length === 1 ? "" : "s"}
        </span>
      }
    >
      {w.leases.length > 0 && <DataTable label={`Leases of ${w.id}`} data={w.leases} columns={columns} rowId={(l) => l.task_id} empty="" />}
    </Card>
  );
}

export default function WorkersPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  const denied = useAdminDenied();
  // The workers route answers 404 for a queue that has no task yet: ask only for known queues.
  // It needs an admin key: once one admin-only route answered 403, ask it first whatever the
  // queue, so that a tenant key sees why rather than an empty list.
  const workers = useResource(
    async (signal) =>
      denied || (await api.queueOrNull(queue, signal)) ? api.workers(queue, signal) : { now_ms: 0, workers: [] },
    [queue, tick, denied],
  );
  const forbidden = workers.error !== null && needsAdmin(workers.error);
  return (
    <>
      <PageTitle sub={`Workers that lease from ${queue}, the tasks they hold, and how fresh their leases are.`}>Workers</PageTitle>
      {workers.loading ? (
        <Loading what="Loading workers" />
      ) : forbidden ? (
        <AdminNeeded what="The workers view" />
      ) : workers.error && !workers.data ? (
        <ErrorBox error={workers.error} retry={workers.reload} />
      ) : (workers.data?.workers.length ?? 0) === 0 ? (
        <Empty>No worker has leased from {queue} recently.</Empty>
      ) : (
        workers.data!.workers.map((w) => <Worker key={w.id} w={w} now_ms={workers.data!.now_ms} queue={queue} />)
      )}
    </>
  );
}
