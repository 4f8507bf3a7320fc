"use client";
// The dead-letter queue of the selected queue: inspect, replay or purge one task, or replay every
// task matching a filter (the confirmation states how many).

import { createColumnHelper } from "@tanstack/react-table";
import Link from "next/link";
import { useMemo, useState } from "react";
import { DataTable } from "@/components/DataTable";
import { ConfirmDialog, Modal } from "@/components/Dialog";
import { useLive, useQueue, useToast } from "@/components/providers";
import { TaskActions } from "@/components/TaskActions";
import { taskColumns } from "@/components/TaskColumns";
import { Card, ErrorBox, JsonBlock, Loading, PageTitle } from "@/components/ui";
import { api, errorMessage } from "@/lib/api";
import { countDead, REPLAY_LIMIT_MAX, type DeadCount } from "@/lib/dlq";
import { attemptKey } from "@/lib/attempts";
import { formatNumber, formatTime } from "@/lib/format";
import { useNow, useResource } from "@/lib/hooks";
import type { Task } from "@/lib/types";

const col = createColumnHelper<Task>();

function Inspect({ task, onClose }: { task: Task; onClose: () => void }) {
  return (
    <Modal title={`Dead task ${task.id}`} onClose={onClose} wide>
      <p>
        <b>{task.type}</b> task of tenant <b>{task.tenant}</b>, {task.attempt} attempt{task.attempt === 1 ? "" : "s"}
        {task.replays > 0 ? `, replayed ${task.replays}×` : ""}, died {formatTime(task.finished_at ?? task.updated_at)}.{" "}
        <Link href={`/task/?id=${task.id}&queue=${encodeURIComponent(task.queue)}`}>Open the task page</Link>
      </p>
      <h3>Last error</h3>
      <p className="error-text">{task.last_error ?? "—"}</p>
      <h3>Attempts</h3>
      <ul>
        {task.attempts.map((a, i) => (
          <li key={attemptKey(a, i)}>
            attempt {a.attempt} at {formatTime(a.at, true)} on <span className="mono">{a.worker}</span>: {a.outcome}{" "}
            <span className="error-text">{a.error}</span>
          </li>
        ))}
      </ul>
      <h3>Payload</h3>
      <JsonBlock value={task.payload} label="payload" />
      <div className="modal-actions">
        <button type="button" onClick={onClose}>
          Close
        </button>
      </div>
    </Modal>
  );
}

function BulkReplay({ queue, tenant, type, onDone }: { queue: string; tenant: string; type: string; onDone: () => void }) {
  const toast = useToast();
  const [count, setCount] = useState<DeadCount | null>(null);
  const [busy, setBusy] = useState(false);
  const ask = async () => {
    setBusy(true);
    try {
      setCount(await countDead(queue, tenant || undefined, type || undefined));
    } catch (e) {
      toast("error", `Could not count the dead tasks: ${errorMessage(e)}`);
    } finally {
      setBusy(false);
    }
  };
  const limit = count ? Math.min(count.count, REPLAY_LIMIT_MAX) : 0;
  const replay = async () => {
    setBusy(true);
    try {
      const r = await api.replayBulk({ queue, tenant: tenant || undefined, type: type || undefined, limit });
      toast("ok", `Replayed ${formatNumber(r.replayed)} task${r.replayed === 1 ? "" : "s"}${r.more ? "; more remain" : ""}`);
      onDone();
    } catch (e) {
      toast("error", `Replay failed: ${errorMessage(e)}`);
    } finally {
      setBusy(false);
      setCount(null);
    }
  };
  const filter = [tenant && `tenant ${tenant}`, type && `type ${type}`].filter(Boolean).join(", ");
  return (
    <>
      <button type="button" className="primary" onClick={() => void ask()} disabled={busy} data-testid="bulk-replay">
        {busy && !count ? "Counting…" : filter ? "Replay all matching…" : "Replay all…"}
      </button>
      {count && (
        <ConfirmDialog
          title="Replay dead tasks"
          confirmLabel={`Replay ${formatNumber(limit)}`}
          busy={busy}
          onConfirm={() => (limit > 0 ? void replay() : setCount(null))}
          onCancel={() => setCount(null)}
        >
          <p data-testid="bulk-replay-count">
            {limit === 0 ? (
              <>No dead task of queue {queue}{filter ? ` matches ${filter}` : ""}: nothing to replay.</>
            ) : (
              <>
                This will replay <b>{formatNumber(limit)}</b> dead task{limit === 1 ? "" : "s"} of queue <b>{queue}</b>
                {filter ? ` (${filter})` : ""}
                {count.count > limit || !count.exact
                  ? ` — ${count.exact ? formatNumber(count.count) : `at least ${formatNumber(count.count)}`} match; one replay takes at most ${formatNumber(REPLAY_LIMIT_MAX)}`
                  : ""}
                .
              </>
            )}
          </p>
          {limit > 0 && <p>Each is queued again with a fresh retry budget; its history is kept.</p>}
        </ConfirmDialog>
      )}
    </>
  );
}

