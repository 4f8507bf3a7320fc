// React hooks shared by the views: load a resource (keeping the last good data while it
// reloads, ignoring replies that arrive after a newer request), and a clock for relative times.

import { useCallback, useEffect, useRef, useState } from "react";

export interface Resource<T> {
  data: T | undefined;
  error: unknown;
  /** True until the first reply (success or error). */
  loading: boolean;
  reload: () => void;
}

/**
 * Run `fetcher` now and whenever a value in `deps` changes (or `reload` is called). Data stays on
 * screen while a reload runs; an error replaces it only when there was none, and a later success
 * clears the error.
 */
export function useResource<T>(
  fetcher: ((signal: AbortSignal) => Promise<T>) | null,
  deps: readonly unknown[],
): Resource<T> {
  const [state, setState] = useState<{ data: T | undefined; error: unknown; loading: boolean }>({
    data: undefined,
    error: null,
    loading: true,
  });
  const [nonce, setNonce] = useState(0);
  const fetcherRef = useRef(fetcher);
  useEffect(() => {
    fetcherRef.current = fetcher;
  });
  useEffect(() => {
    const f = fetcherRef.current;
    if (!f) {
      return;
    }
    const ctrl = new AbortController();
    f(ctrl.signal).then(
      (data) => {
        if (!ctrl.signal.aborted) {
          setState({ data, error: null, loading: false });
        }
      },
      (error: unknown) => {
        if (!ctrl.signal.aborted) {
          setState((s) => ({ data: s.data, error, loading: false }));
        }
      },
    );
    return () => ctrl.abort();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, nonce]);
  const reload = useCallback(() => setNonce((n) => n + 1), []);
  return { ...state, reload };
}

/** The current time in ms, updated every `every_ms` (for "3 s ago" labels). */
export function useNow(every_ms = 1000): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), every_ms);
    return () => clearInterval(t);
  }, [every_ms]);
  return now;
}
