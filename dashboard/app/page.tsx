"use client";
// Overview: every queue with its counts per status, pause / resume; for the selected queue the
// throughput and latency of the last hour and the latest events.

import Link from "next/link";
import { useMemo, useState } from "react";
import { LatencyChart, ThroughputChart } from "@/components/Charts";
import { ConfirmDialog } from "@/components/Dialog";
import { useAdminDenied, useLive, useQueue, useToast } from "@/components/providers";
import { AdminNeeded, Card, Empty, ErrorBox, Loading, PageTitle, StatusBadge, TaskLink, Time } from "@/components/ui";
import { api, errorMessage, NEEDS_ADMIN, needsAdmin } from "@/lib/api";
import { formatNumber } from "@/lib/format";
import { useNow, useResource } from "@/lib/hooks";
import { chartAxis, latencyPoints, ratePoints } from "@/lib/metrics";
import { STATUS_COLOURS, STATUSES, type QueueStats } from "@/lib/types";

function StackBar({ q }: { q: QueueStats }) {
  const total = STATUSES.reduce((n, s) => n + (q.counts[s] ?? 0), 0);
  if (total === 0) {
    return <div className="stackbar" title="no tasks" />;
  }
  return (
    <div className="stackbar" title={STATUSES.map((s) => `${s}: ${q.counts[s]}`).join(", ")}>
      {STATUSES.map((s) =>
        q.counts[s] > 0 ? (
          <div key={s} style={{ width: `${(100 * q.counts[s]) / total}%`, background: STATUS_COLOURS[s] }} />
        ) : null,
      )}
    </div>
  );
}

function PauseButton({ q, onDone }: { q: QueueStats; onDone: () => void }) {
  const toast = useToast();
  const denied = useAdminDenied();
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const act = async (pause: boolean) => {
    setBusy(true);
    try {
      await (pause ? api.pause(q.queue) : api.resume(q.queue));
      toast("ok", `Queue ${q.queue} ${pause ? "paused" : "resumed"}`);
      onDone();
    } catch (e) {
      toast("error", needsAdmin(e) ? `${pause ? "Pausing" : "Resuming"} a queue ${NEEDS_ADMIN}` : `${pause ? "Pause" : "Resume"} failed: ${errorMessage(e)}`);
    } finally {
      setBusy(false);
      setConfirm(false);
    }
  };
  if (denied) {
    return (
      <span className="muted" style={{ whiteSpace: "nowrap" }} title="Pause and resume need an admin key" data-testid={`pause-needs-admin-${q.queue}`}>
        {NEEDS_ADMIN}
      </span>
    );
  }
  if (q.paused) {
    return (
      <button type="button" className="small" disabled={busy} onClick={() => act(false)} data-testid={`resume-${q.queue}`}>
        Resume
      </button>
    );
  }
  return (
    <>
      <button type="button" className="small" disabled={busy} onClick={() => setConfirm(true)} data-testid={`pause-${q.queue}`}>
        Pause
      </button>
      {confirm && (
        <ConfirmDialog
          title={`Pause queue ${q.queue}?`}
          confirmLabel="Pause leasing"
          busy={busy}
          onConfirm={() => act(true)}
          onCancel={() => setConfirm(false)}
        >
          <p>
            Workers stop leasing tasks of <b>{q.queue}</b> ({formatNumber(q.counts.queued)} queued).
            Submits, promotion of scheduled tasks and lease reaping go on; leased tasks finish.
          </p>
        </ConfirmDialog>
      )}
    </>
  );
}

/**
 * One of a queue's lifetime totals. The API leaves the totals out (`{}`) for a key that may not
 * see them (a tenant key): "—", not a misleading 0.
 */
function Total({ totals, k }: { totals: QueueStats["totals"]; k: string }) {
  if (Object.keys(totals ?? {}).length === 0) {
    return (
      <span className="muted" title="Not shown to this API key (the totals cover every tenant)">
        —
      </span>
    );
  }
  return <>{formatNumber(totals[k] ?? 0)}</>;
}

