/**
 * Identifiers minted by the control plane. Session ids are deterministic so re-creating a batch
 * (idempotent replay, outbox redelivery) names the same sessions, and so a session id can be
 * routed to its BatchDO by splitting from the right.
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

/** The parts of a session id, or null when it is not one of ours. */
export interface SessionIdParts {
  batchId: string;
  taskIndex: number;
  sampleIndex: number;
}

/**
 * Splits a session id from the right (batch ids may contain dots).
 *
 * @example
 * ```ts
 * parseSessionId("my.batch.2.0"); // { batchId: "my.batch", taskIndex: 2, sampleIndex: 0 }
 * ```
 */
export function parseSessionId(sessionId: string): SessionIdParts | null {
  const match = /^(.+)\.(\d+)\.(\d+)$/.exec(sessionId);
  if (!match) return null;
  return { batchId: match[1]!, taskIndex: Number(match[2]), sampleIndex: Number(match[3]) };
}

function randomHex(bytes: number): string {
  const buf = crypto.getRandomValues(new Uint8Array(bytes));
  return Array.from(buf, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * A fresh server-side batch id: `b_` + 24 hex digits.
 *
 * @example
 * ```ts
 * newBatchId(); // "b_3f9a0c1e2d4b5a6978877665"
 * ```
 */
export function newBatchId(): string {
  return `b_${randomHex(12)}`;
}

/**
 * A fresh lease id (fencing token): `l_` + a UUID.
 *
 * @example
 * ```ts
 * newLeaseId(); // "l_1b4e28ba-2fa1-11d2-883f-0016d3cca427"
 * ```
 */
export function newLeaseId(): string {
  return `l_${crypto.randomUUID()}`;
}

/**
 * A fresh connection id, stored in a socket's attachment to tell a node's current socket from a
 * replaced one.
 *
 * @example
 * ```ts
 * newConnectionId(); // "c_0f3c…"
 * ```
 */
export function newConnectionId(): string {
  return `c_${randomHex(8)}`;
}
