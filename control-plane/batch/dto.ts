/**
 * Types crossing the BatchDO's RPC boundary. They are explicit (no `unknown`), because an
 * `unknown` anywhere in a return type turns into `never` on the caller's stub.
 *
 * @module
 */
import type { BatchCreated, BatchStatusBody, SessionAssignment } from "../../protocol";

/** Outcome of `BatchDO.create`: created, replayed with the same body, or a different body. */
export type CreateOutcome =
  | { kind: "created" | "exists"; body: BatchCreated }
  | { kind: "conflict"; message: string };

/** Outcome of `BatchDO.status`: the body, or null when no batch is stored under this id. */
export type StatusOutcome = BatchStatusBody | null;

/** One accepted result as raw JSON text (the Worker splices it into the response unparsed). */
export interface RawResult {
  seq: number;
  json: string;
}

/** Outcome of `BatchDO.results`: null when no batch is stored under this id. */
export type RawResultsPage = { results: RawResult[]; next: number; done: boolean } | null;

/** Outcome of `BatchDO.markAssigned`. `finished`/`unknown` sessions must not be dispatched. */
export type AssignOutcome = "assigned" | "finished" | "unknown";

/** Outcome of `BatchDO.markProgress`. */
export type ProgressOutcome = "ok" | "stale";

/** Outcome of `BatchDO.submitResult` (same values as the wire `ack` status). */
export type SubmitOutcome = "accepted" | "duplicate" | "stale";

/** Counters kept by the ledger. */
export interface BatchCounters {
  stale_results: number;
  duplicate_results: number;
  stale_progress: number;
}

/** What the outbox hands to `QueueDO.enqueue`. */
export type EnqueueItem = SessionAssignment;
