/**
 * Preact hooks shared by the views: a loaded resource, a followed SSE stream, a reload coalesced
 * over a burst of events, a confirmed action with its outcome, and a pick of two to compare.
 *
 * @module
 */
import { useCallback, useEffect, useRef, useState } from "preact/hooks";
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

/**
 * Runs `run` at most once per `ms`, `ms` after the first call of a burst: a stream's burst of
 * events becomes one reload instead of one per event.
 *
 * @example
 * ```ts
 * const refresh = useCoalesced(status.reload, 250);
 * ```
 */
export function useCoalesced(run: () => void, ms: number): () => void {
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  return () => {
    if (pending.current) return;
    pending.current = setTimeout(() => {
      pending.current = null;
      run();
    }, ms);
  };
}

/** What {@link useConfirmedAction} returns. */
export interface ConfirmedAction {
  /** The last action's outcome, for the view's note. */
  note: string | null;
  /**
   * Asks to confirm `what`, runs it, and notes `what: <outcome>` (the text `run` resolves to, or the
   * error's message); then reloads.
   */
  act: (what: string, run: () => Promise<string>) => Promise<void>;
}

/**
 * An action the user confirms first (cancel, fence, drain), its outcome kept as a note, and the
 * view's data reloaded after it, whether it succeeded or not.
 *
 * @example
 * ```ts
 * const { note, act } = useConfirmedAction(fleet.reload);
 * void act("Drain node-0", async () => { await drainGateway(api, "node-0"); return "done"; });
 * ```
 */
export function useConfirmedAction(reload: () => void): ConfirmedAction {
  const [note, setNote] = useState<string | null>(null);
  const act = async (what: string, run: () => Promise<string>) => {
    if (!confirm(`${what}?`)) return;
    try {
      setNote(`${what}: ${await run()}`);
    } catch (e) {
      setNote(`${what}: ${(e as Error).message}`);
    }
    reload();
  };
  return { note, act };
}

/** What {@link usePickTwo} returns. */
export interface PickTwo {
  picked: string[];
  /** Picks or unpicks `id`; a third pick drops the oldest. */
  toggle: (id: string, on: boolean) => void;
}

/**
 * A pick of two ids to compare (batches, or tasks of a batch).
 *
 * @example
 * ```ts
 * const { picked, toggle } = usePickTwo();
 * ```
 */
export function usePickTwo(): PickTwo {
  const [picked, setPicked] = useState<string[]>([]);
  const toggle = (id: string, on: boolean) =>
    setPicked((p) => (on ? [...p, id].slice(-2) : p.filter((x) => x !== id)));
  return { picked, toggle };
}
