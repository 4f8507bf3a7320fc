"use client";
// The time controls of the replay: play / pause, speed, step to the previous / next event or
// marker, a scrubber with the faults and landmarks drawn on the time axis, and a time field.

import { useEffect, useRef, useState } from "react";
import { formatVirtual } from "@/lib/format";
import {
  FAULT_KINDS,
  nextEventTime,
  nextMarkerTime,
  prevEventTime,
  type Marker,
  type TimelineModel,
} from "@/lib/timeline";

export const MARKER_COLOURS: Record<string, string> = {
  crash: "#dc2626",
  stall: "#f59e0b",
  clock_jump: "#7c3aed",
  lost_reply: "#0ea5e9",
  duplicate: "#14b8a6",
  fail_before: "#64748b",
  script_flush: "#a16207",
  lossy_restart: "#be123c",
  pause: "#2563eb",
  refusal: "#ea580c",
  refusal_episode: "#c2410c",
  loading: "#b45309",
  slow_call: "#0891b2",
  violation: "#dc2626",
  faults_off: "#16a34a",
  end: "#0f172a",
  snapshot: "#9333ea",
};

/** Which marker is drawn on top where markers overlap (a long timeline puts many in one
 *  pixel): the rare, telling ones (a violation, the end, a crash or a lossy restart) above the
 *  frequent ones (lost replies, duplicates), so a click on them reaches them. */
export const MARKER_LAYER: Record<string, number> = {
  violation: 5,
  end: 5,
  crash: 4,
  lossy_restart: 4,
  stall: 3,
  clock_jump: 3,
  pause: 3,
  refusal_episode: 3,
  loading: 3,
  faults_off: 3,
  snapshot: 2,
};

const SPEEDS = [0.25, 1, 5, 20, 100];

export function Player({
  model,
  t,
  setT,
  hidden,
  setHidden,
}: {
  model: TimelineModel;
  t: number;
  setT: (t: number) => void;
  hidden: Set<string>;
  setHidden: (h: Set<string>) => void;
}) {
  const [playing, setPlaying] = useState(false);
  const [speed, setSpeed] = useState(5);
  const tRef = useRef(t);
  useEffect(() => {
    tRef.current = t;
  }, [t]);
  useEffect(() => {
    if (!playing) return;
    let last = performance.now();
    let frame = requestAnimationFrame(function step(now) {
      const next = Math.min(model.end_ms, tRef.current + (now - last) * speed);
      last = now;
      setT(next);
      if (next >= model.end_ms) {
        setPlaying(false);
        return;
      }
      frame = requestAnimationFrame(step);
    });
    return () => cancelAnimationFrame(frame);
  }, [playing, speed, model, setT]);
  const span = Math.max(1, model.end_ms - model.start_ms);
  const pos = (m: Marker) => `${(100 * (m.t_ms - model.start_ms)) / span}%`;
  const kinds = Array.from(new Set(model.markers.map((m) => m.kind)));
  const failed = model.verdict && !model.verdict.passed;
  return (
    <div className="player" data-testid="player">
      <div className="controls">
        <button
          type="button"
          className="primary"
          onClick={() => {
            if (!playing && t >= model.end_ms) setT(model.start_ms);
            setPlaying((p) => !p);
          }}
          data-testid="play"
        >
          {playing ? "❚❚ Pause" : "▶ Play"}
        </button>
        <label className="row muted" style={{ gap: 4 }}>
          Speed
          <select aria-label="Speed" value={speed} onChange={(e) => setSpeed(Number(e.target.value))}>
            {SPEEDS.map((s) => (
              <option key={s} value={s}>
                {s}×
              </option>
            ))}
          </select>
        </label>
        <button type="button" onClick={() => setT(model.start_ms)} title="Go to the start">
          |◀ Start
        </button>
        <button type="button" onClick={() => { const p = prevEventTime(model, t); if (p !== null) setT(p); }} title="Previous event" data-testid="prev-event">
          ◀ Event
        </button>
        <button type="button" onClick={() => { const n = nextEventTime(model, t); if (n !== null) setT(n); }} title="Next event" data-testid="next-event">
          Event ▶
        </button>
        <button
          type="button"
          onClick={() => {
            const n = model.markers.find((m) => m.t_ms > t && !hidden.has(m.kind));
            if (n) setT(n.t_ms);
            else {
              const any = nextMarkerTime(model, t);
              if (any !== null) setT(any);
            }
          }}
          title="Next fault or landmark"
          data-testid="next-marker"
        >
          Fault ▶
        </button>
        {model.violation && (
          <button type="button" className="danger" onClick={() => setT(model.violation!.t_ms)} data-testid="goto-violation">
            Go to violation
          </button>
        )}
        <span className="clock" data-testid="replay-clock">
          t = {formatVirtual(t)}
        </span>
        <label className="row muted" style={{ gap: 4 }}>
          ms
          <input
            aria-label="Time (ms)"
            type="number"
            min={model.start_ms}
            max={model.end_ms}
            value={Math.round(t)}
            style={{ width: 110 }}
            onChange={(e) => {
              const v = Number(e.target.value);
              if (Number.isFinite(v)) setT(Math.max(model.start_ms, Math.min(model.end_ms, v)));
            }}
          />
          / {model.end_ms}
        </label>
      </div>
      <div className="scrubber">
        <div className="markers" aria-label="Faults on the time axis">
          {model.markers
            .filter((m) => !hidden.has(m.kind))
            .map((m) => (
              <button
                type="button"
                key={m.index}
                className={`marker ${m.kind}${m.kind === "end" && failed ? " end-failed" : ""}`}
                style={{
                  left: pos(m),
                  background: MARKER_COLOURS[m.kind] ?? "#334155",
                  zIndex: MARKER_LAYER[m.kind] ?? 1,
                }}
                title={`${formatVirtual(m.t_ms)} · ${m.label}`}
                aria-label={`${(FAULT_KINDS as readonly string[]).includes(m.kind) ? "fault" : "landmark"} ${m.kind} at ${formatVirtual(m.t_ms)} (${m.t_ms} ms): ${m.label}`}
                data-testid="marker"
                data-kind={m.kind}
                data-t={m.t_ms}
                onClick={() => setT(m.t_ms)}
              />
            ))}
        </div>
        <input
          type="range"
          aria-label="Time scrubber"
          data-testid="scrubber"
          min={model.start_ms}
          max={model.end_ms}
          step={1}
          value={Math.round(t)}
          onChange={(e) => {
            setPlaying(false);
            setT(Number(e.target.value));
          }}
        />
      </div>
      <div className="legend" aria-label="Marker kinds (click to hide or show)">
        {kinds.map((k) => {
          const n = model.markers.filter((m) => m.kind === k).length;
          const off = hidden.has(k);
          return (
            <button
              type="button"
              key={k}
              className={`small${off ? "" : " active"}`}
              onClick={() => {
                const h = new Set(hidden);
                if (off) h.delete(k);
                else h.add(k);
                setHidden(h);
              }}
              title={(FAULT_KINDS as readonly string[]).includes(k) ? "fault" : "landmark"}
            >
              <span>
                <i style={{ background: MARKER_COLOURS[k] ?? "#334155" }} /> {k} ({n})
              </span>
            </button>
          );
        })}
      </div>
    </div>
  );
}
