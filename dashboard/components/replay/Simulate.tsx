"use client";
// Running a simulation from the Replay view: the run form (seed, fault mix, planted bug, lossy
// restart, tasks), the run itself (POST /api/v1/simulations, its timeline read as it streams, with
// the events so far and a Stop button), and its end: the verdict, or why the server stopped it,
// a download of the timeline, and the timeline opened in the player. While the server builds the
// simulator (first run only) the card says so, asks again every few seconds, and retries a refused
// run after the server's Retry-After, for at most RETRY_WAIT_S_MAX in all.

import { useCallback, useEffect, useRef, useState } from "react";
import { AdminNeeded, Empty, ErrorBox, Loading } from "@/components/ui";
import { api, ApiError, errorMessage, isMissingRoute, needsAdmin } from "@/lib/api";
import { formatVirtual } from "@/lib/format";
import { useNow, useResource } from "@/lib/hooks";
import {
  advance,
  buildRequest,
  defaultForm,
  emptyProgress,
  outcome,
  randomSeed,
  refusal,
  RETRY_WAIT_S_MAX,
  retryWait,
  SIM_POLL_MS,
  streamSimulation,
  timelineName,
  type SimForm,
  type SimProgress,
} from "@/lib/simulate";
import type { SimulationRequest, SimulatorInfo } from "@/lib/types";
import type { Loaded } from "./Loader";

/** Least time between two redraws of the progress while lines stream in (ms). */
const PROGRESS_EVERY_MS = 200;

/** The seed the form starts with (fixed: the page is pre-rendered, a random one would differ). */
const FIRST_SEED = 42;

type Phase =
  | { kind: "idle" }
  | { kind: "running"; seed: number }
  /** The server refused the run for now (503 with Retry-After): ask again at `until_ms`. */
  | { kind: "waiting"; seed: number; until_ms: number; message: string };

/** A finished run, as the card reports it. */
interface Result {
  seed: number;
  name: string;
  progress: SimProgress;
  /** The user pressed Stop. */
  stopped: boolean;
  /** The stream broke after some lines (the network, or the size limit). */
  broken: string | null;
  /** An object URL of the timeline for the download link (revoked when replaced or unmounted). */
  url: string | null;
}

/** A message as a sentence: with a full stop unless it has its own. */
function sentence(s: string): string {
  return /[.!?]$/.test(s.trim()) ? s.trim() : `${s.trim()}.`;
}

/** The verdict's kind, `Pass`, `Safety`, `Liveness` or `Crash`: the rest is in the summary below. */
function verdictKind(verdict: string): string {
  const open = verdict.indexOf("(");
  return open < 0 ? verdict : verdict.slice(0, open);
}

function Countdown({ until_ms }: { until_ms: number }) {
  const now = useNow(1000);
  return <>{Math.max(0, Math.ceil((until_ms - now) / 1000))} s</>;
}

function Progress({ seed, p, info }: { seed: number; p: SimProgress; info: SimulatorInfo | undefined }) {
  return (
    <div className="row" role="status" data-testid="sim-progress">
      <span className="spinner" aria-hidden />
      <span>
        Running seed <b>{seed}</b>: <b data-testid="sim-events">{p.events}</b> events
        {p.last_t_ms !== null ? ` · virtual time ${formatVirtual(p.last_t_ms)}` : ""}
        {p.families ? ` · faults: ${p.families.length === 0 ? "none" : p.families.join(", ")}` : ""}
      </span>
      {p.violation !== null && <span className="pill bad">violation found</span>}
      {info && <span className="muted">(the server stops a run after {Math.round(info.limits.timeout_ms / 1000)} s)</span>}
    </div>
  );
}

function Outcome({ r }: { r: Result }) {
  const p = r.progress;
  const o = outcome(p);
  return (
    <div data-testid="sim-result" style={{ marginTop: 10 }}>
      <div className="row">
        <span>
          Seed <b>{r.seed}</b>:
        </span>
        {o === "passed" || o === "failed" ? (
          <span className={`pill ${o === "passed" ? "good" : "bad"}`} data-testid="sim-verdict" title={p.verdict ?? undefined}>
            {verdictKind(p.verdict ?? "")}
          </span>
        ) : (
          <span className="pill warn" data-testid="sim-verdict">
            no verdict
          </span>
        )}
        <span className="muted">{p.events} events</span>
        {r.url && (
          <a className="button" href={r.url} download={r.name} data-testid="sim-download">
            Download timeline
          </a>
        )}
      </div>
      {o === "aborted" && (
        <div className="state state-error" role="alert" data-testid="sim-aborted" style={{ marginTop: 8 }}>
          <span>
            <strong>The server stopped the run:</strong> {sentence(p.aborted ?? "")}
            {p.header ? " The player below shows what arrived before it." : ""}
          </span>
        </div>
      )}
      {r.broken !== null && (
        <div className="state state-error" role="alert" data-testid="sim-broken" style={{ marginTop: 8 }}>
          <span>
            <strong>The run&apos;s stream broke:</strong> {sentence(r.broken)}
            {p.header ? " The player below shows what arrived before it." : ""}
          </span>
        </div>
      )}
      {o === "cut" && r.broken === null && (
        <p className="muted" data-testid="sim-cut">
          {r.stopped
            ? `You stopped the run after ${p.events} events.`
            : `The stream ended without the run's end line, after ${p.events} events.`}
          {p.header ? " The player below shows what arrived." : " Nothing arrived to show."}
        </p>
      )}
    </div>
  );
}

