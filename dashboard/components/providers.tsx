"use client";
// App-wide state: the API key prompt (shown when any call answers 401), the selected queue, the
// live event stream of that queue (SSE, or polling every 2 s when the stream is unavailable), and
// toasts that report the outcome of actions.

import {
  createContext,
  useCallback,
  useContext,
  useEffect,
  useMemo,
  useRef,
  useState,
  type ReactNode,
} from "react";
import { ADMIN_REQUIRED_EVENT, AUTH_REQUIRED_EVENT, api, getApiKey, setApiKey } from "@/lib/api";
import { busyOf, chooseQueue, type Selected } from "@/lib/queues";
import { openEventStream } from "@/lib/sse";
import type { LiveEvent } from "@/lib/types";

// ---------------------------------------------------------------------------------------------
// Toasts

export type ToastKind = "ok" | "error" | "info";
interface Toast {
  id: number;
  kind: ToastKind;
  text: string;
}
const ToastContext = createContext<(kind: ToastKind, text: string) => void>(() => {});

export function useToast() {
  return useContext(ToastContext);
}

/** How long a toast stays (ms). */
const TOAST_MS = 6000;

function ToastProvider({ children }: { children: ReactNode }) {
  const [toasts, setToasts] = useState<Toast[]>([]);
  const next = useRef(1);
  const push = useCallback((kind: ToastKind, text: string) => {
    const id = next.current++;
    setToasts((t) => [...t.slice(-4), { id, kind, text }]);
    setTimeout(() => setToasts((t) => t.filter((x) => x.id !== id)), TOAST_MS);
  }, []);
  return (
    <ToastContext.Provider value={push}>
      {children}
      <div className="toasts" role="status" aria-live="polite">
        {toasts.map((t) => (
          <div key={t.id} className={`toast toast-${t.kind}`} data-testid="toast">
            {t.text}
          </div>
        ))}
      </div>
    </ToastContext.Provider>
  );
}

// ---------------------------------------------------------------------------------------------
// API key

function AuthGate({ children }: { children: ReactNode }) {
  const [asked, setAsked] = useState(false);
  const [key, setKey] = useState("");
  useEffect(() => {
    const ask = () => setAsked(true);
    window.addEventListener(AUTH_REQUIRED_EVENT, ask);
    return () => window.removeEventListener(AUTH_REQUIRED_EVENT, ask);
  }, []);
  return (
    <>
      {children}
      {asked && (
        <div className="modal-backdrop">
          <form
            className="modal"
            role="dialog"
            aria-labelledby="auth-title"
            onSubmit={(e) => {
              e.preventDefault();
              setApiKey(key.trim());
              // Every view reloads its data with the key.
              window.location.reload();
            }}
          >
            <h2 id="auth-title">API key required</h2>
            <p>
              This orq answers 401: enter an API key. It is kept in this tab only (session
              storage) and sent as <code>Authorization: Bearer</code>.
              {getApiKey() ? " The key in use was refused." : ""}
            </p>
            <input
              type="password"
              autoFocus
              aria-label="API key"
              value={key}
              onChange={(e) => setKey(e.target.value)}
              autoComplete="off"
            />
            <div className="modal-actions">
              <button type="button" onClick={() => setAsked(false)}>
                Not now
              </button>
              <button type="submit" className="primary" disabled={key.trim() === ""}>
                Use key
              </button>
            </div>
          </form>
        </div>
      )}
    </>
  );
}

// ---------------------------------------------------------------------------------------------
// Queue selection

interface QueueContextValue {
  queue: string;
  setQueue: (q: string) => void;
  /** Known queue names (from GET /queues), refreshed every QUEUES_REFRESH_MS. */
  queues: string[];
  /** Read the queue names again now (after a submit to a queue that may be new). */
  refreshQueues: () => void;
}
const QueueContext = createContext<QueueContextValue>({
  queue: "default",
  setQueue: () => {},
  queues: [],
  refreshQueues: () => {},
});

export function useQueue() {
  return useContext(QueueContext);
}

