"use client";
// The frame of every page: navigation, the queue picker, the live-update indicator and the API
// key control.

import Link from "next/link";
import { usePathname } from "next/navigation";
import { useEffect, useState, type ReactNode } from "react";
import { getApiKey, setApiKey } from "@/lib/api";
import { POLL_MS, useLive, useQueue } from "./providers";

const NAV: Array<[string, string]> = [
  ["/", "Overview"],
  ["/tenants/", "Tenants"],
  ["/tasks/", "Tasks"],
  ["/scheduled/", "Scheduled"],
  ["/workers/", "Workers"],
  ["/dlq/", "Dead letters"],
  ["/replay/", "Replay"],
];

function QueuePicker() {
  const { queue, setQueue, queues } = useQueue();
  const [draft, setDraft] = useState<string | null>(null);
  const options = queues.includes(queue) ? queues : [queue, ...queues];
  if (draft !== null) {
    return (
      <form
        className="queue-picker"
        onSubmit={(e) => {
          e.preventDefault();
          if (/^[A-Za-z0-9._-]{1,64}$/.test(draft)) {
            setQueue(draft);
            setDraft(null);
          }
        }}
      >
        <input
          aria-label="Queue name"
          value={draft}
          autoFocus
          onChange={(e) => setDraft(e.target.value)}
          pattern="[A-Za-z0-9._\-]{1,64}"
        />
        <button type="submit">Go</button>
        <button type="button" onClick={() => setDraft(null)}>
          ✕
        </button>
      </form>
    );
  }
  return (
    <label className="queue-picker">
      Queue
      <select
        aria-label="Queue"
        value={queue}
        onChange={(e) => (e.target.value === "\u0000other" ? setDraft("") : setQueue(e.target.value))}
      >
        {options.map((q) => (
          <option key={q} value={q}>
            {q}
          </option>
        ))}
        <option value={"\u0000other"}>other…</option>
      </select>
    </label>
  );
}

function LiveIndicator() {
  const { mode } = useLive();
  const text =
    mode === "live"
      ? "Live"
      : mode === "polling"
        ? `Polling every ${POLL_MS / 1000} s`
        : "Connecting…";
  const title =
    mode === "polling"
      ? "The event stream is not available; the data is refreshed by polling."
      : "Views refresh as events arrive from /api/v1/events.";
  return (
    <span className={`live live-${mode}`} title={title} data-testid="live-mode">
      <span className="dot" aria-hidden /> {text}
    </span>
  );
}

function KeyControl() {
  const [hasKey, setHasKey] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setHasKey(getApiKey() !== null), 0);
    return () => clearTimeout(t);
  }, []);
  if (!hasKey) {
    return null;
  }
  return (
    <button
      type="button"
      className="link-button"
      title="Forget the API key of this tab"
      onClick={() => {
        setApiKey(null);
        window.location.reload();
      }}
    >
      Forget API key
    </button>
  );
}

export function Shell({ children }: { children: ReactNode }) {
  const path = usePathname() ?? "/";
  const norm = path.endsWith("/") ? path : `${path}/`;
  return (
    <div className="shell">
      <nav className="sidebar" aria-label="Views">
        <div className="brand">
          <span className="logo">orq</span>
          <span className="muted">dashboard</span>
        </div>
        <ul>
          {NAV.map(([href, label]) => {
            const active = href === "/" ? norm === "/" : norm.startsWith(href);
            return (
              <li key={href}>
                <Link href={href} className={active ? "active" : undefined} aria-current={active ? "page" : undefined}>
                  {label}
                </Link>
              </li>
            );
          })}
        </ul>
      </nav>
      <div className="main">
        <header className="topbar">
          <QueuePicker />
          <div className="topbar-right">
            <LiveIndicator />
            <KeyControl />
          </div>
        </header>
        <main className="content">{children}</main>
      </div>
    </div>
  );
}
