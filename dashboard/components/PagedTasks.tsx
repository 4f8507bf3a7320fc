"use client";
// A paged listing of one status of a queue (follows next_cursor), refreshed with the live tick.

import { useMemo, useState } from "react";
import { api } from "@/lib/api";
import { useNow, useResource } from "@/lib/hooks";
import type { Status } from "@/lib/types";
import { DataTable } from "./DataTable";
import { useLive } from "./providers";
import { taskColumns } from "./TaskColumns";
import { ErrorBox, Loading } from "./ui";

export function PagedTasks({ queue, status, empty, limit = 50 }: { queue: string; status: Status; empty: string; limit?: number }) {
  const { tick } = useLive();
  const now = useNow(1000);
  const [back, setBack] = useState<Array<string | null>>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const page = useResource((signal) => api.tasks({ queue, status, cursor, limit }, signal), [queue, status, cursor, limit, tick]);
  const columns = useMemo(() => taskColumns(now, { runAt: true }), [now]);
  if (page.loading) return <Loading what={`Loading ${status} tasks`} />;
  if (page.error && !page.data) return <ErrorBox error={page.error} retry={page.reload} />;
  const next = page.data?.next_cursor ?? null;
  return (
    <>
      <DataTable label={`${status} tasks`} data={page.data?.tasks ?? []} columns={columns} rowId={(t) => t.id} rowTestId={(t) => `task-row-${t.id}`} empty={empty} />
      {(back.length > 0 || next !== null) && (
        <div className="row" style={{ marginTop: 8 }}>
          <button type="button" disabled={back.length === 0} onClick={() => { setCursor(back[back.length - 1] ?? null); setBack(back.slice(0, -1)); }}>
            ← Previous
          </button>
          <button type="button" disabled={next === null} onClick={() => { setBack([...back, cursor]); setCursor(next); }}>
            Next →
          </button>
          <span className="muted">Page {back.length + 1}</span>
        </div>
      )}
    </>
  );
}
