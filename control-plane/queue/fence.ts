/**
 * The dispatcher's side of the inference fence: the durable row (read and changed in SQLite, so
 * it survives hibernation and restarts), and the messages that carry it to a gateway — the v2
 * `admin {action: "fence"}` with the whole state, or, for a gateway that speaks wire v1, the v1
 * actions (`pause`, `resume`, `policy_version`) it understands.
 *
 * @module
 */
import { eq } from "drizzle-orm";
import {
  type AdminMessage,
  type ControlMessage,
  type FenceMode,
  type FenceState,
  WIRE_VERSION,
} from "../../protocol";
import type { QueueDb } from "./db";
import * as schema from "./schema";

/** A change of the fence, as the routes ask for it. */
export type FenceChange =
  | { kind: "pause"; mode: FenceMode }
  | { kind: "resume"; policy_version?: string }
  | { kind: "policy_version"; policy_version: string };

/**
 * Prefix of request ids whose acks nobody waits for (v1 replays and helper messages).
 *
 * @example
 * ```ts
 * if (ack.request_id.startsWith(UNAWAITED_REQUEST_PREFIX)) return; // expected, not late
 * ```
 */
export const UNAWAITED_REQUEST_PREFIX = "aux_";

/**
 * The fence of the queue `queue` as stored here (a queue never fenced is running, version null).
 *
 * @example
 * ```ts
 * readFence(db, "default").paused; // false on a fresh dispatcher
 * ```
 */
export function readFence(db: QueueDb, queue: string): FenceState {
  const row = db.select().from(schema.fence).where(eq(schema.fence.id, 1)).get();
  if (!row)
    return {
      queue,
      paused: false,
      mode: null,
      policy_version: null,
      fence_seq: 0,
      paused_at: null,
      updated_at: 0,
    };
  return {
    queue,
    paused: row.paused,
    mode: row.paused ? ((row.mode as FenceMode | null) ?? "drain") : null,
    policy_version: row.policyVersion,
    fence_seq: row.fenceSeq,
    paused_at: row.pausedAt,
    updated_at: row.updatedAt,
  };
}

/**
 * Applies a change and stores it (one synchronous write: atomic in the Durable Object); returns the
 * new state. Every change bumps `fence_seq`, a repeated pause too (it re-fences every gateway).
 *
 * @example
 * ```ts
 * changeFence(db, "default", { kind: "pause", mode: "drain" }, Date.now()).paused; // true
 * ```
 */
export function changeFence(db: QueueDb, queue: string, change: FenceChange, now: number): FenceState {
  const cur = readFence(db, queue);
  const next: FenceState = { ...cur, fence_seq: cur.fence_seq + 1, updated_at: now };
  if (change.kind === "pause") {
    next.paused = true;
    next.mode = change.mode;
    next.paused_at = cur.paused ? cur.paused_at : now;
  } else if (change.kind === "resume") {
    next.paused = false;
    next.mode = null;
    next.paused_at = null;
    if (change.policy_version !== undefined) next.policy_version = change.policy_version;
  } else next.policy_version = change.policy_version;
  const row = {
    paused: next.paused,
    mode: next.mode,
    policyVersion: next.policy_version,
    fenceSeq: next.fence_seq,
    pausedAt: next.paused_at,
    updatedAt: next.updated_at,
  };
  db.insert(schema.fence)
    .values({ id: 1, ...row })
    .onConflictDoUpdate({ target: schema.fence.id, set: row })
    .run();
  return next;
}

/**
 * Whether `fence` already is what `change` would make it (a pause in the same mode, a resume to
 * the same version or none asked, the same version).
 *
 * @example
 * ```ts
 * fenceReaches({ ...fence, paused: true, mode: "drain" }, { kind: "pause", mode: "drain" }); // true
 * fenceReaches({ ...fence, paused: true, mode: "drain" }, { kind: "resume" }); // false
 * ```
 */
