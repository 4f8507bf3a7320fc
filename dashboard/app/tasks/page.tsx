"use client";
// Tasks: one page of a queue's tasks at a time (filter by status, tenant, type; follow
// next_cursor), and the submit form.

import { useMemo, useState } from "react";
import { DataTable } from "@/components/DataTable";
import { useLive, useQueue } from "@/components/providers";
import { SubmitForm } from "@/components/SubmitForm";
import { taskColumns } from "@/components/TaskColumns";
import { Card, ErrorBox, Loading, PageTitle } from "@/components/ui";
import { api } from "@/lib/api";
import { useNow, useResource } from "@/lib/hooks";
import { STATUSES } from "@/lib/types";

const PAGE_SIZES = [25, 50, 100, 250];

export default function TasksPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  const now = useNow(5000);
  const [filters, setFilters] = useState({ status: "", tenant: "", type: "" });
  const [draft, setDraft] = useState(filters);
  const [limit, setLimit] = useState(50);
  // Cursors of the pages before the current one, and the current page's cursor.
  const [back, setBack] = useState<Array<string | null>>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [showForm, setShowForm] = useState(true);
  const page = useResource(
    (signal) =>
      api.tasks(
        {
          queue,
          status: filters.status || undefined,
          tenant: filters.tenant.trim() || undefined,
          type: filters.type.trim() || undefined,
          cursor,
          limit,
        },
        signal,
      ),
    [queue, filters, cursor, limit, tick],
  );
  const columns = useMemo(() => taskColumns(now), [now]);
  const reset = () => {
    setBack([]);
    setCursor(null);
  };
  const next = page.data?.next_cursor ?? null;
  return (
    <>
      <PageTitle sub={`Tasks of queue ${queue}, newest index entries first per status.`}>Tasks</PageTitle>
      <Card
        title="Submit a task"
        actions={
          <button type="button" className="small" onClick={() => setShowForm((s) => !s)}>
            {showForm ? "Hide" : "Show"}
          </button>
        }
      >
        {showForm && <SubmitForm queue={queue} onSubmitted={() => page.reload()} />}
      </Card>
      <Card
        title="Tasks"
        actions={
          <form
            className="filters"
            aria-label="Filters"
            onSubmit={(e) => {
              e.preventDefault();
              setFilters(draft);
              reset();
            }}
          >
            <label className="field">
              Status
              <select
                aria-label="Status filter"
                value={draft.status}
                onChange={(e) => {
                  const d = { ...draft, status: e.target.value };
                  setDraft(d);
                  setFilters(d);
                  reset();
                }}
              >
                <option value="">all</option>
                {STATUSES.map((s) => (
                  <option key={s} value={s}>
                    {s}
                  </option>
                ))}
              </select>
            </label>
            <label className="field">
              Tenant
              <input aria-label="Tenant filter" value={draft.tenant} onChange={(e) => setDraft({ ...draft, tenant: e.target.value })} placeholder="any" size={10} />
            </label>
            <label className="field">
              Type
              <input aria-label="Type filter" value={draft.type} onChange={(e) => setDraft({ ...draft, type: e.target.value })} placeholder="any" size={10} />
            </label>
            <button type="submit">Apply</button>
          </form>
        }
      >
        {page.loading ? (
          <Loading what="Loading tasks" />
        ) : page.error && !page.data ? (
          <ErrorBox error={page.error} retry={page.reload} />
        ) : (
          <>
            {page.error ? <ErrorBox error={page.error} retry={page.reload} /> : null}
            <DataTable
              label="Tasks"
              data={page.data?.tasks ?? []}
              columns={columns}
              rowId={(t) => t.id}
              rowTestId={(t) => `task-row-${t.id}`}
              empty={
                filters.status || filters.tenant || filters.type
                  ? "No task matches these filters."
                  : `Queue ${queue} has no tasks. Submit one above.`
              }
            />
            <div className="row" style={{ marginTop: 10, justifyContent: "space-between" }}>
              <div className="row">
                <button
                  type="button"
                  disabled={back.length === 0}
                  onClick={() => {
                    setCursor(back[back.length - 1] ?? null);
                    setBack(back.slice(0, -1));
                  }}
                >
                  ← Previous
                </button>
                <button
                  type="button"
                  disabled={next === null}
                  onClick={() => {
                    setBack([...back, cursor]);
                    setCursor(next);
                  }}
                >
                  Next →
                </button>
                <span className="muted">Page {back.length + 1}</span>
              </div>
              <label className="row muted">
                Per page
                <select value={limit} onChange={(e) => { setLimit(Number(e.target.value)); reset(); }}>
                  {PAGE_SIZES.map((n) => (
                    <option key={n} value={n}>
                      {n}
                    </option>
                  ))}
                </select>
              </label>
            </div>
          </>
        )}
      </Card>
    </>
  );
}