/** The last queue chosen (any tab, any visit): a hint, replaced when it is not listed. */
const QUEUE_STORAGE = "orq.queue";
/** The queue the user chose in this tab: kept even when GET /queues does not list it. */
const EXPLICIT_STORAGE = "orq.queue.explicit";
const QUEUES_REFRESH_MS = 10_000;

function initialQueue(): { queue: string; selected: Selected } {
  const none = { queue: "default", selected: "none" as const };
  if (typeof window === "undefined") {
    return none;
  }
  const fromUrl = new URLSearchParams(window.location.search).get("queue");
  if (fromUrl) {
    return { queue: fromUrl, selected: "explicit" };
  }
  try {
    const chosen = window.sessionStorage.getItem(EXPLICIT_STORAGE);
    if (chosen) {
      return { queue: chosen, selected: "explicit" };
    }
    const remembered = window.localStorage.getItem(QUEUE_STORAGE);
    return remembered ? { queue: remembered, selected: "remembered" } : none;
  } catch {
    return none;
  }
}

function QueueProvider({ children }: { children: ReactNode }) {
  // Read after mount (the static HTML was rendered without a window), so the first client render
  // matches the server's and hydration succeeds.
  const [selection, setSelection] = useState<{ queue: string; selected: Selected } | null>(null);
  const [queues, setQueues] = useState<string[]>([]);
  // Unfinished tasks per listed queue, for the first choice (chooseQueue).
  const [busy, setBusy] = useState<Record<string, number>>({});
  // True once GET /queues answered (or failed): the views wait for it, so that they do not
  // first ask for a queue that does not exist or that the key may not use.
  const [listed, setListed] = useState(false);
  useEffect(() => {
    const t = setTimeout(() => setSelection(initialQueue()), 0);
    return () => clearTimeout(t);
  }, []);
  const stopped = useRef(false);
  const load = useCallback(
    () =>
      api.queues().then(
        (qs) => {
          if (!stopped.current) {
            setQueues(qs.map((q) => q.queue).sort());
            setBusy(Object.fromEntries(qs.map((q) => [q.queue, busyOf(q.counts)])));
            setListed(true);
          }
        },
        () => {
          if (!stopped.current) setListed(true);
        },
      ),
    [],
  );
  useEffect(() => {
    stopped.current = false;
    void load();
    const t = setInterval(load, QUEUES_REFRESH_MS);
    return () => {
      stopped.current = true;
      clearInterval(t);
    };
  }, [load]);
  const setQueue = useCallback((q: string) => {
    setSelection({ queue: q, selected: "explicit" });
    try {
      window.sessionStorage.setItem(EXPLICIT_STORAGE, q);
      window.localStorage.setItem(QUEUE_STORAGE, q);
    } catch {
      // Storage refused (private mode): the choice lasts for this page only.
    }
  }, []);
  const refreshQueues = useCallback(() => void load(), [load]);
  const queue = selection === null ? null : chooseQueue(selection.queue, selection.selected, queues, busy);
  // The first choice, once the queues are listed, stays: the busiest queue then, not whichever is
  // busiest at each refresh.
  useEffect(() => {
    if (selection?.selected === "none" && queue !== null && queues.length > 0) {
      const t = setTimeout(() => setSelection({ queue, selected: "remembered" }), 0);
      return () => clearTimeout(t);
    }
  }, [selection, queue, queues]);
  const value = useMemo(
    () => ({ queue: queue ?? "default", setQueue, queues, refreshQueues }),
    [queue, setQueue, queues, refreshQueues],
  );
  return (
    <QueueContext.Provider value={value}>{queue === null || !listed ? null : children}</QueueContext.Provider>
  );
}

// ---------------------------------------------------------------------------------------------
// Admin-only routes

/**
 * True once an admin-only route (pause, resume, tenant limits, workers, metrics, purge,
 * timelines) answered 403 in this page: the key in use is not an admin key, and the views hide or
 * disable their admin-only controls with that explanation.
 */