/** The count in the heading: the DLQ's size, or with a filter "matching of total". */
function dlqHeadingCount(dead: number | undefined, matching: DeadCount | null | undefined): string {
  if (dead === undefined) return "";
  if (!matching) return ` (${formatNumber(dead)})`;
  return ` (${matching.exact ? "" : "≥ "}${formatNumber(matching.count)} matching of ${formatNumber(dead)})`;
}

export default function DlqPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  const now = useNow(5000);
  const [draft, setDraft] = useState({ tenant: "", type: "" });
  const [filters, setFilters] = useState(draft);
  const [back, setBack] = useState<Array<string | null>>([]);
  const [cursor, setCursor] = useState<string | null>(null);
  const [inspect, setInspect] = useState<Task | null>(null);
  const page = useResource(
    (signal) => api.dlq({ queue, tenant: filters.tenant || undefined, type: filters.type || undefined, cursor, limit: 50 }, signal),
    [queue, filters, cursor, tick],
  );
  const stats = useResource((signal) => api.queueOrNull(queue, signal), [queue, tick]);
  const columns = useMemo(
    () => [
      ...taskColumns(now, { finished: true, noStatus: true }),
      col.display({
        id: "actions",
        header: "",
        cell: (c) => (
          <div className="row" style={{ gap: 6, flexWrap: "nowrap" }}>
            <button type="button" className="small" onClick={() => setInspect(c.row.original)} data-testid={`inspect-${c.row.original.id}`}>
              Inspect
            </button>
            <TaskActions task={c.row.original} compact onDone={() => page.reload()} />
          </div>
        ),
      }),
    ],
    // eslint-disable-next-line react-hooks/exhaustive-deps
    [now],
  );
  const dead = stats.data === null ? 0 : stats.data?.counts.dead;
  const filtered = Boolean(filters.tenant || filters.type);
  // With a filter the heading counts the matching tasks (not the whole DLQ): "N of total".
  const matching = useResource(
    (signal) =>
      filtered
        ? countDead(queue, filters.tenant || undefined, filters.type || undefined, signal)
        : Promise.resolve(null),
    [queue, filters, tick, filtered],
  );
  return (
    <>
      <PageTitle sub={`Tasks of ${queue} that exhausted their retries or failed permanently. Newest first.`}>
        Dead letters
        <span data-testid="dlq-count">{dlqHeadingCount(dead, filtered ? matching.data : null)}</span>
      </PageTitle>
      <Card
        title="Dead tasks"
        actions={
          <>
            <form
              className="filters"
              aria-label="Filters"
              onSubmit={(e) => {
                e.preventDefault();
                setFilters(draft);
                setBack([]);
                setCursor(null);
              }}
            >
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
            <BulkReplay
              queue={queue}
              tenant={filters.tenant}
              type={filters.type}
              onDone={() => {
                page.reload();
                stats.reload();
              }}
            />
          </>
        }
      >
        {page.loading ? (
          <Loading what="Loading dead tasks" />
        ) : page.error && !page.data ? (
          <ErrorBox error={page.error} retry={page.reload} />
        ) : (
          <>
            <DataTable
              label="Dead tasks"
              data={page.data?.tasks ?? []}
              columns={columns}
              rowId={(t) => t.id}
              rowTestId={(t) => `dlq-row-${t.id}`}
              empty={filters.tenant || filters.type ? "No dead task matches these filters." : `The DLQ of ${queue} is empty.`}
            />
            {(back.length > 0 || page.data?.next_cursor) && (
              <div className="row" style={{ marginTop: 8 }}>
                <button type="button" disabled={back.length === 0} onClick={() => { setCursor(back[back.length - 1] ?? null); setBack(back.slice(0, -1)); }}>
                  ← Previous
                </button>
                <button type="button" disabled={!page.data?.next_cursor} onClick={() => { setBack([...back, cursor]); setCursor(page.data?.next_cursor ?? null); }}>
                  Next →
                </button>
                <span className="muted">Page {back.length + 1}</span>
              </div>
            )}
          </>
        )}
      </Card>
      {inspect && <Inspect task={inspect} onClose={() => setInspect(null)} />}
    </>
  );
}
