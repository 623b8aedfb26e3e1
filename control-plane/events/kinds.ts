/**
 * The state events of `GET /v1/events`: their kinds, the shape of each kind's `data`, and the
 * bounds of the log. Producers (BatchDO, QueueDO) build these; the EventsDO stores them as JSON
 * text and never looks inside `data`.
 *
 * @module
 */

/** Kinds of state event. */
export const EVENT_KINDS = ["batch", "session", "gateway", "fence"] as const;

/** One kind of state event. */
export type EventKind = (typeof EVENT_KINDS)[number];

/**
 * Events the log keeps: older ones are dropped, and reading after a dropped one answers 410
 * `events_expired`.
 */
export const EVENT_LOG_LIMIT = 20_000;

/** Most events in one JSON page or one read of the stream. */
export const MAX_EVENTS_PER_PAGE = 1_000;

/** `data` of a `batch` event: the batch's counts after the changes it coalesces. */
export interface BatchEventData {
  batch_id: string;
  status: "running" | "completed" | "cancelled";
  counts: Record<string, number>;
  total: number;
  mean_reward: number | null;
  created_at: number;
}

/** `data` of a `session` event: the session after one status or stage change. */
export interface SessionEventData {
  batch_id: string;
  task_id: string;
  session_id: string;
  status: string;
  /** The gateway stage (ASSIGNED … POST_RUNNING) while a gateway holds it, else null. */
  stage: string | null;
  node_id: string | null;
  attempt: number;
  reward: number | null;
  error_kind: string | null;
}

/** `data` of a `gateway` event: one gateway as its dispatcher sees it. */
export interface GatewayEventData {
  queue: string;
  shard: string;
  node_id: string;
  connected: boolean;
  draining: boolean;
  paused: boolean;
  policy_version: string | null;
  credit: number;
  metrics: Record<string, number> | null;
}

/** `data` of a `fence` event: a queue's inference fence after a change. */
export interface FenceEventData {
  queue: string;
  paused: boolean;
  mode: string | null;
  policy_version: string | null;
  fence_seq: number;
}

/** An event waiting in a producer's outbox, numbered by the producer (`id`). */
export interface OutgoingEvent {
  id: number;
  kind: EventKind;
  batch_id: string | null;
  at: number;
  /** JSON of the kind's data. */
  data: string;
}

/** An event in the log. `data` is JSON text. */
export interface LoggedEvent {
  seq: number;
  kind: EventKind;
  at: number;
  data: string;
}

/** Which events a reader wants. */
export interface EventFilter {
  batch_id: string | null;
  /** Null: every kind. */
  kinds: EventKind[] | null;
}

/**
 * A read of the log: the events after the cursor, `next` (the cursor to continue from: it moves
 * past events the filter skipped too) and `head` (the newest seq in the log, 0 when empty); or
 * `expired` when events after the cursor were already dropped (`oldest`: the cursor to resume
 * from after reloading state).
 */
export type EventsRead =
  | { expired: false; events: LoggedEvent[]; next: number; head: number }
  | { expired: true; oldest: number; head: number };

/**
 * True when `kind` names a state event kind.
 *
 * @example
 * ```ts
 * isEventKind("session"); // true
 * ```
 */
export function isEventKind(kind: string): kind is EventKind {
  return (EVENT_KINDS as readonly string[]).includes(kind);
}
