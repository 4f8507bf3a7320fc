"use client";
// Replay: run a simulation on the server (seed, fault mix, planted bug; its timeline streams in)
// or open a simulator timeline (file, drag-and-drop, or one the server keeps; `?name=` opens a
// server timeline directly), then scrub through it: tasks on a board by status, workers' states,
// faults on the time axis, the violation with its seed and reproduce command, and any task's
// story. The state at each instant comes from lib/timeline.ts (unit-tested).

import { useSearchParams } from "next/navigation";
import { Suspense, useCallback, useEffect, useMemo, useState } from "react";
import { Loader, type Loaded } from "@/components/replay/Loader";
import { Player } from "@/components/replay/Player";
import { Simulate } from "@/components/replay/Simulate";
import { Board, RecentEvents, StatusChart, Story, Summary, Workers } from "@/components/replay/Views";
import { Card, ErrorBox, Loading, PageTitle } from "@/components/ui";
import { api } from "@/lib/api";
import { formatVirtual } from "@/lib/format";
import { buildModel, parseTimeline, stateAt, type TimelineModel } from "@/lib/timeline";

interface Opened {
  /** Grows with each load: the panels start afresh (filters, playback) for a new timeline. */
  id: number;
  name: string;
  source: Loaded["source"];
  model: TimelineModel;
}

let opens = 0;

function open(l: Loaded): Opened {
  const timeline = parseTimeline(l.text);
  if (!timeline.header && timeline.events.length === 0) {
    throw new Error(`${l.name}: no timeline header or event in it (is it a JSON Lines timeline?)`);
  }
  opens += 1;
  return { id: opens, name: l.name, source: l.source, model: buildModel(timeline) };
}

function ReplayView() {
  const params = useSearchParams();
  const [opened, setOpened] = useState<Opened | null>(null);
  const [loading, setLoading] = useState<string | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [t, setTRaw] = useState(0);
  const [selected, setSelected] = useState<string | null>(null);
  const [hidden, setHidden] = useState<Set<string>>(new Set());
  const setT = useCallback((v: number) => setTRaw(Math.round(v)), []);

  const load = useCallback((p: Promise<Loaded>, name = "timeline") => {
    setLoading(name);
    setError(null);
    p.then(
      (l) => {
        const o = open(l);
        setOpened(o);
        setSelected(null);
        setHidden(new Set());
        // Start where it matters: at the violation when there is one, else at the start.
        setTRaw(o.model.violation ? o.model.violation.t_ms : o.model.start_ms);
      },
      (e: unknown) => setError(e),
    )
      .catch((e: unknown) => setError(e))
      .finally(() => setLoading(null));
  }, []);

  // A finished simulation opens like a file.
  const openRun = useCallback((l: Loaded) => load(Promise.resolve(l), l.name), [load]);

  const nameParam = params.get("name");
  useEffect(() => {
    if (!nameParam) return;
    const t = setTimeout(
      () => load(api.timeline(nameParam).then((text) => ({ name: nameParam, text, source: "server" as const })), nameParam),
      0,
    );
    return () => clearTimeout(t);
  }, [nameParam, load]);

  const model = opened?.model;
  const state = useMemo(() => (model ? stateAt(model, t) : null), [model, t]);

  return (
    <>
      <PageTitle sub="Run a simulation or open its timeline: watch tasks move between states, see the faults, find the violation.">
        Replay
      </PageTitle>
      <Card title="Run a simulation" testid="card-simulate">
        <Simulate onOpen={openRun} />
      </Card>
      <Card title={opened ? `Open another timeline (now: ${opened.name})` : "Open a timeline"}>
        <Loader onLoad={(p) => load(p)} busyName={loading} />
        {loading && <Loading what={`Reading ${loading}`} />}
        {error ? <ErrorBox error={error} /> : null}
      </Card>
      {model && state && opened && (
        <>
          <Summary model={model} name={opened.name} onTask={setSelected} setT={setT} />
          <Card title="Time" testid="card-time">
            <StatusChart model={model} t={t} setT={setT} />
            <Player key={opened.id} model={model} t={t} setT={setT} hidden={hidden} setHidden={setHidden} />
          </Card>
          <Card
            title={`Tasks at ${formatVirtual(t)} (${state.tasks.size})`}
            testid="card-board"
            actions={state.violation ? <span className="pill bad">after the violation</span> : null}
          >
            <Board key={opened.id} state={state} selected={selected} onTask={setSelected} />
          </Card>
          <div className="grid2 grid2-wide">
            <Card title="Workers" testid="card-workers">
              <Workers state={state} />
            </Card>
            <Card title={selected ? "Task story" : "Latest events"} testid="card-story">
              {selected ? (
                <Story model={model} id={selected} t={t} setT={setT} onClose={() => setSelected(null)} />
              ) : (
                <>
                  <p className="muted" style={{ marginTop: 0 }}>Click a task on the board to see its whole story.</p>
                  <RecentEvents model={model} t={t} setT={setT} />
                </>
              )}
            </Card>
          </div>
        </>
      )}
    </>
  );
}

export default function ReplayPage() {
  return (
    <Suspense fallback={<Loading what="Loading" />}>
      <ReplayView />
    </Suspense>
  );
}
