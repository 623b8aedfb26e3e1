/**
 * Identifiers minted by the control plane. Session ids are deterministic so re-creating a batch
 * (idempotent replay, outbox redelivery) names the same sessions, and so a session id can be
 * routed to its BatchDO by splitting from the right (`protocol/session-id.ts`).
 *
 * @module
 */

// Session ids (`batch.task.sample`) are defined once, in the protocol; re-exported here beside
// the other ids the control plane mints.
export { parseSessionId, type SessionIdParts, sessionIdOf } from "../protocol";

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
