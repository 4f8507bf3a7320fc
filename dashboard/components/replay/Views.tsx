"use client";
// The panels of the replay view at one instant: run summary with the verdict and violation, task
// counts over time, the board of tasks by status, the workers (and the store: paused, refusing
// calls), a task's story and the latest events.

import { useMemo, useState } from "react";
import {
  Area,
  AreaChart,
  CartesianGrid,
  ReferenceLine,
  ResponsiveContainer,
  Tooltip,
  XAxis,
  YAxis,
} from "recharts";
import { formatVirtual } from "@/lib/format";
import {
  BOARD_STATUSES,
  countByStatus,
  recentEvents,
  statusSeries,
  taskIdsIn,
  taskStory,
  type ReplayState,
  type StoreRefusal,
  type TaskState,
  type TaskStatus,
  type TimelineEvent,
  type TimelineModel,
  verdictShown,
} from "@/lib/timeline";
import { reproduceCommand } from "@/lib/reproduce";
import { STATUS_COLOURS, type Status } from "@/lib/types";
import { StatusBadge } from "@/components/ui";

/** Cards drawn per board column; the rest are counted. */
export const BOARD_COLUMN_MAX = 150;

export function statusColour(s: string): string {
  return STATUS_COLOURS[s as Status] ?? "#6b7280";
}