export function fenceReaches(fence: FenceState, change: FenceChange): boolean {
  switch (change.kind) {
    case "pause":
      return fence.paused && fence.mode === change.mode;
    case "resume":
      return (
        !fence.paused &&
        (change.policy_version === undefined || fence.policy_version === change.policy_version)
      );
    case "policy_version":
      return fence.policy_version === change.policy_version;
  }
}

/** Messages for one gateway, and the request id whose ack counts (null: none expected). */
export interface FenceDelivery {
  messages: AdminMessage[];
  awaited: string | null;
}

/**
 * What tells a gateway of wire version `peer` about `fence`. `kind` is the change that caused it,
 * or `replay` right after `welcome` (a v2 gateway has the fence in the welcome already; a v1 one
 * gets its version and, when paused, a v1 `pause`).
 *
 * @example
 * ```ts
 * fenceDelivery(fence, "pause", "adm_1", 300, 2).messages[0]?.action; // "fence"
 * fenceDelivery(fence, "pause", "adm_1", 300, 1).messages.at(-1)?.action; // "pause"
 * ```
 */
export function fenceDelivery(
  fence: FenceState,
  kind: FenceChange["kind"] | "replay",
  requestId: string,
  timeoutSeconds: number,
  peer: number,
): FenceDelivery {
  if (peer >= 2) {
    if (kind === "replay") return { messages: [], awaited: null };
    return {
      messages: [
        {
          v: WIRE_VERSION,
          type: "admin",
          request_id: requestId,
          action: "fence",
          fence,
          timeout_seconds: timeoutSeconds,
        },
      ],
      awaited: requestId,
    };
  }
  const v1 = (
    id: string,
    action: AdminMessage["action"],
    extra: Partial<AdminMessage> = {},
  ): AdminMessage => ({
    v: 1,
    type: "admin",
    request_id: id,
    action,
    ...extra,
  });
  const version = (id: string) =>
    fence.policy_version === null ? [] : [v1(id, "policy_version", { policy_version: fence.policy_version })];
  // v1 gateways refuse a timeout of 0; they cannot abort either (they drain).
  const pause = (id: string) => v1(id, "pause", { timeout_seconds: Math.max(timeoutSeconds, 0.001) });
  const aux = `${UNAWAITED_REQUEST_PREFIX}${requestId}`;
  switch (kind) {
    case "replay":
      return { messages: [...version(aux), ...(fence.paused ? [pause(`${aux}.p`)] : [])], awaited: null };
    case "pause":
      return { messages: [pause(requestId)], awaited: requestId };
    case "resume":
      return { messages: [...version(aux), v1(requestId, "resume")], awaited: requestId };
    case "policy_version":
      return { messages: version(requestId), awaited: fence.policy_version === null ? null : requestId };
  }
}

/**
 * A control message as a gateway of wire version `peer` can read it, stamped with that version: v2
 * gateways get no v3 field (`assign.session.engine_priority`), v1 gateways none of v2's either
 * (`welcome.fence`, `assign.session.min_policy_version`). Every message to a gateway passes here
 * (`sockets.ts` `send`), so a field a peer's strict schema does not know never reaches it.
 *
 * @example
 * ```ts
 * forPeer({ v: 3, type: "welcome", queue: "q", node_id: "n", kept_leases: [], ping_interval_seconds: 15, fence }, 1);
 * // { v: 1, type: "welcome", queue: "q", node_id: "n", kept_leases: [], ping_interval_seconds: 15 }
 * ```
 */
export function forPeer(message: ControlMessage, peer: number): ControlMessage {
  if (peer >= WIRE_VERSION) return { ...message, v: WIRE_VERSION };
  if (peer === 2) {
    if (message.type !== "assign") return { ...message, v: 2 };
    const { engine_priority: _priority, ...session } = message.session;
    return { ...message, v: 2, session };
  }
  if (message.type === "welcome") {
    const { fence: _fence, ...rest } = message;
    return { ...rest, v: 1 };
  }
  if (message.type === "assign") {
    const { min_policy_version: _min, engine_priority: _priority, ...session } = message.session;
    return { ...message, v: 1, session };
  }
  return { ...message, v: 1 };
}
