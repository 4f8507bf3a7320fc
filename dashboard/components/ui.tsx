"use client";
// Small presentational pieces shared by the views: status badges, counts, loading / error / empty
// states, times, JSON blocks, cards.

import Link from "next/link";
import type { ReactNode } from "react";
import { errorMessage, NEEDS_ADMIN, needsAdmin } from "@/lib/api";
import { formatRelative, formatTime, shortId } from "@/lib/format";
import { STATUS_COLOURS, type Status } from "@/lib/types";

export function StatusBadge({ status }: { status: string }) {
  const colour = STATUS_COLOURS[status as Status] ?? "#6b7280";
  return (
    <span className="badge" style={{ background: colour }} data-status={status}>
      {status}
    </span>
  );
}

export function Loading({ what = "Loading" }: { what?: string }) {
  return (
    <div className="state state-loading" role="status">
      <span className="spinner" aria-hidden /> {what}…
    </div>
  );
}

/** In place of a view or control that an admin-only route refused (403) to the key in use. */
export function AdminNeeded({ what }: { what: string }) {
  return (
    <div className="state state-admin" role="note" data-testid="needs-admin">
      {what} {NEEDS_ADMIN}: the API key in use is limited to a tenant.
    </div>
  );
}

export function ErrorBox({ error, retry, what = "This view" }: { error: unknown; retry?: () => void; what?: string }) {
  if (needsAdmin(error)) {
    return <AdminNeeded what={what} />;
  }
  return (
    <div className="state state-error" role="alert">
      <strong>Could not load:</strong> {errorMessage(error)}
      {retry && (
        <button type="button" onClick={retry}>
          Retry
        </button>
      )}
    </div>
  );
}

export function Empty({ children }: { children: ReactNode }) {
  return <div className="state state-empty">{children}</div>;
}

/** A time shown relative to now, with the absolute local time on hover. */
export function Time({ at, now }: { at: string | number | null | undefined; now: number }) {
  if (at === null || at === undefined) {
    return <span className="muted">—</span>;
  }
  return (
    <time title={formatTime(at, true)} dateTime={typeof at === "string" ? at : undefined}>
      {formatRelative(at, now)}
    </time>
  );
}

export function TaskLink({ id, queue }: { id: string; queue?: string }) {
  const q = queue ? `&queue=${encodeURIComponent(queue)}` : "";
  return (
    <Link href={`/task/?id=${encodeURIComponent(id)}${q}`} className="mono" title={id}>
      {shortId(id)}
    </Link>
  );
}

export function JsonBlock({ value, label }: { value: unknown; label?: string }) {
  const text = value === undefined || value === null ? "null" : JSON.stringify(value, null, 2);
  return (
    <pre className="json" aria-label={label}>
      {text}
    </pre>
  );
}

export function Card({
  title,
  actions,
  children,
  testid,
}: {
  title?: ReactNode;
  actions?: ReactNode;
  children: ReactNode;
  testid?: string;
}) {
  return (
    <section className="card" data-testid={testid}>
      {(title || actions) && (
        <header className="card-head">
          {title && <h2>{title}</h2>}
          {actions && <div className="card-actions">{actions}</div>}
        </header>
      )}
      {children}
    </section>
  );
}

export function PageTitle({ children, sub }: { children: ReactNode; sub?: ReactNode }) {
  return (
    <div className="page-title">
      <h1>{children}</h1>
      {sub && <p className="muted">{sub}</p>}
    </div>
  );
}
