"use client";
// Column definitions for task tables (tasks, scheduled, DLQ).

import { createColumnHelper } from "@tanstack/react-table";
import type { Task } from "@/lib/types";
import { StatusBadge, TaskLink, Time } from "./ui";

const col = createColumnHelper<Task>();

export function taskColumns(now: number, opts: { runAt?: boolean; finished?: boolean; noStatus?: boolean } = {}) {
  return [
    col.accessor("id", {
      header: "Task",
      cell: (c) => <TaskLink id={c.getValue()} queue={c.row.original.queue} />,
    }),
    col.accessor("tenant", { header: "Tenant" }),
    col.accessor("type", { header: "Type" }),
    ...(opts.noStatus ? [] : [col.accessor("status", { header: "Status", cell: (c) => <StatusBadge status={c.getValue()} /> })]),
    col.accessor("attempt", {
      header: "Attempt",
      cell: (c) => `${c.getValue()} / ${c.row.original.max_retries + 1}`,
    }),
    col.accessor("priority", { header: "Prio" }),
    ...(opts.runAt
      ? [
          col.accessor("run_at", {
            header: "Due",
            cell: (c) => <Time at={c.getValue()} now={now} />,
          }),
        ]
      : []),
    ...(opts.finished
      ? [
          col.accessor((t) => t.finished_at ?? t.updated_at, {
            id: "died",
            header: "Died",
            cell: (c) => <Time at={c.getValue()} now={now} />,
          }),
        ]
      : [
          col.accessor("created_at", {
            header: "Created",
            cell: (c) => <Time at={c.getValue()} now={now} />,
          }),
          col.accessor("updated_at", {
            header: "Updated",
            cell: (c) => <Time at={c.getValue()} now={now} />,
          }),
        ]),
    col.accessor("last_error", {
      header: "Last error",
      enableSorting: false,
      cell: (c) => <span className="error-text">{c.getValue() ?? ""}</span>,
    }),
  ];
}
