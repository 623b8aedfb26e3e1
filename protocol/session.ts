/**
 * Session states and the result a gateway reports for one session.
 *
 * @module
 */
import { z } from "zod";
import { Identifier, JsonObject } from "./task";
import { Trajectory } from "./trajectory";

/**
 * Session lifecycle: `QUEUED → ASSIGNED → INITIALIZING → READY → RUNNING → POST_RUN →
 * COMPLETED | ERROR | TIMEOUT | CANCELLED`.
 */
export const SessionStatus = z.enum([
  "QUEUED",
  "ASSIGNED",
  "INITIALIZING",
  "READY",
  "RUNNING",
  "POST_RUN",
  "COMPLETED",
  "ERROR",
  "TIMEOUT",
  "CANCELLED",
]);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** States that end a session. */
export const TerminalStatus = z.enum(["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"]);
export type TerminalStatus = z.infer<typeof TerminalStatus>;

/** True when `status` ends a session. */
export function isTerminal(status: SessionStatus): status is TerminalStatus {
  return TerminalStatus.safeParse(status).success;
}

/**
 * Why a session failed. `infra` (the host or the fleet failed) is retried on another attempt, up
 * to `max_attempts`; the others are results, never retried. `configuration` is a problem in the
 * task that only a gateway can detect (a custom module path that does not load, a harness the
 * host cannot run, a runtime setting the backend cannot enforce): it fails at once, before the
 * harness runs, and is never scored (reward null).
 */
export const ErrorKind = z.enum(["infra", "agent", "configuration", "timeout", "cancelled"]);
export type ErrorKind = z.infer<typeof ErrorKind>;

export const SessionError = z.strictObject({
  kind: ErrorKind,
  message: z.string(),
});
export type SessionError = z.infer<typeof SessionError>;

/** Milliseconds spent in each stage on the gateway. */
export const SessionTiming = z.strictObject({
  queued_ms: z.number().min(0).default(0),
  init_ms: z.number().min(0).default(0),
  ready_ms: z.number().min(0).default(0),
  run_ms: z.number().min(0).default(0),
  postrun_ms: z.number().min(0).default(0),
  total_ms: z.number().min(0).default(0),
});
export type SessionTiming = z.infer<typeof SessionTiming>;

/**
 * The terminal outcome of one session, as reported by a gateway and returned to the trainer.
 * `reward` is the outcome reward (null when no evaluator ran).
 */
export const SessionResult = z.strictObject({
  session_id: Identifier,
  task_id: Identifier,
  batch_id: Identifier,
  status: TerminalStatus,
  reward: z.number().nullable(),
  trajectory: Trajectory,
  timing: SessionTiming,
  node_id: Identifier.nullable(),
  attempt: z.number().int().min(1),
  error: SessionError.nullable(),
  metadata: JsonObject,
});
export type SessionResult = z.infer<typeof SessionResult>;
export type SessionResultInput = z.input<typeof SessionResult>;
