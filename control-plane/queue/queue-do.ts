/**
 * QueueDO: the dispatcher of one queue shard (named by the shard name: the queue name, or
 * `queue#i`). A thin Durable Object over plain modules that take the shard (`shard.ts`): its
 * sockets (`sockets`), the hello handshake (`handshake`), frames (`frames`), dispatch and
 * withdrawal (`dispatch`), liveness and the alarm (`liveness`), lost leases (`lost-leases`),
 * work stealing between shards (`stealing`), admin fan-out and the fence (`fence-routes`),
 * stats (`stats`) and metrics (`shard-metrics`), over per-table stores (`store`). The BatchDO
 * ledger stays the authority on assignments and results; this object only forwards to it.
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import type { SessionAssignment } from "../../protocol";
import { EventFlusher } from "../events/outbox";
import { AdminFanout, type AdminNodeResult } from "./admin-fanout";
import { Dispatcher, withdraw } from "./dispatch";
import migrations from "./drizzle/migrations.js";
import { recordShardEvents } from "./events";
import type { FenceChange } from "./fence";
import { readFence } from "./fence";
import { applyFence, drainNode, ensureFence, type FenceOutcome, fenceStatus } from "./fence-routes";
import { handleFrame } from "./frames";
import { armAlarm, checkLiveness, markDisconnected, reconcileAfterRestart } from "./liveness";
import { processLostLeases } from "./lost-leases";
import { errorFrame } from "./messages";
import * as schema from "./schema";
import { openShard, type Shard } from "./shard";
import { type ShardMetrics, shardMetrics } from "./shard-metrics";
import { acceptGateway, attachmentOf, closeQuietly, isBenignSocketError, send } from "./sockets";
import { type GatewayPresence, gatewayPresence, type ShardStats, shardStats } from "./stats";
import { Stealing } from "./stealing";
import * as store from "./store";

/**
 * The dispatcher Durable Object.
 *
 * @example
 * ```ts
 * await env.QUEUE.getByName("default").enqueue([assignment]);
 * const stats = await env.QUEUE.getByName("default").stats();
 * ```
 */
