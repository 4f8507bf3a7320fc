// Human-readable numbers, durations and times for the dashboard. Pure functions (tested).

/** 12345 → "12,345". */
export function formatNumber(n: number | null | undefined): string {
  if (n === null || n === undefined || !Number.isFinite(n)) {
    return "—";
  }
  return n.toLocaleString("en-US", { maximumFractionDigits: 2 });
}

/** A duration in ms, to the two largest units: "850 ms", "3.2 s", "4 min 10 s", "2 h 5 min". */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) {
    return "—";
  }
  const sign = ms < 0 ? "-" : "";
  const a = Math.abs(ms);
  if (a < 1000) {
    return `${sign}${Math.round(a)} ms`;
  }
  if (a < 60_000) {
    const s = a / 1000;
    return `${sign}${s < 10 ? s.toFixed(1) : Math.round(s)} s`;
  }
  const total_s = Math.round(a / 1000);
  const units: Array<[number, string]> = [
    [Math.floor(total_s / 86_400), "d"],
    [Math.floor((total_s % 86_400) / 3600), "h"],
    [Math.floor((total_s % 3600) / 60), "min"],
    [total_s % 60, "s"],
  ];
  const first = units.findIndex(([v]) => v > 0);
  const parts = [units[first]!];
  const next = units[first + 1];
  if (next && next[0] > 0) {
    parts.push(next);
  }
  return sign + parts.map(([v, u]) => `${v} ${u}`).join(" ");
}

/** Milliseconds since the epoch of an RFC 3339 string or a number; null when unreadable. */
export function toMs(t: string | number | null | undefined): number | null {
  if (t === null || t === undefined) {
    return null;
  }
  if (typeof t === "number") {
    return Number.isFinite(t) ? t : null;
  }
  const ms = Date.parse(t);
  return Number.isNaN(ms) ? null : ms;
}

/** "3 min ago" / "in 5 s" / "just now", relative to `now_ms`. */
export function formatRelative(t: string | number | null | undefined, now_ms: number): string {
  const ms = toMs(t);
  if (ms === null) {
    return "—";
  }
  const d = ms - now_ms;
  if (Math.abs(d) < 1000) {
    return "just now";
  }
  return d < 0 ? `${formatDuration(-d)} ago` : `in ${formatDuration(d)}`;
}

function pad(n: number, w = 2): string {
  return String(n).padStart(w, "0");
}

/** Local wall time "2026-11-29 10:55:03" (".123" with `withMs`). */
export function formatTime(t: string | number | null | undefined, withMs = false): string {
  const ms = toMs(t);
  if (ms === null) {
    return "—";
  }
  const d = new Date(ms);
  const base = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMs ? `${base}.${pad(d.getMilliseconds(), 3)}` : base;
}

/** Virtual time of a replay: "12.345 s" (or "1 min 2.345 s"). */
export function formatVirtual(ms: number): string {
  const sign = ms < 0 ? "-" : "";
  const a = Math.abs(ms);
  const min = Math.floor(a / 60_000);
  const s = (a - min * 60_000) / 1000;
  return min > 0 ? `${sign}${min} min ${s.toFixed(3)} s` : `${sign}${s.toFixed(3)} s`;
}

/** Bytes: "980 B", "12.3 KiB", "4.5 MiB". */
export function formatBytes(n: number): string {
  if (n < 1024) {
    return `${n} B`;
  }
  if (n < 1024 * 1024) {
    return `${(n / 1024).toFixed(1)} KiB`;
  }
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/** Pretty JSON for display; strings that hold JSON stay as they are. */
export function prettyJson(v: unknown): string {
  if (v === undefined) {
    return "";
  }
  try {
    return JSON.stringify(v, null, 2);
  } catch {
    return String(v);
  }
}

/** The first 8 and last 4 characters of a long id: "01MCC5RM…P1A". */
export function shortId(id: string): string {
  return id.length > 14 ? `${id.slice(0, 8)}…${id.slice(-4)}` : id;
}
