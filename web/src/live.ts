/**
 * Live updates: a Server-Sent Events stream read with `fetch` (so the bearer token goes in a
 * header, which `EventSource` cannot send) and parsed by `eventsource-parser`. A dropped
 * connection is resumed with `Last-Event-ID`, so no event is lost or repeated; the stream is
 * never polled.
 *
 * Used for `GET /v1/events` (state events) and `GET /v1/batches/:id/results` (a batch's results).
 *
 * @module
 */
import { createParser, type EventSourceMessage } from "eventsource-parser";
import { errorOf } from "./api";

/** What a stream is doing, for the page's "live" indicator. */
export type LiveState =
  | { kind: "connecting" }
  | { kind: "open" }
  | { kind: "retrying"; error: string; inMs: number }
  /** The control plane has no such route: live updates from it are not available. */
  | { kind: "missing" }
  /** The cursor is older than the server's log: reload state, then follow from the new cursor. */
  | { kind: "expired" }
  | { kind: "ended" }
  | { kind: "failed"; error: string };

/** Options of {@link follow}. */
export interface FollowOptions {
  /** Path and query, e.g. `/v1/events?kinds=batch,session`. */
  path: string;
  token: string;
  /** Resume after this event id (`Last-Event-ID`). */
  after?: string | null;
  onEvent: (event: EventSourceMessage) => void;
  onState?: (state: LiveState) => void;
  /** An event after which the server closes for good (the results stream's `done`). */
  endEvent?: string;
  /** Called on `410 events_expired`; returns the id to resume after (null: the stream's start). */
  onExpired?: () => Promise<string | null>;
  signal: AbortSignal;
  /** First retry delay; doubles up to 10 s. */
  retryMs?: number;
}

const sleep = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener("abort", () => {
      clearTimeout(t);
      resolve();
    });
  });

/**
 * Follows an SSE stream until `signal` aborts, the server sends `endEvent`, or the route is missing.
 *
 * @example
 * ```ts
 * const ctl = new AbortController();
 * void follow({ path: "/v1/events", token, onEvent: (e) => console.log(e.event, e.data), signal: ctl.signal });
 * ```
 */
export async function follow(opts: FollowOptions): Promise<void> {
  let lastId = opts.after ?? null;
  let delay = opts.retryMs ?? 500;
  const state = opts.onState ?? (() => {});
  while (!opts.signal.aborted) {
    state({ kind: "connecting" });
    let ended = false;
    try {
      const res = await fetch(opts.path, {
        headers: {
          authorization: `Bearer ${opts.token}`,
          accept: "text/event-stream",
          ...(lastId === null ? {} : { "last-event-id": lastId }),
        },
        signal: opts.signal,
      });
      if (!res.ok || !res.body) {
        const body = await res.json().catch(() => null);
        const err = errorOf(res.status, "GET", opts.path, body);
        if (err.name === "ApiMissing") return state({ kind: "missing" });
        if (res.status === 410 && opts.onExpired) {
          state({ kind: "expired" });
          lastId = await opts.onExpired();
          continue;
        }
        // Bad token or bad request: retrying cannot help.
        if (res.status === 400 || res.status === 401 || res.status === 403 || res.status === 404)
          return state({ kind: "failed", error: err.message });
        throw err;
      }
      state({ kind: "open" });
      delay = opts.retryMs ?? 500;
      const parser = createParser({
        onEvent: (event) => {
          if (event.id !== undefined) lastId = event.id;
          if (opts.endEvent !== undefined && event.event === opts.endEvent) ended = true;
          opts.onEvent(event);
        },
      });
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parser.feed(value);
      }
      if (ended) return state({ kind: "ended" });
      throw new Error("the stream closed");
    } catch (err) {
      if (opts.signal.aborted) return;
      state({ kind: "retrying", error: (err as Error).message, inMs: delay });
      await sleep(delay, opts.signal);
      delay = Math.min(delay * 2, 10_000);
    }
  }
}
