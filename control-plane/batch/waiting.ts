/**
 * Waiting for a gateway, as the ledger sees it: the timer of a waiting session and the measure of
 * its wait. A session's run budget (`timeout_seconds`) starts only at INITIALIZING, so a batch
 * larger than the fleet waits in the queue as long as it takes. Two limits end a wait:
 *
 * - `queue_timeout_seconds` of the task (optional): counted from when the attempt entered QUEUED
 *   until INITIALIZING; then TIMEOUT with `timeout_source: queue` (`lifecycle.expireDeadlines`).
 * - No gateway at all for `POLAR_NO_GATEWAY_SECONDS` on the session's queue (`no-gateway.ts`).
 *
 * Both share the session's one timer column (`deadline_at`), multiplexed with every other timer of
 * the ledger by `nextTimerAt`.
 *
 * @module
 */
import type { TaskSpec } from "../../protocol";
import type * as schema from "./schema";

type SessionRow = typeof schema.sessions.$inferSelect;

/**
 * The timer of a waiting session: the earlier of its queue timeout (if the task sets one) and the
 * next no-gateway check.
 *
 * @example
 * ```ts
 * waitingTimerAt({ queue_timeout_seconds: 60 } as TaskSpec, now, now + 3_600_000); // now + 60 000
 * ```
 */
export function waitingTimerAt(
  spec: Pick<TaskSpec, "queue_timeout_seconds">,
  queuedAt: number,
  nextCheckAt: number,
): number {
  const timeoutAt = queueTimeoutAt(spec, queuedAt);
  return timeoutAt === null ? nextCheckAt : Math.min(nextCheckAt, timeoutAt);
}

/** When a wait that began at `queuedAt` reaches the task's `queue_timeout_seconds`; null without one. */
function queueTimeoutAt(spec: Pick<TaskSpec, "queue_timeout_seconds">, queuedAt: number): number | null {
  const limit = spec.queue_timeout_seconds;
  return limit === undefined ? null : queuedAt + limit * 1000;
}

/** When the session's current attempt entered QUEUED (rows from before the column: creation). */
export function queuedAtOf(session: SessionRow): number {
  return session.queuedAt ?? session.createdAt;
}

/**
 * The session's whole wait for a gateway as of `now`: earlier attempts plus the current one, from
 * QUEUED until INITIALIZING (or until `now` while it still waits). A result arriving without a
 * recorded INITIALIZING (its progress frame lost) falls back to the assignment time plus
 * `gatewayQueuedMs`, the gateway's own figure for its INIT queue.
 *
 * @example
 * ```ts
 * queueWaitMs(session, Date.now()); // e.g. 612 000 for a tail session of a large batch
 * ```
 */
export function queueWaitMs(session: SessionRow, now: number, gatewayQueuedMs?: number): number {
  const queuedAt = queuedAtOf(session);
  let until = session.startedAt ?? now;
  if (
    session.startedAt === null &&
    gatewayQueuedMs !== undefined &&
    session.assignedAt !== null &&
    session.assignedAt >= queuedAt
  ) {
    until = Math.min(now, session.assignedAt + gatewayQueuedMs);
  }
  return session.queueWaitMs + Math.max(0, until - queuedAt);
}

/**
 * True when a session that has not reached INITIALIZING has waited past its task's
 * `queue_timeout_seconds`.
 *
 * @example
 * ```ts
 * if (queueTimeoutPassed(spec, session, Date.now())) endAsQueueTimeout(session);
 * ```
 */
export function queueTimeoutPassed(
  spec: Pick<TaskSpec, "queue_timeout_seconds">,
  session: SessionRow,
  now: number,
): boolean {
  if (session.startedAt !== null) return false;
  const timeoutAt = queueTimeoutAt(spec, queuedAtOf(session));
  return timeoutAt !== null && timeoutAt <= now;
}
