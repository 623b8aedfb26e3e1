/**
 * Session ids: `${batch_id}.${task_index}.${sample_index}`. The control plane mints them
 * deterministically (re-creating a batch names the same sessions) and routes a session id to its
 * batch by splitting from the right, since a client-chosen batch id may contain dots.
 *
 * @module
 */

/**
 * Session id of sample `sampleIndex` of task `taskIndex` in batch `batchId`.
 *
 * @example
 * ```ts
 * sessionIdOf("b_1", 0, 3); // "b_1.0.3"
 * ```
 */
export function sessionIdOf(batchId: string, taskIndex: number, sampleIndex: number): string {
  return `${batchId}.${taskIndex}.${sampleIndex}`;
}

/** The parts of a session id. */
export interface SessionIdParts {
  batchId: string;
  taskIndex: number;
  sampleIndex: number;
}

/** `batch.task.sample`, split from the right. */
const SESSION_ID = /^(.+)\.(\d+)\.(\d+)$/;

/**
 * Splits a session id from the right (batch ids may contain dots); null when it is not one of ours.
 *
 * @example
 * ```ts
 * parseSessionId("my.batch.2.0"); // { batchId: "my.batch", taskIndex: 2, sampleIndex: 0 }
 * parseSessionId("nodots");       // null
 * ```
 */
export function parseSessionId(sessionId: string): SessionIdParts | null {
  const match = SESSION_ID.exec(sessionId);
  if (!match) return null;
  return { batchId: match[1]!, taskIndex: Number(match[2]), sampleIndex: Number(match[3]) };
}