function QueuesTable({ queues, reload }: { queues: QueueStats[]; reload: () => void }) {
  const { queue: selected, setQueue } = useQueue();
  if (queues.length === 0) {
    return (
      <Empty>
        No queues yet. A queue appears when it receives its first task:{" "}
        <Link href="/tasks/">submit one</Link>.
      </Empty>
    );
  }
  return (
    <div className="table-wrap">
      <table aria-label="Queues">
        <thead>
          <tr>
            <th>Queue</th>
            <th>State</th>
            {STATUSES.map((s) => (
              <th key={s} className="num">
                {s}
              </th>
            ))}
            <th>Mix</th>
            <th className="num" title="tasks ever submitted">Submitted</th>
            <th className="num" title="failed attempts, ever">Failed att.</th>
            <th />
          </tr>
        </thead>
        <tbody>
          {queues.map((q) => (
            <tr key={q.queue} data-testid={`queue-row-${q.queue}`} className={q.queue === selected ? "row-selected" : undefined}>
              <td>
                <button
                  type="button"
                  className="link-button"
                  onClick={() => setQueue(q.queue)}
                  title="Show this queue's charts and use it in the other views"
                >
                  {q.queue === selected ? <b>{q.queue}</b> : q.queue}
                </button>
              </td>
              <td>
                {q.paused ? (
                  <span className="pill warn" data-testid={`paused-${q.queue}`}>paused</span>
                ) : (
                  <span className="pill good">running</span>
                )}
              </td>
              {STATUSES.map((s) => (
                <td key={s} className="num" data-testid={`count-${q.queue}-${s}`} style={{ color: q.counts[s] > 0 ? STATUS_COLOURS[s] : undefined }}>
                  {formatNumber(q.counts[s])}
                </td>
              ))}
              <td>
                <StackBar q={q} />
              </td>
              <td className="num" data-testid={`total-${q.queue}-enqueued`}>
                <Total totals={q.totals} k="enqueued" />
              </td>
              <td className="num" data-testid={`total-${q.queue}-failed`}>
                <Total totals={q.totals} k="failed" />
              </td>
              <td>
                <PauseButton q={q} onDone={reload} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function QueueCharts({ known }: { known: boolean }) {
  const { queue } = useQueue();
  const { tick } = useLive();
  const now = useNow(10_000);
  // The metrics route answers 404 for a queue without tasks: ask only for known queues.
  const metrics = useResource(
    (signal) => (known ? api.metrics(queue, signal) : Promise.resolve(null)),
    [queue, tick, known],
  );
  const forbidden = metrics.error !== null && needsAdmin(metrics.error);
  const rates = useMemo(() => (metrics.data ? ratePoints(metrics.data, now) : []), [metrics.data, now]);
  const latency = useMemo(() => (metrics.data ? latencyPoints(metrics.data, now) : []), [metrics.data, now]);
  const hasLatency = latency.some((p) => p.wait_p50 !== undefined || p.run_p50 !== undefined);
  // One time axis for both charts (same domain, same ticks), so that their times line up.
  const axis = useMemo(() => chartAxis([...rates, ...latency].map((p) => p.t_ms)), [rates, latency]);
  return (
    <div className="grid2">
      <Card title={`Throughput — ${queue}`} testid="card-throughput">
        {metrics.loading ? (
          <Loading what="Loading metrics" />
        ) : forbidden ? (
          <AdminNeeded what="Throughput" />
        ) : metrics.error ? (
          <ErrorBox error={metrics.error} retry={metrics.reload} />
        ) : rates.length === 0 ? (
          <Empty>{known ? "No activity in the last hour." : `Queue ${queue} has no tasks yet.`}</Empty>
        ) : (
          <ThroughputChart points={rates} axis={axis} />
        )}
      </Card>
      <Card title={`Latency — ${queue}`} testid="card-latency">
        {metrics.loading ? (
          <Loading what="Loading metrics" />
        ) : forbidden ? (
          <AdminNeeded what="Latency" />
        ) : metrics.error ? (
          <ErrorBox error={metrics.error} retry={metrics.reload} />
        ) : !hasLatency ? (
          <Empty>{known ? "No task started or finished in the last hour." : `Queue ${queue} has no tasks yet.`}</Empty>
        ) : (
          <LatencyChart points={latency} axis={axis} />
        )}
        <p className="muted">Wait: submit or due time → lease. Run: lease → outcome. p50 and p99 per 10 s.</p>
      </Card>
    </div>
  );
}

function EventFeed() {
  const { events, mode } = useLive();
  const now = useNow();
  if (mode !== "live") {
    return <Empty>The live event feed needs the events stream ({mode === "polling" ? "unavailable: polling" : "connecting"}).</Empty>;
  }
  if (events.length === 0) {
    return <Empty>Waiting for events…</Empty>;
  }
  return (
    <ul className="feed" data-testid="event-feed">
      {events.slice(0, 50).map((e) => (
        <li key={`${e.queue}-${e.stream_id}-${e.kind}`}>
          <span className="muted" style={{ minWidth: 70 }}>
            <Time at={e.ts} now={now} />
          </span>
          <StatusBadge status={e.kind} />
          {e.task_id && <TaskLink id={e.task_id} queue={e.queue} />}
          {e.tenant && <span className="muted">tenant {e.tenant}</span>}
          {e.attempt ? <span className="muted">attempt {e.attempt}</span> : null}
          {e.fields.m && <span className="error-text">{e.fields.m}</span>}
        </li>
      ))}
    </ul>
  );
}

export default function OverviewPage() {
  const { queue } = useQueue();
  const { tick } = useLive();
  const queues = useResource((signal) => api.queues(signal), [tick]);
  const selected = queues.data?.find((q) => q.queue === queue);
  const totals = useMemo(() => {
    const out = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<string, number>;
    for (const q of queues.data ?? []) for (const s of STATUSES) out[s]! += q.counts[s] ?? 0;
    return out;
  }, [queues.data]);
  return (
    <>
      <PageTitle sub="Counts per status across queues; the selected queue's throughput, latency and events.">
        Overview
      </PageTitle>
      {queues.data && queues.data.length > 0 && (
        <div className="counts" data-testid="totals">
          {STATUSES.map((s) => (
            <div key={s} className="count" style={{ borderLeftColor: STATUS_COLOURS[s] }}>
              <span className="n" data-testid={`all-count-${s}`}>{formatNumber(totals[s])}</span>
              <span className="l">{s}</span>
            </div>
          ))}
        </div>
      )}
      <Card title="Queues" actions={queues.error && queues.data ? <span className="pill bad">refresh failed</span> : null}>
        {queues.loading ? (
          <Loading what="Loading queues" />
        ) : queues.error && !queues.data ? (
          <ErrorBox error={queues.error} retry={queues.reload} />
        ) : (
          <QueuesTable queues={queues.data ?? []} reload={queues.reload} />
        )}
      </Card>
      {queues.data && <QueueCharts known={selected !== undefined} />}
      <Card title={`Latest events — ${queue}`} actions={<span className="muted">since this page opened</span>}>
        <EventFeed />
      </Card>
    </>
  );
}
