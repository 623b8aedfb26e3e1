/**
 * Liveness of one dispatcher shard's gateways and the alarm that enforces it: the newest frame of
 * each socket, closing silent ones, starting the lease grace of a gateway that left, and arming
 * the alarm for the next thing due (a lost lease, a socket reaching the liveness limit, a steal
 * nudge).
 *
 * @module
 */
import { CLOSE_SILENT } from "../../protocol";
import { leaseGraceMs, livenessMs, RESTART_LEASE_GRACE_MS } from "./settings";
import type { Shard } from "./shard";
import { attachmentOf, closeQuietly } from "./sockets";
import { STEAL_NUDGE_MS } from "./stealing";
import * as store from "./store";

/** How soon a liveness check that was due while the object was behind runs again (ms). */
export const LIVENESS_RECHECK_MS = 1_000;

/**
 * A connected gateway's socket and when its newest frame arrived.
 *
 * @example
 * ```ts
 * const silentFor = Date.now() - frame.last;
 * ```
 */
export interface LastFrame {
  ws: WebSocket;
  nodeId: string;
  connId: string;
  last: number;
}

/**
 * The newest frame of each connected gateway's socket: its last ping (answered by the platform's
 * auto-response without waking the object; `getWebSocketAutoResponseTimestamp` tells when), its
 * last message, or its hello.
 *
 * @example
 * ```ts
 * lastFrames(shard).map((f) => f.nodeId);
 * ```
 */
export function lastFrames(shard: Shard): LastFrame[] {
  const out: LastFrame[] = [];
  for (const ws of shard.ctx.getWebSockets()) {
    const att = attachmentOf(ws);
    if (!att?.nodeId) continue;
    const gw = store.getGateway(shard.db, att.nodeId);
    if (!gw?.connected || gw.connId !== att.connId) continue;
    const pinged = shard.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
    out.push({
      ws,
      nodeId: att.nodeId,
      connId: att.connId,
      last: Math.max(pinged, gw.lastSeenAt ?? 0, gw.connectedAt),
    });
  }
  return out;
}

/**
 * Closes sockets silent (no ping, no message) for the liveness limit or longer.
 *
 * @example
 * ```ts
 * checkLiveness(shard, Date.now());
 * ```
 */
export function checkLiveness(shard: Shard, now: number): void {
  const limit = livenessMs(shard.env);
  // Silence counts up to the last moment this object had every frame in hand: a ping still waiting
  // behind other gateways' frames is not the gateway's silence (backlog.ts).
  const asOf = shard.backlog.asOf(now);
  for (const { ws, nodeId, connId, last } of lastFrames(shard)) {
    if (asOf - last < limit) continue;
    console.warn(`QueueDO ${shard.shardName}: gateway ${nodeId} silent for ${now - last} ms; closing`);
    // last_seen_at then says when the last frame came: disconnected_at minus it is the detection time.
    store.touchGateway(shard.db, nodeId, last);
    closeQuietly(ws, CLOSE_SILENT, "no ping");
    disconnect(shard, nodeId, connId);
  }
}

/**
 * Marks the node disconnected (if `connId` is still its connection) and starts the grace period
 * of its leases: a reconnect within it reclaims them, after it they go back to the ledger. The
 * grace is the configured one, or `minGraceMs` where that is longer (after a restart).
 *
 * @example
 * ```ts
 * disconnect(shard, "node-a", attachment.connId);
 * ```
 */
export function disconnect(shard: Shard, nodeId: string, connId: string, minGraceMs = 0): void {
  const now = Date.now();
  if (!store.disconnectGateway(shard.db, nodeId, connId, now)) return;
  store.startLeaseGrace(shard.db, nodeId, now + Math.max(leaseGraceMs(shard.env), minGraceMs));
  shard.admins.failNode(nodeId, "gateway disconnected");
  shard.ctx.waitUntil(armAlarm(shard));
}

/**
 * Disconnects the node a closing socket spoke for (nothing before its hello).
 *
 * @example
 * ```ts
 * markDisconnected(shard, ws); // in webSocketClose
 * ```
 */
export function markDisconnected(shard: Shard, ws: WebSocket): void {
  const attachment = attachmentOf(ws);
  if (attachment?.nodeId) disconnect(shard, attachment.nodeId, attachment.connId);
}

/**
 * A fresh instance has no dispatch in flight: reservations are void, and gateways whose socket
 * did not survive (deploy, restart) are disconnected, their leases given a grace of at least
 * {@link RESTART_LEASE_GRACE_MS} from now: the gateways lost the plane, not the other way round,
 * and need one reconnect backoff to notice it is back.
 *
 * @example
 * ```ts
 * ctx.blockConcurrencyWhile(async () => { await migrate(db, migrations); reconcileAfterRestart(shard); });
 * ```
 */
export function reconcileAfterRestart(shard: Shard): void {
  store.releaseAllReservations(shard.db);
  const live = new Set(shard.ctx.getWebSockets().map((ws) => attachmentOf(ws)?.connId));
  for (const gw of store.listGateways(shard.db)) {
    if (gw.connected && !live.has(gw.connId)) disconnect(shard, gw.nodeId, gw.connId, RESTART_LEASE_GRACE_MS);
  }
}

/**
 * Arms the alarm at the earliest of: the next lost lease, the moment a connected gateway's socket
 * reaches the liveness limit if nothing arrives before (the alarm then re-arms from the newer
 * frame), a steal nudge. An alarm set earlier stays.
 *
 * @example
 * ```ts
 * await armAlarm(shard);
 * ```
 */
export async function armAlarm(shard: Shard): Promise<void> {
  const times: number[] = [];
  const lost = store.nextLostAt(shard.db);
  if (lost !== null) times.push(lost);
  const frames = lastFrames(shard);
  if (frames.length > 0) {
    const due = Math.min(...frames.map((f) => f.last)) + livenessMs(shard.env);
    // Due but not judged (the object was behind): look again shortly, not in a loop.
    times.push(
      due <= Date.now() && shard.backlog.behindSince(due, Date.now())
        ? Date.now() + LIVENESS_RECHECK_MS
        : due,
    );
  }
  // Sessions waiting here while siblings may have idle gateways: remind them now and then,
  // in case a poke was lost (and release loans a failed thief never settled).
  if (store.sizes(shard.db).pending > 0 && shard.siblings.length > 0) times.push(Date.now() + STEAL_NUDGE_MS);
  if (times.length === 0) return;
  const next = Math.max(Math.min(...times), Date.now());
  const current = await shard.ctx.storage.getAlarm();
  if (current === null || current > next) await shard.ctx.storage.setAlarm(next);
}
