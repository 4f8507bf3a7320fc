"use client";
// Opening a timeline: a file picker, drag-and-drop, and the timelines the server keeps
// (GET /api/v1/timelines; hidden when this orq does not serve them).

import { useState } from "react";
import { Empty, ErrorBox, Loading } from "@/components/ui";
import { api, timelinesOff } from "@/lib/api";
import { formatBytes, formatTime } from "@/lib/format";
import { useResource } from "@/lib/hooks";
import { TIMELINE_BYTES_MAX } from "@/lib/timeline";

export interface Loaded {
  name: string;
  text: string;
  /** A file the user opened, one of the server's timelines, or a simulation run from this view. */
  source: "file" | "server" | "simulation";
}

export function Loader({ onLoad, busyName }: { onLoad: (l: Promise<Loaded>) => void; busyName: string | null }) {
  const [over, setOver] = useState(false);
  const list = useResource((signal) => api.timelines(signal), []);
  const openFile = (f: File | undefined) => {
    if (!f) return;
    if (f.size > TIMELINE_BYTES_MAX) {
      onLoad(Promise.reject(new Error(`${f.name}: ${formatBytes(f.size)} is more than ${formatBytes(TIMELINE_BYTES_MAX)}`)));
      return;
    }
    onLoad(f.text().then((text) => ({ name: f.name, text, source: "file" as const })));
  };
  const missing = list.error !== null && timelinesOff(list.error);
  return (
    <div className="grid2">
      <div
        className={`dropzone${over ? " over" : ""}`}
        data-testid="dropzone"
        onDragOver={(e) => {
          e.preventDefault();
          setOver(true);
        }}
        onDragLeave={() => setOver(false)}
        onDrop={(e) => {
          e.preventDefault();
          setOver(false);
          openFile(e.dataTransfer.files[0]);
        }}
      >
        <p>
          Drop a timeline file here (<code className="nowrap">orq-sim run --seed N --timeline FILE</code>), or
        </p>
        <label className="button" style={{ display: "inline-block" }}>
          Choose a file…
          <input
            type="file"
            accept=".jsonl,.json,.ndjson,.txt,application/x-ndjson,application/json,text/plain"
            data-testid="timeline-file"
            style={{ display: "none" }}
            onChange={(e) => {
              openFile(e.target.files?.[0]);
              e.target.value = "";
            }}
          />
        </label>
      </div>
      <div>
        <h3 style={{ marginTop: 0 }}>Timelines on the server</h3>
        {list.loading ? (
          <Loading what="Listing timelines" />
        ) : missing ? (
          <Empty>
            This orq keeps no simulation timelines. Open a file instead: <code className="nowrap">orq-sim run --seed 42 --timeline seed42.jsonl</code>{" "}
            writes one (README, The simulator); or start orq with <code>--timelines DIR</code> to list a directory of them here.
          </Empty>
        ) : list.error ? (
          <ErrorBox error={list.error} retry={list.reload} what="Server timelines" />
        ) : (list.data ?? []).length === 0 ? (
          <Empty>No timeline in the server&apos;s directory yet.</Empty>
        ) : (
          <ul className="feed" aria-label="Server timelines">
            {[...(list.data ?? [])]
              .sort((a, b) => b.modified_ms - a.modified_ms)
              .map((t) => (
                <li key={t.name}>
                  <button
                    type="button"
                    className="small"
                    data-testid={`timeline-${t.name}`}
                    disabled={busyName === t.name}
                    onClick={() =>
                      onLoad(api.timeline(t.name).then((text) => ({ name: t.name, text, source: "server" as const })))
                    }
                  >
                    Open
                  </button>
                  <span className="mono">{t.name}</span>
                  <span className="muted">
                    {formatBytes(t.bytes)} · {formatTime(t.modified_ms)}
                  </span>
                </li>
              ))}
          </ul>
        )}
      </div>
    </div>
  );
}