export function Simulate({ onOpen }: { onOpen: (l: Loaded) => void }) {
  const info = useResource((signal) => api.simulator(signal), []);
  const [form, setForm] = useState<SimForm>(() => defaultForm(FIRST_SEED));
  const [phase, setPhase] = useState<Phase>({ kind: "idle" });
  const [progress, setProgress] = useState<SimProgress>(emptyProgress);
  const [result, setResult] = useState<Result | null>(null);
  /** Why the form was refused (the browser's check or the server's 422), shown next to it. */
  const [formError, setFormError] = useState<string | null>(null);
  /** Another run was in progress (409): the server's answer, shown while it still says so. */
  const [busy, setBusy] = useState<string | null>(null);
  const [runError, setRunError] = useState<unknown>(null);

  const ctrlRef = useRef<AbortController | null>(null);
  const timerRef = useRef<ReturnType<typeof setTimeout> | null>(null);
  /** When the server first refused this run with Retry-After (ms), to cap the wait in all. */
  const firstRefusalRef = useRef<number | null>(null);
  const urlRef = useRef<string | null>(null);
  const mountedRef = useRef(true);
  const infoRef = useRef<SimulatorInfo | undefined>(undefined);
  useEffect(() => {
    infoRef.current = info.data;
  });
  useEffect(() => {
    mountedRef.current = true;
    return () => {
      // Leaving the page stops the run and any wait.
      mountedRef.current = false;
      ctrlRef.current?.abort();
      if (timerRef.current !== null) clearTimeout(timerRef.current);
      if (urlRef.current !== null) URL.revokeObjectURL(urlRef.current);
    };
  }, []);

  const d = info.data;
  // Ask again while the simulator is being built or another run holds it.
  const polling = phase.kind !== "running" && d !== undefined && (d.building || d.running);
  const reloadInfo = info.reload;
  useEffect(() => {
    if (!polling) return;
    const t = setInterval(reloadInfo, SIM_POLL_MS);
    return () => clearInterval(t);
  }, [polling, reloadInfo]);

  // One run, from the POST to the opened timeline; a refusal with Retry-After schedules the next
  // try through runRef (the latest run), so a wait survives re-renders.
  const runRef = useRef<(body: SimulationRequest) => Promise<void>>(async () => {});
  const run = useCallback(
    async (body: SimulationRequest) => {
      const finish = (lines: string[], p: SimProgress, stopped: boolean, broken: unknown) => {
        const name = timelineName(body.seed);
        const text = lines.join("\n") + "\n";
        if (urlRef.current !== null) URL.revokeObjectURL(urlRef.current);
        urlRef.current = p.header ? URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" })) : null;
        setResult({
          seed: body.seed,
          name,
          progress: { ...p },
          stopped,
          broken: broken === null ? null : errorMessage(broken),
          url: urlRef.current,
        });
        // What arrived opens like a file, even without the end line: the player shows it.
        if (p.header) onOpen({ name, text, source: "simulation" });
      };

      const refused = (e: unknown) => {
        const now_ms = Date.now();
        const first_ms = firstRefusalRef.current ?? now_ms;
        const wait_s = retryWait(e, (now_ms - first_ms) / 1000);
        reloadInfo();
        if (wait_s !== null) {
          firstRefusalRef.current = first_ms;
          setPhase({ kind: "waiting", seed: body.seed, until_ms: now_ms + wait_s * 1000, message: errorMessage(e) });
          timerRef.current = setTimeout(() => {
            timerRef.current = null;
            // A server that neither can run nor is building the simulator will not be ready
            // later: its reason shows in the card instead of another refusal.
            const latest = infoRef.current;
            if (latest && !latest.available && !latest.building) {
              firstRefusalRef.current = null;
              setPhase({ kind: "idle" });
              return;
            }
            void runRef.current(body);
          }, wait_s * 1000);
          return;
        }
        const gaveUp = firstRefusalRef.current !== null && e instanceof ApiError && e.status === 503 && e.retry_after_s !== null;
        firstRefusalRef.current = null;
        setPhase({ kind: "idle" });
        if (gaveUp) {
          setRunError(new Error(`${errorMessage(e)} — stopped asking after ${RETRY_WAIT_S_MAX / 60} minutes; try again later`));
          return;
        }
        const r = refusal(e);
        if (r.place === "form") setFormError(r.message);
        else if (r.place === "busy") setBusy(r.message);
        else setRunError(r.error);
      };

      const ctrl = new AbortController();
      ctrlRef.current = ctrl;
      setPhase({ kind: "running", seed: body.seed });
      setProgress(emptyProgress());
      const lines: string[] = [];
      const p = emptyProgress();
      let shown_ms = 0;
      let stopped = false;
      let error: unknown = null;
      try {
        await streamSimulation(body, ctrl.signal, (batch) => {
          for (const l of batch) {
            lines.push(l);
            advance(p, l);
          }
          const now_ms = Date.now();
          if (now_ms - shown_ms >= PROGRESS_EVERY_MS) {
            shown_ms = now_ms;
            setProgress({ ...p });
          }
        });
      } catch (e) {
        if (e instanceof DOMException && e.name === "AbortError") stopped = true;
        else error = e;
      }
      ctrlRef.current = null;
      if (!mountedRef.current) return;
      if (lines.length === 0 && error !== null) {
        refused(error);
        return;
      }
      firstRefusalRef.current = null;
      setPhase({ kind: "idle" });
      finish(lines, p, stopped, error);
      reloadInfo();
    },
    [onOpen, reloadInfo],
  );
  useEffect(() => {
    runRef.current = run;
  }, [run]);

  const submit = () => {
    if (!d) return;
    const body = buildRequest(form, d);
    if (typeof body === "string") {
      setFormError(body);
      return;
    }
    setFormError(null);
    setBusy(null);
    setRunError(null);
    setResult(null);
    firstRefusalRef.current = null;
    void run(body);
  };

  const cancelWait = () => {
    if (timerRef.current !== null) clearTimeout(timerRef.current);
    timerRef.current = null;
    firstRefusalRef.current = null;
    setPhase({ kind: "idle" });
  };

  const edit = (f: Partial<SimForm>) => {
    // An edit makes an earlier complaint about the form stale.
    setFormError(null);
    setForm((x) => ({ ...x, ...f }));
  };

  if (info.loading && !d) return <Loading what="Asking orq about the simulator" />;
  if (!d) {
    if (needsAdmin(info.error)) return <AdminNeeded what="Running a simulation" />;
    if ((info.error instanceof ApiError && info.error.status === 404) || isMissingRoute(info.error)) {
      return (
        <Empty>
          This orq cannot run simulations (it has no <code>/api/v1/simulations</code>). Run one yourself with{" "}
          <code>orq-sim run --seed 42 --timeline seed-42.jsonl</code> and open the file below.
        </Empty>
      );
    }
    return <ErrorBox error={info.error} retry={info.reload} what="The simulator's status" />;
  }

  const running = phase.kind === "running";
  const idle = phase.kind === "idle";
  // A missing simulator that this orq can build (a source checkout) is built by the first Run.
  const canRun = idle && !d.building && !d.running && (d.available || d.buildable);
  const planted = d.planted.length > 0 ? d.planted : ["none"];
  const seedMax = Math.min(d.limits.seed_max, Number.MAX_SAFE_INTEGER);
  return (
    <form
      aria-label="Run a simulation"
      onSubmit={(e) => {
        e.preventDefault();
        submit();
      }}
    >
      {d.building ? (
        <p className="muted" data-testid="sim-building" role="status">
          <span className="spinner" aria-hidden /> Building the simulator (first run only)… This can take minutes; Run is
          enabled when it is ready.{d.reason ? ` (${d.reason})` : ""}
        </p>
      ) : !d.available && d.buildable ? (
        <p className="muted" data-testid="sim-buildable">
          {d.reason ?? "The first run builds the simulator from this checkout."}
        </p>
      ) : !d.available ? (
        <p className="muted" data-testid="sim-unavailable">
          The simulator cannot run here now: {d.reason ?? "the server gave no reason"}
        </p>
      ) : null}
      <div className="filters">
        <label className="field">
          Seed
          <input
            name="seed"
            aria-label="Seed"
            inputMode="numeric"
            value={form.seed}
            onChange={(e) => edit({ seed: e.target.value })}
            title={`A whole number from 0 to ${seedMax}`}
            style={{ width: 190 }}
            disabled={!idle}
          />
        </label>
        <button type="button" onClick={() => edit({ seed: String(randomSeed()) })} disabled={!idle} data-testid="sim-random-seed">
          Random seed
        </button>
        <label className="field">
          Planted bug
          <select name="planted" aria-label="Planted bug" value={form.planted} onChange={(e) => edit({ planted: e.target.value })} disabled={!idle}>
            {planted.map((b) => (
              <option key={b} value={b}>
                {b}
              </option>
            ))}
          </select>
        </label>
        <label className="field">
          Tasks
          <input
            name="tasks"
            aria-label="Tasks"
            inputMode="numeric"
            value={form.tasks}
            onChange={(e) => edit({ tasks: e.target.value })}
            placeholder="the seed's own"
            title={d.limits.tasks_max >= 1 ? `1 to ${d.limits.tasks_max}; empty: the number the seed draws` : "empty: the number the seed draws"}
            style={{ width: 130 }}
            disabled={!idle}
          />
        </label>
        <label className="row" style={{ gap: 6, paddingBottom: 6 }} title="Roll the store back to an earlier snapshot once (the invariants are weakened to match)">
          <input type="checkbox" name="lossy" checked={form.lossy} onChange={(e) => edit({ lossy: e.target.checked })} disabled={!idle} />
          Lossy restart
        </label>
      </div>
      <fieldset className="sim-faults" disabled={!idle}>
        <legend>Faults</legend>
        <label className="row" style={{ gap: 6 }}>
          <input type="radio" name="mix" value="seed" checked={form.mix === "seed"} onChange={() => edit({ mix: "seed" })} data-testid="sim-mix-seed" />
          The seed&apos;s own mix <span className="muted">(swarm testing: each seed switches a random subset of the families on)</span>
        </label>
        {d.families.length > 0 && (
          <div className="row" style={{ gap: 6 }}>
            <label className="row" style={{ gap: 6 }}>
              <input type="radio" name="mix" value="chosen" checked={form.mix === "chosen"} onChange={() => edit({ mix: "chosen" })} data-testid="sim-mix-chosen" />
              Only these families:
            </label>
            {d.families.map((f) => (
              <label key={f} className="row" style={{ gap: 4 }}>
                <input
                  type="checkbox"
                  name="family"
                  value={f}
                  checked={form.mix === "chosen" && form.families.includes(f)}
                  // Ticking a family chooses the families: the seed's own mix no longer applies.
                  onChange={(e) =>
                    edit({
                      mix: "chosen",
                      families: e.target.checked
                        ? [...(form.mix === "chosen" ? form.families : []), f]
                        : form.families.filter((x) => x !== f),
                    })
                  }
                  data-testid={`sim-family-${f}`}
                />
                {f}
              </label>
            ))}
            {form.mix === "chosen" && form.families.length === 0 && <span className="muted">(none ticked: a run without faults)</span>}
          </div>
        )}
      </fieldset>
      <div className="row" style={{ marginTop: 10 }}>
        {/* Two elements (keys), not one that changes type: the run ends in a microtask of the
            Stop click, before the browser acts on the click, and a button that had become
            "submit" by then would start a new run. */}
        {running ? (
          <button
            key="stop"
            type="button"
            className="danger"
            onClick={(e) => {
              e.preventDefault();
              ctrlRef.current?.abort();
            }}
            data-testid="sim-stop"
          >
            Stop
          </button>
        ) : (
          <button key="run" type="submit" className="primary" disabled={!canRun} data-testid="sim-run">
            Run
          </button>
        )}
        {formError !== null && (
          <span className="field-error" role="alert" data-testid="sim-form-error">
            {formError}
          </span>
        )}
        {phase.kind === "running" && <Progress seed={phase.seed} p={progress} info={d} />}
        {idle && !running && (
          <span className="muted">
            At most {Math.round(d.limits.timeout_ms / 1000)} s and {Math.round(d.limits.memory_bytes / 2 ** 20)} MB per run; one run at a time.
          </span>
        )}
      </div>
      {phase.kind === "waiting" && (
        <div className="row muted" role="status" data-testid="sim-waiting" style={{ marginTop: 8 }}>
          <span className="spinner" aria-hidden />
          <span>
            The simulator is not ready: {sentence(phase.message)} Asking again in <Countdown until_ms={phase.until_ms} /> (for up to{" "}
            {RETRY_WAIT_S_MAX / 60} minutes).
          </span>
          <button type="button" className="small" onClick={cancelWait} data-testid="sim-cancel-wait">
            Cancel
          </button>
        </div>
      )}
      {/* Shown while the server says a run is in progress; it asks again every few seconds. */}
      {d.running && !running && (
        <p className="muted" data-testid="sim-busy">
          {busy ?? "A simulation is running on this orq (one at a time): Run is enabled again when it ends."}
        </p>
      )}
      {runError !== null &&
        (needsAdmin(runError) ? (
          <AdminNeeded what="Running a simulation" />
        ) : (
          <div className="state state-error" role="alert" data-testid="sim-error" style={{ marginTop: 8 }}>
            <span>
              <strong>Could not run it:</strong> {errorMessage(runError)}
            </span>
          </div>
        ))}
      {result && !running && <Outcome r={result} />}
    </form>
  );
}
