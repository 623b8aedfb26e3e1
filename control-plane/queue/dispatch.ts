/**
 * Dispatch of one shard: hands pending sessions to gateways while both exist, each assignment
 * recorded by the session's BatchDO (the ledger) before the gateway is sent it; and withdrawal,
 * its reverse, for sessions that ended on the ledger.
 *
 * @module
 */
import { type SessionAssignment, WIRE_VERSION } from "../../protocol";
import { newLeaseId } from "../ids";
import type { AssignOutcome } from "../shared/ledger-rpc";
import type { GatewayRow, PendingRow } from "./db";
import { disconnect } from "./liveness";
import { DISPATCH_RETRY_MS } from "./settings";
import type { Shard } from "./shard";
import { send, socketOf } from "./sockets";
import type { Stealing } from "./stealing";
import * as store from "./store";

/** What one assignment attempt came to: go on with the next session, or stop this pass. */
type Step = "next" | "stop";

/**
 * Runs dispatch passes one at a time: ledger RPCs open the input gate, so a pass asked for while
 * one runs is folded into it (the running pass loops once more).
 *
 * @example
 * ```ts
 * const dispatcher = new Dispatcher(shard, stealing);
 * await dispatcher.run(); // never throws
 * ```
 */
export class Dispatcher {
  private running = false;
  private again = false;

  constructor(
    private readonly shard: Shard,
    private readonly stealing: Stealing,
  ) {}

  /** Hands pending sessions to gateways while both exist; never throws. */
  async run(): Promise<void> {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    // A pass is one long event however it started (a frame, an enqueue, the alarm): its awaits on
    // the ledger are not idle time (backlog.ts).
    this.shard.backlog.begin(Date.now());
    try {
      do {
        this.again = false;
        await this.pass();
      } while (this.again);
    } catch (error) {
      console.error("Error in QueueDO dispatch:", error);
      await this.shard.ctx.storage.setAlarm(Date.now() + DISPATCH_RETRY_MS);
    } finally {
      this.running = false;
      this.shard.backlog.end(Date.now());
    }
  }

  private async pass(): Promise<void> {
    const { db } = this.shard;
    for (;;) {
      const item = store.nextPending(db);
      if (!item) {
        // Nothing left here: idle gateways of this shard take work from sibling shards.
        // (Siblings first: picking a gateway counts every lease, after every ack of a busy shard.)
        if (
          this.shard.siblings.length > 0 &&
          store.pickGateway(db) &&
          (await this.stealing.stealFromSiblings()) > 0
        )
          continue;
        return;
      }
      const gateway = store.pickGateway(db);
      if (!gateway) return;
      if ((await this.assign(item, gateway)) === "stop") return;
    }
  }

  /** Records `item` as assigned to `gateway` on the ledger, then sends it if the gateway is still there. */
  private async assign(item: PendingRow, gateway: GatewayRow): Promise<Step> {
    const { db, ctx, env, shardName } = this.shard;
    const leaseId = newLeaseId();
    store.reservePending(db, item.sessionId, leaseId);
    let outcome: AssignOutcome;
    try {
      outcome = await env.BATCH.getByName(item.batchId).markAssigned(
        item.sessionId,
        leaseId,
        item.attempt,
        gateway.nodeId,
      );
    } catch (error) {
      console.warn(`QueueDO ${shardName}: ledger refused assignment of ${item.sessionId}:`, error);
      store.unreservePending(db, item.sessionId);
      await ctx.storage.setAlarm(Date.now() + DISPATCH_RETRY_MS);
      return "stop";
    }
    if (outcome !== "assigned") {
      store.dropPending(db, item.sessionId);
      return "next";
    }
    // The await opened the input gate: re-read the gateway and find its socket again.
    const current = store.getGateway(db, gateway.nodeId);
    const socket =
      current?.connected && current.connId === gateway.connId ? socketOf(ctx, current.connId) : null;
    if (!current || !socket || current.credit <= 0) {
      // The ledger now holds a lease nobody received; the next assignment supersedes it.
      store.unreservePending(db, item.sessionId);
      // Only the connection this was for: a node that reconnected meanwhile keeps its new one.
      if (current && !socket) disconnect(this.shard, gateway.nodeId, gateway.connId);
      return "next";
    }
    const session = JSON.parse(item.payload) as SessionAssignment;
    ctx.storage.transactionSync(() => store.confirmAssignment(db, item, leaseId, current.nodeId, Date.now()));
    send(socket, { v: WIRE_VERSION, type: "assign", lease_id: leaseId, session });
    return "next";
  }
}

/**
 * Withdraws sessions that ended on the ledger (deadline, cancel, early stop): drops them from the
 * pending list and tells the gateways holding them to cancel. Returns how many leases it ended.
 *
 * @example
 * ```ts
 * withdraw(shard, [{ session_id: "b.0.0", lease_id: null }], "batch cancelled");
 * ```
 */
export function withdraw(
  shard: Shard,
  items: { session_id: string; lease_id: string | null; superseded?: boolean }[],
  reason: string,
): number {
  const leases = shard.ctx.storage.transactionSync(() => store.withdrawSessions(shard.db, items));
  for (const lease of leases) {
    const gw = store.getGateway(shard.db, lease.nodeId);
    const socket = gw?.connected ? socketOf(shard.ctx, gw.connId) : null;
    if (socket) {
      send(socket, {
        v: WIRE_VERSION,
        type: "cancel",
        lease_id: lease.leaseId,
        session_id: lease.sessionId,
        reason,
      });
    }
  }
  return leases.length;
}
