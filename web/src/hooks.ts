/**
 * Preact hooks shared by the views: a loaded resource, and a followed SSE stream.
 *
 * @module
 */
import { useCallback, useEffect, useState } from "preact/hooks";
import { type FollowOptions, follow, type LiveState } from "./live";

/** A resource being loaded: its data, or the error that stopped it. */
export interface Resource<T> {
  data: T | undefined;
  error: Error | undefined;
  loading: boolean;
  reload: () => void;
}

/**
 * Loads `load()` now, again when `deps` change, and on `reload()`. A reload keeps the old data on
 * screen until the new arrives.
 *
 * @example
 * ```ts
 * const batches = useResource(() => api.get("/v1/batches"), []);
 * ```
 */
export function useResource<T>(load: () => Promise<T>, deps: unknown[]): Resource<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [error, setError] = useState<Error | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setLoading(true);
    load().then(
      (d) => {
        if (!live) return;
        setData(d);
        setError(undefined);
        setLoading(false);
      },
      (e: Error) => {
        if (!live) return;
        setError(e);
        setLoading(false);
      },
    );
    return () => {
      live = false;
    };
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return { data, error, loading, reload };
}

/**
 * Follows an SSE stream while the component is mounted (and restarts it when `deps` change).
 * Returns the stream's state for the "live" badge.
 *
 * @example
 * ```ts
 * const live = useStream({ path: "/v1/events", token, onEvent }, [token]);
 * ```
 */
export function useStream(
  opts: Omit<FollowOptions, "signal" | "onState"> | null,
  deps: unknown[],
): LiveState {
  const [state, setState] = useState<LiveState>({ kind: "connecting" });
  useEffect(() => {
    if (!opts) return;
    const ctl = new AbortController();
    void follow({ ...opts, signal: ctl.signal, onState: setState });
    return () => ctl.abort();
  }, deps);
  return state;
}