function detailsText(d: Record<string, unknown>): string {
  return Object.entries(d)
    .filter(([k]) => k !== "store_ms" && k !== "stats")
    .map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`)
    .join(" ");
}

/** The store's refusal window in a pill: "store refusing: OOM (writes) until 12.400 s". */
export function refusalText(r: StoreRefusal): string {
  const why = r.writes_only ? " (writes)" : r.kind === "loading" ? " (after a restart)" : "";
  return `store refusing: ${r.word}${why} until ${formatVirtual(r.until_ms)}`;
}

/** The fault families of a header's `config.faults.families` ("none" when empty), or undefined. */
function familiesText(faults: unknown): string | undefined {
  const f = faults !== null && typeof faults === "object" ? (faults as Record<string, unknown>).families : undefined;
  if (!Array.isArray(f)) return undefined;
  return f.length === 0 ? "none" : f.map(String).join(", ");
}

/**
 * The command that reproduces the run, built from the header's seed and options and never copied
 * from the file's `replay` text (lib/reproduce.ts); when the header cannot make one, Copy is
 * disabled and the reason shown.
 */
function Reproduce({ header }: { header: TimelineModel["header"] }) {
  const r = useMemo(() => reproduceCommand(header), [header]);
  const [copied, setCopied] = useState<string | null>(null);
  const copy = (command: string) =>
    void navigator.clipboard
      ?.writeText(command)
      .then(() => setCopied(command))
      .catch(() => setCopied(null));
  return (
    <p style={{ margin: "6px 0" }}>
      Reproduce:{" "}
      {r.ok ? (
        <code data-testid="replay-command">{r.command}</code>
      ) : (
        <span className="field-error" data-testid="replay-refused">
          no command: {r.reason}
        </span>
      )}
      <button
        type="button"
        className="small"
        style={{ marginLeft: 8 }}
        data-testid="replay-copy"
        disabled={!r.ok}
        title={r.ok ? "Copy the command" : `No command to copy: ${r.reason}`}
        onClick={() => r.ok && copy(r.command)}
      >
        {r.ok && copied === r.command ? "Copied" : "Copy"}
      </button>
      {r.ok && header?.replay && header.replay !== r.command && (
        <span className="muted" data-testid="replay-differs" style={{ marginLeft: 8 }}>
          (built from the seed and options: the file&apos;s own replay line differs and is not offered)
        </span>
      )}
    </p>
  );
}

export function Summary({
  model,
  name,
  onTask,
  setT,
}: {
  model: TimelineModel;
  name: string;
  onTask: (id: string) => void;
  setT: (t: number) => void;
}) {
  const h = model.header;
  const c = h?.config ?? {};
  const facts: Array<[string, unknown]> = [
    ["tenants", c.tenants],
    ["tasks", c.tasks],
    ["workers", c.workers],
    ["concurrency", c.concurrency],
    ["schedulers", c.schedulers],
    ["lease", c.lease_ms !== undefined ? `${String(c.lease_ms)} ms` : undefined],
    ["planted bug", c.planted],
    ["lossy restart", c.lossy_restart],
    ["fault families", familiesText(c.faults)],
    ["refused calls", model.verdict?.stats?.refused_calls],
    ["delivered after refusal", model.verdict?.stats?.reports_delivered_after_refusal],
  ];
  const v = model.violation;
  const verdict = model.verdict;
  const aborted = model.timeline.aborted;
  const failed = (verdict && !verdict.passed) || v !== null;
  const message = v ? String(v.details.message ?? "") : verdict?.text ?? "";
  const heading = failed
    ? "Invariant violated"
    : verdict
      ? "Run passed"
      : aborted
        ? "Run stopped by the server before its end"
        : "Run without a verdict (cut short?)";
  return (
    <div
      className={failed ? "violation-box" : verdict ? "pass-box" : "cut-box"}
      data-testid={failed ? "violation" : verdict ? "verdict-pass" : "verdict-none"}
    >
      <div className="row" style={{ justifyContent: "space-between" }}>
        <h2>
          {heading} — {name}
        </h2>
        <span className="row">
          <span>
            seed <b data-testid="timeline-seed">{String(h?.seed ?? "?")}</b>
          </span>
          <span className="muted">{model.events.length} events · {formatVirtual(model.end_ms)}</span>
        </span>
      </div>
      {failed && (
        <>
          <p data-testid="violation-message">
            {v ? (
              <>
                At <button type="button" className="link-button" onClick={() => setT(v.t_ms)}>{formatVirtual(v.t_ms)}</button>:{" "}
              </>
            ) : null}
            <b>{message}</b>
          </p>
          {taskIdsIn(message).length > 0 && (
            <p>
              Tasks named:{" "}
              {taskIdsIn(message).map((id) => (
                <button key={id} type="button" className="link-button mono" style={{ marginRight: 8 }} onClick={() => onTask(id)}>
                  {id}
                </button>
              ))}
            </p>
          )}
          {verdict && <p className="muted">Verdict: {verdictShown(verdict.text)}</p>}
        </>
      )}
      {aborted && (
        <p data-testid="summary-aborted">
          The server stopped the run: <b>{aborted.reason.replace(/[.\s]+$/, "")}</b>. This shows what arrived before it.
        </p>
      )}
      <Reproduce header={h} />
      <div className="legend">
        {facts
          .filter(([, val]) => val !== undefined && val !== null)
          .map(([k, val]) => (
            <span key={k} data-testid={`fact-${k.replace(/ /g, "-")}`}>
              {k}: <b>{String(val)}</b>
            </span>
          ))}
      </div>
      {model.timeline.problems.length > 0 && (
        <details>
          <summary className="field-error">{model.timeline.problems.length} problem(s) reading the file</summary>
          <ul>
            {model.timeline.problems.map((p) => (
              <li key={p}>{p}</li>
            ))}
          </ul>
        </details>
      )}
    </div>
  );
}

export function StatusChart({ model, t, setT }: { model: TimelineModel; t: number; setT: (t: number) => void }) {
  const series = useMemo(() => statusSeries(model, 300), [model]);
  const span = model.end_ms - model.start_ms;
  const tick = (v: number) => (span < 2000 ? `${v} ms` : `${(v / 1000).toFixed(span < 20_000 ? 1 : 0)} s`);
  return (
    <div style={{ width: "100%", height: 190 }} data-testid="replay-chart">
      <ResponsiveContainer>
        <AreaChart
          data={series}
          margin={{ top: 4, right: 12, left: 0, bottom: 0 }}
          onClick={(s: { activeLabel?: string | number }) => {
            if (s?.activeLabel !== undefined) setT(Number(s.activeLabel));
          }}
        >
          <CartesianGrid strokeDasharray="3 3" stroke="#e2e8f0" />
          <XAxis dataKey="t_ms" type="number" domain={[model.start_ms, model.end_ms]} tickFormatter={tick} fontSize={11} />
          <YAxis fontSize={11} width={36} allowDecimals={false} />
          <Tooltip
            labelFormatter={(v) => formatVirtual(Number(v))}
            wrapperStyle={{ fontSize: 11, opacity: 0.92 }}
            itemStyle={{ padding: 0 }}
          />
          {BOARD_STATUSES.filter((s) => s !== "purged").map((s) => (
            <Area key={s} type="stepAfter" dataKey={s} stackId="1" stroke={statusColour(s)} fill={statusColour(s)} fillOpacity={0.5} isAnimationActive={false} />
          ))}
          <ReferenceLine x={Math.round(t)} stroke="#0f172a" strokeWidth={2} />
          {model.violation && <ReferenceLine x={model.violation.t_ms} stroke="#dc2626" strokeDasharray="4 2" />}
        </AreaChart>
      </ResponsiveContainer>
    </div>
  );
}

export function Board({
  state,
  selected,
  onTask,
}: {
  state: ReplayState;
  selected: string | null;
  onTask: (id: string) => void;
}) {
  const [find, setFind] = useState("");
  const [tenant, setTenant] = useState("");
  const tenants = useMemo(
    () => Array.from(new Set(Array.from(state.tasks.values()).map((x) => x.tenant ?? ""))).filter(Boolean).sort(),
    [state],
  );
  const counts = countByStatus(state);
  const needle = find.trim().toUpperCase();
  const columns = new Map<TaskStatus, TaskState[]>();
  for (const s of BOARD_STATUSES) columns.set(s, []);
  for (const task of state.tasks.values()) {
    if (needle && !task.id.includes(needle)) continue;
    if (tenant && task.tenant !== tenant) continue;
    columns.get(task.status)!.push(task);
  }
  return (
    <>
      <div className="filters" style={{ marginBottom: 8 }}>
        <label className="field">
          Find task
          <input aria-label="Find task" value={find} onChange={(e) => setFind(e.target.value)} placeholder="id or part of it" />
        </label>
        <label className="field">
          Tenant
          <select aria-label="Board tenant" value={tenant} onChange={(e) => setTenant(e.target.value)}>
            <option value="">all</option>
            {tenants.map((x) => (
              <option key={x} value={x}>
                {x}
              </option>
            ))}
          </select>
        </label>
        {state.paused && <span className="pill warn">queue paused</span>}
        {state.store_refusal && (
          <span className="pill warn" data-testid="board-store-refusing">
            {refusalText(state.store_refusal)}
          </span>
        )}
      </div>
      <div className="board" data-testid="board">
        {BOARD_STATUSES.map((s) => {
          const list = columns.get(s)!;
          list.sort((a, b) => b.since_ms - a.since_ms);
          return (
            <div key={s} className="column" data-testid={`board-${s}`}>
              <h3>
                <span style={{ color: statusColour(s) }}>{s}</span>
                <span data-testid={`board-count-${s}`}>{counts[s]}</span>
              </h3>
              {list.slice(0, BOARD_COLUMN_MAX).map((task) => (
                <button
                  type="button"
                  key={task.id}
                  className={`task-card${task.id === selected ? " selected" : ""}`}
                  style={{ borderLeftColor: statusColour(s) }}
                  data-testid={`task-${task.id}`}
                  data-status={task.status}
                  onClick={() => onTask(task.id)}
                  title={`${task.id} · ${task.last_kind} at ${formatVirtual(task.since_ms)}`}
                >
                  <span className="mono">{task.id.slice(-8)}</span> {task.tenant}
                  <br />
                  <span className="muted">
                    att {task.attempt}
                    {task.worker ? ` · ${task.worker}` : ""}
                  </span>
                </button>
              ))}
              {list.length > BOARD_COLUMN_MAX && <div className="muted">+{list.length - BOARD_COLUMN_MAX} more (use Find)</div>}
            </div>
          );
        })}
      </div>
    </>
  );
}

export function Workers({ state }: { state: ReplayState }) {
  const workers = Array.from(state.workers.values()).sort((a, b) => a.name.localeCompare(b.name, "en", { numeric: true }));
  const refusal = state.store_refusal;
  // The store row counts every single refusal so far; its tooltip names the actors that are not
  // workers (client, supervisor), whose counts have no row of their own.
  const totalRefusals = Array.from(state.refusals.values()).reduce((a, n) => a + n, 0);
  const otherRefusals = Array.from(state.refusals.entries()).filter(([a]) => !state.workers.has(a));
  return (
    <div className="table-wrap">
      <table aria-label="Workers at this time" className="nowrap">
        <thead>
          <tr>
            <th>Worker</th>
            <th>State</th>
            <th>Since</th>
            <th>Until</th>
            <th className="num" title="Clock offset: the sum of the clock jumps so far">Clock Δ</th>
            <th className="num">Crashes</th>
            <th className="num">Stalls</th>
            <th className="num" title="Single calls refused with a transient error word (refusal events); calls refused during a store refusal window are counted only in the end stats">
              Refused
            </th>
          </tr>
        </thead>
        <tbody>
          <tr data-testid="worker-store" className={refusal ? "row-warn" : undefined}>
            <td>store</td>
            <td>
              {refusal && (
                <span className="pill warn" data-testid="store-refusing" title={refusalText(refusal)}>
                  refusing {refusal.word}
                  {refusal.writes_only ? " (writes)" : ""}
                </span>
              )}{" "}
              {state.paused ? <span className="pill warn">queue paused</span> : !refusal && <span className="pill good">serving</span>}
            </td>
            <td>{refusal ? formatVirtual(refusal.since_ms) : ""}</td>
            <td>{refusal ? formatVirtual(refusal.until_ms) : ""}</td>
            <td className="num" data-testid="store-clock-offset">
              {state.store_clock_offset_ms >= 0 ? "+" : ""}
              {state.store_clock_offset_ms} ms
            </td>
            <td />
            <td />
            <td className="num" title={otherRefusals.map(([a, n]) => `${a}: ${n}`).join(", ") || undefined} data-testid="refusals-total">
              {totalRefusals}
            </td>
          </tr>
          {workers.map((w) => (
            <tr key={w.name} data-testid={`worker-${w.name}`} data-condition={w.condition} className={w.condition === "crashed" ? "row-bad" : w.condition === "stalled" ? "row-warn" : undefined}>
              <td className="mono">
                {w.id}
                {w.name.startsWith("s") && <span className="muted"> (scheduler)</span>}
              </td>
              <td className={`worker-${w.condition}`}>{w.condition}</td>
              <td>{formatVirtual(w.since_ms)}</td>
              <td>
                {w.condition === "stalled" && w.stalled_until_ms !== null
                  ? formatVirtual(w.stalled_until_ms)
                  : w.condition === "crashed" && w.restart_at_ms !== null
                    ? `restart ≈ ${formatVirtual(w.restart_at_ms)}`
                    : ""}
              </td>
              <td className="num">
                {w.clock_offset_ms >= 0 ? "+" : ""}
                {w.clock_offset_ms} ms
              </td>
              <td className="num">{w.crashes}</td>
              <td className="num">{w.stalls}</td>
              <td className="num">{state.refusals.get(w.name) ?? 0}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {workers.length === 0 && <div className="state state-empty">No worker has started yet.</div>}
    </div>
  );
}

function EventLine({ e, now, onClick, current }: { e: TimelineEvent; now: number; onClick: () => void; current?: boolean }) {
  return (
    <li className={current ? "current" : e.t_ms > now ? "future" : undefined} data-testid={current ? "story-current" : undefined}>
      <button type="button" className="link-button mono" onClick={onClick} title="Go to this time">
        {formatVirtual(e.t_ms)}
      </button>
      <StatusBadge status={e.kind} />
      <span className="mono">{e.actor}</span>
      {e.attempt ? <span className="muted">attempt {e.attempt}</span> : null}
      <span className="muted" style={{ overflowWrap: "anywhere" }}>{detailsText(e.details)}</span>
    </li>
  );
}

export function Story({
  model,
  id,
  t,
  setT,
  onClose,
}: {
  model: TimelineModel;
  id: string;
  t: number;
  setT: (t: number) => void;
  onClose: () => void;
}) {
  const story = taskStory(model, id);
  let current = -1;
  story.forEach((e, i) => {
    if (e.t_ms <= t) current = i;
  });
  return (
    <div data-testid="task-story">
      <div className="row" style={{ justifyContent: "space-between" }}>
        <h3 className="mono" style={{ margin: 0 }}>{id}</h3>
        <button type="button" className="small" onClick={onClose}>
          Close
        </button>
      </div>
      {story.length === 0 ? (
        <p className="muted">No event names this task.</p>
      ) : (
        <ul className="feed story">
          {story.map((e, i) => (
            <EventLine key={e.index} e={e} now={t} current={i === current} onClick={() => setT(e.t_ms)} />
          ))}
        </ul>
      )}
    </div>
  );
}

export function RecentEvents({ model, t, setT }: { model: TimelineModel; t: number; setT: (t: number) => void }) {
  const list = recentEvents(model, t, 30).reverse();
  if (list.length === 0) return <p className="muted">No event yet at this time.</p>;
  return (
    <ul className="feed" data-testid="recent-events">
      {list.map((e) => (
        <EventLine key={e.index} e={e} now={t} onClick={() => setT(e.t_ms)} />
      ))}
    </ul>
  );
}
