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
import type { ResponseOf } from "../../clients/typescript/src/index";
import { errorOf } from "./api";

/** The cursor fields of a stream's JSON page (the results stream's page has `next` only). */
type PageCursor = Partial<Pick<ResponseOf<"listEvents">, "head" | "next">>;

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
  /**
   * Start at the newest event instead of replaying the server's log: the cursor is read first
   * from the JSON page (`?limit=1` → `head`). Also where a stream resumes after `410
   * events_expired` (the view's state is then read again by its own reload).
   */
  fromHead?: boolean;
  /** Called on `410 events_expired` (after the view reloads); returns the id to resume after. */
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
  let atHead = opts.fromHead === true && lastId === null;
  while (!opts.signal.aborted) {
    state({ kind: "connecting" });
    let ended = false;
    let expired = false;
    try {
      if (atHead) {
        const head = await headOf(opts);
        if (head === "missing") return state({ kind: "missing" });
        lastId = head;
        atHead = false;
      }
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
        if (res.status === 410) {
          state({ kind: "expired" });
          if (opts.onExpired) lastId = await opts.onExpired();
          else atHead = true;
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
          // The reader fell behind the server's bounded log while streaming.
          if (event.event === "error" && event.data.includes('"events_expired"')) {
            expired = true;
            return;
          }
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
      if (expired) {
        state({ kind: "expired" });
        if (opts.onExpired) lastId = await opts.onExpired();
        else atHead = true;
        continue;
      }
      throw new Error("the stream closed");
    } catch (err) {
      if (opts.signal.aborted) return;
      state({ kind: "retrying", error: (err as Error).message, inMs: delay });
      await sleep(delay, opts.signal);
      delay = Math.min(delay * 2, 10_000);
    }
  }
}

/** The newest event's id from the stream's JSON page (`head`, else `next`), or "missing". */
async function headOf(opts: FollowOptions): Promise<string | "missing"> {
  const sep = opts.path.includes("?") ? "&" : "?";
  const res = await fetch(`${opts.path}${sep}limit=1`, {
    headers: { authorization: `Bearer ${opts.token}`, accept: "application/json" },
    signal: opts.signal,
  });
  const body = (await res.json().catch(() => null)) as PageCursor | null;
  if (!res.ok) {
    const err = errorOf(res.status, "GET", opts.path, body);
    if (err.name === "ApiMissing") return "missing";
    throw err;
  }
  const head = body?.head ?? body?.next;
  if (typeof head !== "number") throw new Error(`${opts.path}: the JSON page has no head or next`);
  return String(head);
}
