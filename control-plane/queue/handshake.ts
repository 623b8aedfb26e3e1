/**
 * The hello handshake of one shard: a gateway names its node, credit, capacity and the leases it
 * still holds; the shard checks the node against the socket's binding, replaces an older socket
 * of the same node, keeps the leases both sides agree on (the rest are lost or cancelled), and
 * answers `welcome` with the fence, before any assignment.
 *
 * @module
 */
import {
  CLOSE_NODE_MISMATCH,
  CLOSE_REPLACED,
  type ControlMessage,
  type HelloMessage,
  WIRE_VERSION,
} from "../../protocol";
import { REGISTRY_NAME } from "../registry/registry-do";
import type { Dispatcher } from "./dispatch";
import { fenceDelivery, readFence } from "./fence";
import { armAlarm } from "./liveness";
import { processLostLeases } from "./lost-leases";
import { errorFrame } from "./messages";
import { pingIntervalSeconds } from "./settings";
import type { Shard } from "./shard";
import { attachmentOf, closeQuietly, type SocketAttachment, send } from "./sockets";
import * as store from "./store";

/** Why a hello is refused: the error frame to send and, when the socket must go, its close code. */
interface Refusal {
  frame: ControlMessage;
  close?: number;
}

/**
 * Whether this socket may speak for `hello.node_id`: not after another node's hello, not for a
 * node other than the one its token or its connect URL named.
 *
 * @example
 * ```ts
 * refuseHello({ connId: "c", nodeId: null, boundNode: "gpu-a" }, hello); // refusal unless gpu-a
 * ```
 */
export function refuseHello(attachment: SocketAttachment, hello: HelloMessage): Refusal | null {
  if (attachment.nodeId && attachment.nodeId !== hello.node_id) {
    return { frame: errorFrame("node_id_changed", `this connection is node '${attachment.nodeId}'`) };
  }
  if (attachment.boundNode && attachment.boundNode !== hello.node_id) {
    // A per-gateway token names its node: it cannot speak for another one.
    const message = `this token belongs to node '${attachment.boundNode}', not '${hello.node_id}'`;
    return { frame: errorFrame("node_id_mismatch", message), close: CLOSE_NODE_MISMATCH };
  }
  if (attachment.hintNode && attachment.hintNode !== hello.node_id) {
    // The Worker chose this shard by the node id in the connect URL; another node belongs elsewhere.
    const message = `this connection was opened with node_id '${attachment.hintNode}', but the hello names '${hello.node_id}'`;
    return { frame: errorFrame("node_id_mismatch", message), close: CLOSE_NODE_MISMATCH };
  }
  return null;
}

/**
 * Registers the gateway and reconciles its leases with the ones it says it holds, in one
 * transaction. Returns the lease ids it keeps; a lease it no longer has is lost at once.
 */
function reconcile(shard: Shard, connId: string, hello: HelloMessage, now: number): string[] {
  const { db, ctx } = shard;
  const held = new Map(hello.leases.map((lease) => [lease.lease_id, lease.session_id]));
  const kept: string[] = [];
  ctx.storage.transactionSync(() => {
    store.upsertGateway(db, hello.node_id, connId, hello.credit, hello.capacity, now);
    const leases = store.leasesOfNode(db, hello.node_id);
    for (const lease of leases) {
      if (held.get(lease.leaseId) === lease.sessionId) {
        kept.push(lease.leaseId);
        store.setLeaseLostAt(db, lease.leaseId, null);
      }
      // The gateway no longer has this session (it restarted): lost now, no grace.
      else store.setLeaseLostAt(db, lease.leaseId, now);
    }
    // A drained node that comes back holding nothing is a fresh node.
    if (leases.length === 0 && hello.leases.length === 0) store.setDraining(db, hello.node_id, false);
  });
  return kept;
}

/** Cancels the leases the gateway holds that are not current, then sends welcome and the fence. */
function greet(shard: Shard, ws: WebSocket, hello: HelloMessage, kept: string[]): void {
  for (const lease of hello.leases) {
    if (!kept.includes(lease.lease_id)) {
      send(ws, {
        v: WIRE_VERSION,
        type: "cancel",
        lease_id: lease.lease_id,
        session_id: lease.session_id,
        reason: "lease is not current",
      });
    }
  }
  // The fence first, before any assignment: the gateway comes up paused when the queue is.
  const fence = readFence(shard.db, shard.queue);
  send(ws, {
    v: WIRE_VERSION,
    type: "welcome",
    queue: shard.shardName,
    node_id: hello.node_id,
    kept_leases: kept,
    ping_interval_seconds: pingIntervalSeconds(shard.env),
    fence,
  });
  const replay = fenceDelivery(fence, "replay", `adm_${crypto.randomUUID()}`, 0, hello.v);
  for (const message of replay.messages) send(ws, message);
}

/**
 * Handles a `hello`: refuses it, or makes this socket the node's one connection, reconciles its
 * leases, welcomes it, and dispatches to it.
 *
 * @example
 * ```ts
 * if (message.type === "hello") await onHello(shard, dispatcher, ws, message);
 * ```
 */
export async function onHello(shard: Shard, dispatcher: Dispatcher, ws: WebSocket, hello: HelloMessage) {
  const attachment = attachmentOf(ws);
  if (!attachment) return;
  const refusal = refuseHello(attachment, hello);
  if (refusal) {
    send(ws, refusal.frame);
    if (refusal.close !== undefined) closeQuietly(ws, refusal.close, "node_id_mismatch");
    return;
  }
  // A node has one live connection: a reconnect replaces the old socket.
  for (const other of shard.ctx.getWebSockets()) {
    if (other !== ws && attachmentOf(other)?.nodeId === hello.node_id) {
      closeQuietly(other, CLOSE_REPLACED, "replaced by a newer connection");
    }
  }
  const kept = reconcile(shard, attachment.connId, hello, Date.now());
  ws.serializeAttachment({ ...attachment, nodeId: hello.node_id, wire: hello.v } satisfies SocketAttachment);
  greet(shard, ws, hello, kept);
  await processLostLeases(shard);
  await dispatcher.run();
  await armAlarm(shard);
  try {
    await shard.env.REGISTRY.getByName(REGISTRY_NAME).recordNode(shard.shardName, hello.node_id);
  } catch (error) {
    // Only listings and drain-by-node use it; dispatch does not depend on it.
    console.warn(`QueueDO ${shard.shardName}: registry did not record ${hello.node_id}:`, error);
  }
}