export class QueueDO extends DurableObject<Env> {
  private readonly shard: Shard;
  private readonly stealing: Stealing;
  private readonly dispatcher: Dispatcher;
  /** Sends the shard's gateway and fence events to the log, off the path of every answer. */
  private readonly events: EventFlusher;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.shard = openShard(ctx, () => this.env, drizzle(ctx.storage, { schema }), new AdminFanout());
    this.events = new EventFlusher(
      ctx,
      () => this.env,
      this.shard.db,
      () => `queue:${this.shard.shardName}`,
    );
    this.stealing = new Stealing(this.shard);
    this.dispatcher = new Dispatcher(this.shard, this.stealing);
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.shard.db, migrations);
      reconcileAfterRestart(this.shard);
      await armAlarm(this.shard);
    });
  }

  /**
   * Records the gateway and fence events due after a change and sends them on; never throws.
   * `nodeId`: the change was that gateway's frame, so only it (and the fence) is looked at.
   */
  private announce(nodeId?: string): void {
    try {
      if (recordShardEvents(this.shard, Date.now(), nodeId) > 0) this.events.schedule();
    } catch (error) {
      // The state is the truth: a failure to describe it must not fail the change itself.
      console.error("QueueDO: recording state events failed:", error);
    }
  }

  /** Accepts a gateway WebSocket (the Worker has already authenticated it). */
  override async fetch(request: Request): Promise<Response> {
    return acceptGateway(this.ctx, request);
  }

  /** Every frame lands here; one bad frame never closes the connection (except a wrong version). */
  override async webSocketMessage(ws: WebSocket, frame: string | ArrayBuffer): Promise<void> {
    this.shard.backlog.begin(Date.now());
    try {
      await handleFrame(this.shard, this.dispatcher, ws, frame);
    } catch (error) {
      console.error("Error in QueueDO webSocketMessage:", error);
      send(ws, errorFrame("internal", "the control plane failed to handle this message; retry it"));
    } finally {
      this.announce(attachmentOf(ws)?.nodeId ?? undefined);
      this.shard.backlog.end(Date.now());
    }
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    try {
      markDisconnected(this.shard, ws);
    } catch (error) {
      console.error("Error in QueueDO webSocketClose:", error);
    } finally {
      this.announce();
      closeQuietly(ws, code === 1005 || code === 1006 ? 1000 : code, reason);
    }
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    try {
      if (!isBenignSocketError(error)) console.error("Error in QueueDO webSocketError:", error);
      markDisconnected(this.shard, ws);
    } catch (inner) {
      console.error("Error in QueueDO webSocketError:", inner);
    } finally {
      this.announce();
      closeQuietly(ws, 1011, "socket error");
    }
  }

  /**
   * Alarm: declares silent gateways dead (liveness from the auto-response ping timestamps), hands
   * leases whose grace ran out back to their ledgers, resolves expired loans with the ledgers, retries dispatch,
   * reminds siblings of a backlog, and re-arms.
   */
  override async alarm(): Promise<void> {
    this.shard.backlog.begin(Date.now());
    try {
      checkLiveness(this.shard, Date.now());
      await processLostLeases(this.shard);
      await this.stealing.reclaimExpiredLoans();
      await this.dispatcher.run();
      await this.stealing.pokeSiblingsIfBacklogged();
      this.announce();
      await this.events.flush();
      await armAlarm(this.shard);
    } finally {
      this.shard.backlog.end(Date.now());
    }
  }

  /**
   * Adds sessions to the pending list (idempotent by session id) and dispatches.
   *
   * @returns how many sessions were new
   */
  async enqueue(items: SessionAssignment[]): Promise<number> {
    const { db } = this.shard;
    const added = this.ctx.storage.transactionSync(() => store.enqueueSessions(db, items, Date.now()));
    // Do not hold the caller (the ledger's outbox) while gateways are being served.
    this.ctx.waitUntil(
      (async () => {
        await this.dispatcher.run();
        await this.stealing.pokeSiblingsIfBacklogged();
        await armAlarm(this.shard);
      })(),
    );
    return added;
  }

  /** Withdraws sessions that ended on the ledger and tells the gateways holding them to cancel. */
  async withdraw(
    items: { session_id: string; lease_id: string | null; superseded?: boolean }[],
    reason: string,
  ): Promise<number> {
    return withdraw(this.shard, items, reason);
  }

  /** Whether a gateway is connected here, else when the last one left (see `stats.ts`). */
  async gatewayPresence(): Promise<GatewayPresence> {
    return gatewayPresence(this.shard, Date.now());
  }

  /** Sessions waiting for a gateway (the queue-depth limit). */
  async depth(): Promise<number> {
    return store.sizes(this.shard.db).pending;
  }

  /** Pending, leases, gateways and counters. */
  async stats(): Promise<ShardStats> {
    return shardStats(this.shard);
  }

  /** What this shard contributes to the control plane's `GET /metrics` (see `shard-metrics.ts`). */
  async metrics(): Promise<ShardMetrics> {
    return shardMetrics(this.shard);
  }

  /** The queue's inference fence as stored here. */
  async fence() {
    return readFence(this.shard.db, this.shard.queue);
  }

  /** Changes the queue's fence and collects the gateways' answers (see `fence-routes.ts`). */
  async changeFence(change: FenceChange, timeoutSeconds: number): Promise<FenceOutcome> {
    try {
      return await applyFence(this.shard, change, timeoutSeconds);
    } finally {
      this.announce();
    }
  }

  /**
   * Brings the fence where `change` asks, fencing only `nodeId` when it is there already. The
   * upstream `/nodes` routes use it: a bridge fences each gateway of a queue at the same time.
   */
  async ensureFence(change: FenceChange, timeoutSeconds: number, nodeId: string): Promise<FenceOutcome> {
    try {
      return await ensureFence(this.shard, change, timeoutSeconds, nodeId);
    } finally {
      this.announce();
    }
  }

  /** The fence and every connected gateway's gate (`admin status`), changing nothing. */
  async fenceStatus(): Promise<FenceOutcome> {
    return fenceStatus(this.shard);
  }

  /** Drains a gateway; null when the node never connected to this shard. */
  async drain(nodeId: string): Promise<AdminNodeResult | null> {
    try {
      return await drainNode(this.shard, nodeId);
    } finally {
      this.announce();
    }
  }

  /** A sibling shard asks for up to `k` pending sessions for its idle gateways (see `stealing.ts`). */
  async steal(thief: string, k: number): Promise<store.SessionLoan> {
    return this.stealing.lend(thief, k);
  }

  /** The thief has taken over sessions lent under `token`: they leave this shard. */
  async settle(token: string, sessionIds: string[]): Promise<number> {
    return this.stealing.settle(token, sessionIds);
  }

  /** A sibling has sessions its own gateways cannot take: steal now if this shard has credit. */
  async poke(): Promise<void> {
    this.stealing.wake();
    this.ctx.waitUntil(this.dispatcher.run());
  }
}
