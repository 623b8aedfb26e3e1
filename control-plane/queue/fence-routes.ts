/**
 * Admin fan-out of one shard: the fence routes (pause, resume, policy version, status) and drain
 * send each connected gateway what its wire version understands and collect the acks.
 *
 * @module
 */
import { type AdminMessage, type FenceNode, type FenceState, WIRE_VERSION } from "../../protocol";
import type { AdminNodeResult } from "./admin-fanout";
import { changeFence, type FenceChange, fenceDelivery, fenceReaches, readFence } from "./fence";
import { ACK_WAIT_MS, fenceAckMarginMs } from "./settings";
import type { Shard } from "./shard";
import { attachmentOf, send, socketOf } from "./sockets";
import * as store from "./store";

/** What a gateway is sent for one admin request, and the request id whose ack is awaited (null: none). */
type Build = (requestId: string, peer: number) => { messages: AdminMessage[]; awaited: string | null };

/**
 * The fence and each connected gateway's answer.
 *
 * @example
 * ```ts
 * const { fence, nodes } = await applyFence(shard, { kind: "resume" }, 0);
 * ```
 */
export interface FenceOutcome {
  fence: FenceState;
  nodes: FenceNode[];
}

/** The answer of a gateway whose wire version has no answer for the request. */
function unanswerable(nodeId: string, peer: number): AdminNodeResult {
  return {
    node_id: nodeId,
    ok: false,
    paused: false,
    inflight: 0,
    policy_version: null,
    error: `this gateway speaks wire protocol v${peer}, which has no answer for this request`,
  };
}

/**
 * Sends each connected gateway (or only `nodeId`) what `build` makes for its wire version and
 * collects the acks of the awaited requests until all answered or `timeoutMs` passed.
 *
 * @example
 * ```ts
 * await collectAcks(shard, (id) => ({ messages: [status(id)], awaited: id }), ACK_WAIT_MS);
 * ```
 */
export async function collectAcks(
  shard: Shard,
  build: Build,
  timeoutMs: number,
  nodeId?: string,
): Promise<AdminNodeResult[]> {
  const requestId = `adm_${crypto.randomUUID()}`;
  const waits: Promise<AdminNodeResult>[] = [];
  for (const gw of store.listGateways(shard.db)) {
    if (!gw.connected || (nodeId !== undefined && gw.nodeId !== nodeId)) continue;
    const socket = socketOf(shard.ctx, gw.connId);
    if (!socket) continue;
    const peer = attachmentOf(socket)?.wire ?? 1;
    const delivery = build(requestId, peer);
    waits.push(
      delivery.awaited !== null
        ? shard.admins.expect(delivery.awaited, gw.nodeId, timeoutMs)
        : Promise.resolve(unanswerable(gw.nodeId, peer)),
    );
    for (const message of delivery.messages) send(socket, message);
  }
  return Promise.all(waits);
}

/** How long the answers to a fence change are waited for: a pause's own timeout plus transit. */
function fenceWaitMs(shard: Shard, change: FenceChange, timeoutSeconds: number): number {
  return change.kind === "pause" ? timeoutSeconds * 1000 + fenceAckMarginMs(shard.env) : ACK_WAIT_MS;
}

/**
 * Changes the queue's fence: stores it first (a gateway that connects from now on gets it in
 * `welcome`), then tells every connected gateway and collects their answers. A pause waits
 * `timeoutSeconds` (the gateways drain, or abort, within the same timeout) plus a transit margin;
 * the other changes are answered at once.
 *
 * @example
 * ```ts
 * await applyFence(shard, { kind: "pause", mode: "drain" }, 30);
 * ```
 */
export async function applyFence(
  shard: Shard,
  change: FenceChange,
  timeoutSeconds: number,
): Promise<FenceOutcome> {
  const fence = changeFence(shard.db, shard.queue, change, Date.now());
  const nodes = await collectAcks(
    shard,
    (requestId, peer) => fenceDelivery(fence, change.kind, requestId, timeoutSeconds, peer),
    fenceWaitMs(shard, change, timeoutSeconds),
  );
  return { fence, nodes };
}

/**
 * Brings the fence where `change` asks without fencing every gateway again when it is there
 * already: then only `nodeId` (when connected here) gets the current fence, and its answer is
 * collected. The check and the store are one synchronous step, so two calls never both store.
 *
 * @example
 * ```ts
 * await ensureFence(shard, { kind: "resume" }, 0, "node-a");
 * ```
 */
export async function ensureFence(
  shard: Shard,
  change: FenceChange,
  timeoutSeconds: number,
  nodeId: string,
): Promise<FenceOutcome> {
  const fence = readFence(shard.db, shard.queue);
  if (!fenceReaches(fence, change)) return applyFence(shard, change, timeoutSeconds);
  const nodes = await collectAcks(
    shard,
    (requestId, peer) => fenceDelivery(fence, change.kind, requestId, timeoutSeconds, peer),
    fenceWaitMs(shard, change, timeoutSeconds),
    nodeId,
  );
  return { fence, nodes };
}

/**
 * The fence and every connected gateway's gate (`admin status`), changing nothing.
 *
 * @example
 * ```ts
 * (await fenceStatus(shard)).nodes.map((n) => n.paused);
 * ```
 */
export async function fenceStatus(shard: Shard): Promise<FenceOutcome> {
  const nodes = await collectAcks(
    shard,
    (requestId, peer) =>
      peer >= 2
        ? {
            messages: [{ v: WIRE_VERSION, type: "admin", request_id: requestId, action: "status" }],
            awaited: requestId,
          }
        : { messages: [], awaited: null },
    ACK_WAIT_MS,
  );
  return { fence: readFence(shard.db, shard.queue), nodes };
}

/**
 * Drains a gateway: it gets no new sessions, and is told (`admin drain`) to finish the ones it
 * holds. Null when the node never connected to this shard.
 *
 * @example
 * ```ts
 * await drainNode(shard, "node-a");
 * ```
 */
export async function drainNode(shard: Shard, nodeId: string): Promise<AdminNodeResult | null> {
  if (!store.setDraining(shard.db, nodeId, true)) return null;
  const [answer] = await collectAcks(
    shard,
    (requestId, peer) => ({
      messages: [{ v: peer >= 2 ? WIRE_VERSION : 1, type: "admin", request_id: requestId, action: "drain" }],
      awaited: requestId,
    }),
    ACK_WAIT_MS,
    nodeId,
  );
  return (
    answer ?? {
      node_id: nodeId,
      ok: false,
      paused: false,
      inflight: 0,
      policy_version: null,
      error: "gateway is not connected; it will receive no new sessions",
    }
  );
}
