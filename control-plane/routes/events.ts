/**
 * `GET /v1/events` (viewer token): the state-event log as a JSON page, or as Server-Sent Events
 * resumable with `Last-Event-ID` (docs/control-plane.md, "State events").
 *
 * @module
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import { EVENTS_NAME } from "../events/events-do";
import {
  EVENT_KINDS,
  type EventFilter,
  type EventKind,
  type EventsRead,
  isEventKind,
  type LoggedEvent,
  MAX_EVENTS_PER_PAGE,
} from "../events/kinds";
import { identifierParam, integerParam } from "./params";

/** Seconds between heartbeat comments of an idle stream (`POLAR_EVENTS_HEARTBEAT_SECONDS`). */
export const HEARTBEAT_SECONDS = 15;

/**
 * The events sub-app (mounted at `/v1/events`).
 *
 * @example
 * ```ts
 * app.route("/v1/events", eventRoutes);
 * ```
 */
export const eventRoutes = new Hono<{ Bindings: Env }>();
eventRoutes.use("*", requireRole("viewer"));

/**
 * The `kinds` filter: comma-separated event kinds, or null (every kind); 400 naming `kinds`.
 *
 * @example
 * ```ts
 * kindsParam("batch,session"); // ["batch", "session"]
 * ```
 */
export function kindsParam(raw: string | undefined): EventKind[] | null {
  if (raw === undefined || raw === "") return null;
  const kinds = raw.split(",").map((k) => k.trim());
  const bad = kinds.filter((k) => !isEventKind(k));
  if (bad.length > 0) {
    const message = `must be a comma-separated list of ${EVENT_KINDS.join(", ")}`;
    throw ApiError.badRequest("validation_failed", `kinds: ${message}, got '${bad.join(",")}'`, [
      { field: "kinds", message },
    ]);
  }
  return [...new Set(kinds)] as EventKind[];
}

function expired(read: Extract<EventsRead, { expired: true }>, after: number): ApiError {
  return new ApiError(
    410,
    "events_expired",
    `events after ${after} are no longer in the log (it keeps the newest ones; the oldest kept follows ${read.oldest}): reload the state and resume at next ${read.head}`,
    { oldest: read.oldest, next: read.head },
  );
}

function heartbeatMs(env: Env): number {
  const value = Number(env.POLAR_EVENTS_HEARTBEAT_SECONDS ?? HEARTBEAT_SECONDS);
  return (Number.isFinite(value) && value > 0 ? value : HEARTBEAT_SECONDS) * 1000;
}

/** One logged event as the JSON page lists it (`data` spliced in unparsed). */
function eventJson(e: LoggedEvent): string {
  return `{"seq":${e.seq},"kind":${JSON.stringify(e.kind)},"at":${e.at},"data":${e.data}}`;
}

eventRoutes.get("/", async (c) => {
  const lastEventId = c.req.header("Last-Event-ID");
  const rawAfter = lastEventId ?? c.req.query("after");
  const after =
    rawAfter === undefined
      ? null
      : integerParam(
          lastEventId === undefined ? "after" : "Last-Event-ID",
          rawAfter,
          0,
          0,
          Number.MAX_SAFE_INTEGER,
        );
  const limit = integerParam("limit", c.req.query("limit"), 100, 1, MAX_EVENTS_PER_PAGE);
  const batchId = c.req.query("batch_id");
  const filter: EventFilter = {
    batch_id: batchId === undefined ? null : identifierParam("batch_id", batchId),
    kinds: kindsParam(c.req.query("kinds")),
  };
  const sse =
    (c.req.header("Accept") ?? "").includes("text/event-stream") ||
    ["1", "true"].includes(c.req.query("stream") ?? "");
  const log = () => c.env.EVENTS.getByName(EVENTS_NAME);
  // Answer 410 (or a bad parameter) before a stream starts.
  const first = await log().read(after, limit, filter, 0);
  if (first.expired) throw expired(first, after ?? 0);
  if (!sse) {
    const body = `{"events":[${first.events.map(eventJson).join(",")}],"next":${first.next},"head":${first.head}}`;
    return c.body(body, 200, { "Content-Type": "application/json; charset=UTF-8" });
  }
  const beat = heartbeatMs(c.env);
  return streamSSE(c, async (stream) => {
    let aborted = false;
    stream.onAbort(() => {
      aborted = true;
    });
    let page: EventsRead = first;
    for (;;) {
      if (page.expired) {
        // The reader fell behind the bound while streaming: say so, and end; it resumes after a reload.
        await stream.writeSSE({
          event: "error",
          data: JSON.stringify({ code: "events_expired", oldest: page.oldest, next: page.head }),
        });
        return;
      }
      for (const e of page.events) await stream.writeSSE({ id: String(e.seq), event: e.kind, data: e.data });
      if (aborted) return;
      if (page.events.length === 0) await stream.write(": heartbeat\n\n");
      // A fresh stub per read: a stub that has thrown may be broken.
      page = await log().read(page.next, limit, filter, beat);
    }
  });
});