const AdminDeniedContext = createContext(false);

export function useAdminDenied() {
  return useContext(AdminDeniedContext);
}

function AdminProvider({ children }: { children: ReactNode }) {
  const [denied, setDenied] = useState(false);
  useEffect(() => {
    const deny = () => setDenied(true);
    window.addEventListener(ADMIN_REQUIRED_EVENT, deny);
    return () => window.removeEventListener(ADMIN_REQUIRED_EVENT, deny);
  }, []);
  return <AdminDeniedContext.Provider value={denied}>{children}</AdminDeniedContext.Provider>;
}

// ---------------------------------------------------------------------------------------------
// Live updates

export type LiveMode = "connecting" | "live" | "polling";

interface LiveContextValue {
  mode: LiveMode;
  /** Grows when the data may have changed: views reload when it does. */
  tick: number;
  /** The latest events of the selected queue, newest first (live mode only). */
  events: LiveEvent[];
}
const LiveContext = createContext<LiveContextValue>({ mode: "connecting", tick: 0, events: [] });

export function useLive() {
  return useContext(LiveContext);
}

/** Poll interval when the event stream is unavailable (ms). */
export const POLL_MS = 2000;
/** Retry the event stream this long after it failed (ms). */
const STREAM_RETRY_MS = 30_000;
/** Reload at most this often when events arrive (ms). */
const EVENT_RELOAD_MS = 500;
/** Reload this often even when live, in case an event was missed (ms). */
const LIVE_REFRESH_MS = 10_000;
/** Events kept for the views. */
const EVENTS_KEPT = 200;

function LiveProvider({ children }: { children: ReactNode }) {
  const { queue } = useQueue();
  const [mode, setMode] = useState<LiveMode>("connecting");
  const [tick, setTick] = useState(0);
  const [events, setEvents] = useState<LiveEvent[]>([]);
  useEffect(() => {
    let closed = false;
    let close: (() => void) | null = null;
    let poll: ReturnType<typeof setInterval> | null = null;
    let retry: ReturnType<typeof setTimeout> | null = null;
    let pending: ReturnType<typeof setTimeout> | null = null;
    const bump = () => setTick((t) => t + 1);
    const bumpSoon = () => {
      if (!pending) {
        pending = setTimeout(() => {
          pending = null;
          bump();
        }, EVENT_RELOAD_MS);
      }
    };
    const refresh = setInterval(bump, LIVE_REFRESH_MS);
    const connect = () => {
      retry = null;
      close = openEventStream(queue, {
        onOpen: () => {
          if (closed) return;
          setMode("live");
          if (poll) {
            clearInterval(poll);
            poll = null;
          }
        },
        onEvent: (e) => {
          if (closed) return;
          setEvents((list) => [e, ...list].slice(0, EVENTS_KEPT));
          bumpSoon();
        },
        onLagged: () => {
          if (!closed) bumpSoon();
        },
        onError: () => {
          if (closed) return;
          close?.();
          close = null;
          setMode("polling");
          if (!poll) {
            poll = setInterval(bump, POLL_MS);
          }
          retry = setTimeout(connect, STREAM_RETRY_MS);
        },
      });
    };
    const start = setTimeout(() => {
      setEvents([]);
      setMode("connecting");
      connect();
    }, 0);
    return () => {
      closed = true;
      clearTimeout(start);
      close?.();
      for (const t of [poll, refresh]) if (t) clearInterval(t);
      for (const t of [retry, pending]) if (t) clearTimeout(t);
    };
  }, [queue]);
  const value = useMemo(() => ({ mode, tick, events }), [mode, tick, events]);
  return <LiveContext.Provider value={value}>{children}</LiveContext.Provider>;
}

export function Providers({ children }: { children: ReactNode }) {
  return (
    <ToastProvider>
      <AuthGate>
        <AdminProvider>
          <QueueProvider>
            <LiveProvider>{children}</LiveProvider>
          </QueueProvider>
        </AdminProvider>
      </AuthGate>
    </ToastProvider>
  );
}
