/**
 * The control plane's two SSE streams the dashboard follows (with {@link follow} in `live.ts`), and
 * their events' data, typed from the generated client's types: `GET /v1/events` (state events)
 * and `GET /v1/batches/:id/results` (a batch's results, each a `{seq, result}` of its JSON page).
 *
 * @module
 */
import type { EventSourceMessage } from "eventsource-parser";
import type { BatchEventData, EventsQuery, ResultEntry, SessionEventData, SessionResult } from "./api-types";

/**
 * The path of the state-event stream with its filters.
 *
 * @example
 * ```ts
 * eventsPath({ kinds: "gateway,fence" }); // "/v1/events?kinds=gateway%2Cfence"
 * ```
 */
export function eventsPath(query: EventsQuery): string {
  return `/v1/events?${new URLSearchParams(query)}`;
}

/**
 * The path of a batch's results stream.
 *
 * @example
 * ```ts
 * resultsPath("b/1"); // "/v1/batches/b%2F1/results"
 * ```
 */
export function resultsPath(batchId: string): string {
  return `/v1/batches/${encodeURIComponent(batchId)}/results`;
}

/** The result a `result` event of the results stream carries. */
export function resultOf(event: EventSourceMessage): SessionResult {
  return (JSON.parse(event.data) as ResultEntry).result;
}

/** The data of a `batch` state event. */
export function batchEventOf(event: EventSourceMessage): BatchEventData {
  return JSON.parse(event.data) as BatchEventData;
}

/** The data of a `session` state event. */
export function sessionEventOf(event: EventSourceMessage): SessionEventData {
  return JSON.parse(event.data) as SessionEventData;
}
