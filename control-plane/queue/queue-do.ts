/**
 * QueueDO: the dispatcher of one queue (named by the queue name). It accepts gateway WebSockets
 * with the hibernation API, keeps pending sessions, gateways and leases in SQLite, and hands
 * sessions to gateways as far as their credit allows. The BatchDO ledger stays the authority on
 * assignments and results; this object only forwards to it.
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import {
  type ControlMessage,
  type CreditMessage,
  type HelloMessage,
  type ProgressMessage,
  type ResultMessage,
  type SessionAssignment,
  WIRE_VERSION,
} from "../../protocol";
import type { AssignOutcome } from "../batch/dto";
import { newConnectionId, newLeaseId, parseSessionId } from "../ids";
import migrations from "./drizzle/migrations.js";
import { CLOSE_REPLACED, errorFrame, parseGatewayFrame } from "./messages";
import * as schema from "./schema";
import * as store from "./store";

/**
 * Header the Worker sets (after stripping any client copy) with the queue name it routed to.
 *
 * @example
 * ```ts
 * headers.set(QUEUE_HEADER, "default");
 * ```
 */
export const QUEUE_HEADER = "X-Polar-Queue";
/**
 * Seconds between the gateway's `ping` frames, announced in `welcome`.
 *
 * @example
 * ```ts
 * setInterval(() => ws.send("ping"), PING_INTERVAL_SECONDS * 1000);
 * ```
 */
export const PING_INTERVAL_SECONDS = 15;
/** Delay before the alarm retries a dispatch whose ledger call failed. */
const DISPATCH_RETRY_MS = 2000;

/** What survives hibernation on each socket: its connection id and, after hello, its node id. */
interface SocketAttachment {
  connId: string;
  nodeId: string | null;
}

/** One gateway as reported by `stats()`. */
export interface GatewayStats {
  node_id: string;
  credit: number;
  connected: boolean;
  leases: number;
}

/** Snapshot of the dispatcher (tests and observability). */
export interface QueueStats {
  queue: string;
  pending: number;
  leases: number;
  gateways: GatewayStats[];
  counters: store.QueueCounters;
}

/** Errors the runtime reports for sockets that are already gone; not worth a log line. */
function isBenignSocketError(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /peer disconnected|network connection lost|websocket.*clos/i.test(message);
}

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
  private readonly db: store.QueueDb;
  /** Single-flight guard: ledger RPCs open the input gate, so one dispatch pass at a time. */
  private dispatching = false;
  private dispatchAgain = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.db = drizzle(ctx.storage, { schema });
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair("ping", "pong"));
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.db, migrations);
      // A fresh instance has no dispatch in flight: reservations are void, and gateways whose
      // socket did not survive (deploy, restart) are disconnected.
      store.releaseAllReservations(this.db);
      const live = new Set(ctx.getWebSockets().map((ws) => this.attachment(ws)?.connId));
      for (const gw of store.listGateways(this.db)) {
        if (gw.connected && !live.has(gw.connId))
          store.disconnectGateway(this.db, gw.nodeId, gw.connId, Date.now());
      }
    });
  }

  private get queueName(): string {
    return this.ctx.id.name ?? "unknown";
  }

  /** Accepts a gateway WebSocket (the Worker has already authenticated it). */
  override async fetch(request: Request): Promise<Response> {
    if (request.headers.get("Upgrade")?.toLowerCase() !== "websocket") {
      return Response.json(
        { error: { code: "upgrade_required", message: "expected a WebSocket upgrade" } },
        { status: 426 },
      );
    }
    if (!request.headers.get(QUEUE_HEADER)) {
      // Only the Worker reaches this object and it always sets the header.
      return Response.json(
        { error: { code: "forbidden", message: "not routed by the Worker" } },
        { status: 403 },
      );
    }
    const pair = new WebSocketPair();
    const [client, server] = [pair[0], pair[1]];
    this.ctx.acceptWebSocket(server, ["gateway"]);
    const attachment: SocketAttachment = { connId: newConnectionId(), nodeId: null };
    server.serializeAttachment(attachment);
    return new Response(null, { status: 101, webSocket: client });
  }

  /** Every frame lands here; one bad frame never closes the connection (except a wrong version). */
  override async webSocketMessage(ws: WebSocket, frame: string | ArrayBuffer): Promise<void> {
    try {
      await this.handleFrame(ws, frame);
    } catch (error) {
      console.error("Error in QueueDO webSocketMessage:", error);
      this.send(ws, errorFrame("internal", "the control plane failed to handle this message; retry it"));
    }
  }

  override async webSocketClose(ws: WebSocket, code: number, reason: string): Promise<void> {
    try {
      this.markDisconnected(ws);
    } catch (error) {
      console.error("Error in QueueDO webSocketClose:", error);
    } finally {
      this.closeQuietly(ws, code === 1005 || code === 1006 ? 1000 : code, reason);
    }
  }

  override async webSocketError(ws: WebSocket, error: unknown): Promise<void> {
    try {
      if (!isBenignSocketError(error)) console.error("Error in QueueDO webSocketError:", error);
      this.markDisconnected(ws);
    } catch (inner) {
      console.error("Error in QueueDO webSocketError:", inner);
    } finally {
      this.closeQuietly(ws, 1011, "socket error");
    }
  }

  /** Alarm: retries dispatch after a failed ledger call. */
  override async alarm(): Promise<void> {
    await this.dispatch();
  }

  /**
   * Adds sessions to the pending list (idempotent by session id) and dispatches.
   *
   * @returns how many sessions were new
   */
  async enqueue(items: SessionAssignment[]): Promise<number> {
    const added = this.ctx.storage.transactionSync(() => store.enqueueSessions(this.db, items, Date.now()));
    // Do not hold the caller (the ledger's outbox) while gateways are being served.
    this.ctx.waitUntil(this.dispatch());
    return added;
  }

  /** Pending, leases, gateways and counters. */
  async stats(): Promise<QueueStats> {
    const sizes = store.sizes(this.db);
    const gateways = store.listGateways(this.db).map((g) => ({
      node_id: g.nodeId,
      credit: g.credit,
      connected: g.connected,
      leases: store.leasesOfNode(this.db, g.nodeId).length,
    }));
    return { queue: this.queueName, ...sizes, gateways, counters: store.readCounters(this.db) };
  }

  // ---- frames -----------------------------------------------------------------------------

  private async handleFrame(ws: WebSocket, frame: string | ArrayBuffer): Promise<void> {
    if (frame === "ping") {
      // Normally answered by the auto-response without waking us; answer anyway if it gets here.
      this.sendRaw(ws, "pong");
      return;
    }
    const parsed = parseGatewayFrame(frame);
    if (!parsed.ok) {
      this.send(ws, errorFrame(parsed.code, parsed.message));
      if (parsed.close !== undefined) this.closeQuietly(ws, parsed.close, parsed.code);
      return;
    }
    const message = parsed.message;
    if (message.type === "hello") {
      await this.onHello(ws, message);
      return;
    }
    const nodeId = this.attachment(ws)?.nodeId;
    if (!nodeId) {
      this.send(ws, errorFrame("hello_required", `send hello before '${message.type}'`));
      return;
    }
    if (message.type === "credit") await this.onCredit(nodeId, message);
    else if (message.type === "progress") await this.onProgress(ws, nodeId, message);
    else if (message.type === "result") await this.onResult(ws, message);
    else console.log(`QueueDO: admin_ack from ${nodeId} for ${message.request_id} (ok=${message.ok})`);
  }

  private async onHello(ws: WebSocket, hello: HelloMessage): Promise<void> {
    const attachment = this.attachment(ws);
    if (!attachment) return;
    if (attachment.nodeId && attachment.nodeId !== hello.node_id) {
      this.send(ws, errorFrame("node_id_changed", `this connection is node '${attachment.nodeId}'`));
      return;
    }
    // A node has one live connection: a reconnect replaces the old socket.
    for (const other of this.ctx.getWebSockets()) {
      if (other !== ws && this.attachment(other)?.nodeId === hello.node_id) {
        this.closeQuietly(other, CLOSE_REPLACED, "replaced by a newer connection");
      }
    }
    const now = Date.now();
    const held = new Map(hello.leases.map((lease) => [lease.lease_id, lease.session_id]));
    const kept: string[] = [];
    this.ctx.storage.transactionSync(() => {
      store.upsertGateway(this.db, hello.node_id, attachment.connId, hello.credit, hello.capacity, now);
      for (const lease of store.leasesOfNode(this.db, hello.node_id)) {
        if (held.get(lease.leaseId) === lease.sessionId) kept.push(lease.leaseId);
        // The gateway no longer has this session (it restarted): give it to someone.
        else store.requeueLease(this.db, lease, now);
      }
    });
    ws.serializeAttachment({ ...attachment, nodeId: hello.node_id } satisfies SocketAttachment);
    for (const lease of hello.leases) {
      if (!kept.includes(lease.lease_id)) {
        this.send(ws, {
          v: WIRE_VERSION,
          type: "cancel",
          lease_id: lease.lease_id,
          session_id: lease.session_id,
          reason: "lease is not current",
        });
      }
    }
    this.send(ws, {
      v: WIRE_VERSION,
      type: "welcome",
      queue: this.queueName,
      node_id: hello.node_id,
      kept_leases: kept,
      ping_interval_seconds: PING_INTERVAL_SECONDS,
    });
    await this.dispatch();
  }

  private async onCredit(nodeId: string, credit: CreditMessage): Promise<void> {
    store.addCredit(this.db, nodeId, credit.grant);
    await this.dispatch();
  }

  private async onProgress(ws: WebSocket, nodeId: string, progress: ProgressMessage): Promise<void> {
    const lease = store.findLease(this.db, progress.lease_id);
    if (!lease || lease.nodeId !== nodeId || lease.sessionId !== progress.session_id) {
      store.bumpCounter(this.db, "stale_progress");
      this.send(ws, errorFrame("stale_lease", `lease '${progress.lease_id}' is not current for this node`));
      return;
    }
    const outcome = await this.env.BATCH.getByName(lease.batchId).markProgress(
      progress.session_id,
      progress.lease_id,
      progress.status,
    );
    if (outcome === "stale") {
      store.bumpCounter(this.db, "stale_progress");
      this.send(ws, errorFrame("stale_lease", `lease '${progress.lease_id}' was superseded`));
    }
  }

  private async onResult(ws: WebSocket, message: ResultMessage): Promise<void> {
    const sessionId = message.result.session_id;
    const lease = store.findLease(this.db, message.lease_id);
    const ownLease = lease && lease.sessionId === sessionId ? lease : undefined;
    const batchId = ownLease?.batchId ?? parseSessionId(sessionId)?.batchId ?? message.result.batch_id;
    let status: Awaited<ReturnType<typeof this.submit>>;
    try {
      status = await this.submit(batchId, sessionId, message);
    } catch (error) {
      console.error(`QueueDO: recording result of ${sessionId} failed:`, error);
      this.send(
        ws,
        errorFrame("result_not_recorded", `result of '${sessionId}' was not recorded; send it again`),
      );
      return;
    }
    // Re-read after the await: the lease may have been requeued meanwhile.
    if (ownLease && store.findLease(this.db, ownLease.leaseId)) store.deleteLease(this.db, ownLease.leaseId);
    if (status === "stale") store.bumpCounter(this.db, "stale_results");
    if (status === "duplicate") store.bumpCounter(this.db, "duplicate_results");
    this.send(ws, {
      v: WIRE_VERSION,
      type: "ack",
      lease_id: message.lease_id,
      session_id: sessionId,
      status,
    });
  }

  private submit(batchId: string, sessionId: string, message: ResultMessage) {
    return this.env.BATCH.getByName(batchId).submitResult(sessionId, message.lease_id, message.result);
  }

  // ---- dispatch ---------------------------------------------------------------------------

  /** Hands pending sessions to gateways while both exist; never throws. */
  private async dispatch(): Promise<void> {
    if (this.dispatching) {
      this.dispatchAgain = true;
      return;
    }
    this.dispatching = true;
    try {
      do {
        this.dispatchAgain = false;
        await this.dispatchWhilePossible();
      } while (this.dispatchAgain);
    } catch (error) {
      console.error("Error in QueueDO dispatch:", error);
      await this.ctx.storage.setAlarm(Date.now() + DISPATCH_RETRY_MS);
    } finally {
      this.dispatching = false;
    }
  }

  private async dispatchWhilePossible(): Promise<void> {
    for (;;) {
      const item = store.nextPending(this.db);
      if (!item) return;
      const gateway = store.pickGateway(this.db);
      if (!gateway) return;
      const leaseId = newLeaseId();
      store.reservePending(this.db, item.sessionId, leaseId);
      let outcome: AssignOutcome;
      try {
        outcome = await this.env.BATCH.getByName(item.batchId).markAssigned(
          item.sessionId,
          leaseId,
          item.attempt,
          gateway.nodeId,
        );
      } catch (error) {
        console.warn(`QueueDO ${this.queueName}: ledger refused assignment of ${item.sessionId}:`, error);
        store.unreservePending(this.db, item.sessionId);
        await this.ctx.storage.setAlarm(Date.now() + DISPATCH_RETRY_MS);
        return;
      }
      if (outcome !== "assigned") {
        store.dropPending(this.db, item.sessionId);
        continue;
      }
      // The await opened the input gate: re-read the gateway and find its socket again.
      const current = store.getGateway(this.db, gateway.nodeId);
      const socket =
        current?.connected && current.connId === gateway.connId ? this.socketOf(current.connId) : null;
      if (!current || !socket || current.credit <= 0) {
        // The ledger now holds a lease nobody received; the next assignment supersedes it.
        store.unreservePending(this.db, item.sessionId);
        if (current && !socket) store.disconnectGateway(this.db, current.nodeId, current.connId, Date.now());
        continue;
      }
      const session = JSON.parse(item.payload) as SessionAssignment;
      this.ctx.storage.transactionSync(() =>
        store.confirmAssignment(this.db, item, leaseId, current.nodeId, Date.now()),
      );
      this.send(socket, { v: WIRE_VERSION, type: "assign", lease_id: leaseId, session });
    }
  }

  // ---- sockets ----------------------------------------------------------------------------

  private attachment(ws: WebSocket): SocketAttachment | null {
    return (ws.deserializeAttachment() as SocketAttachment | null) ?? null;
  }

  private socketOf(connId: string): WebSocket | null {
    for (const ws of this.ctx.getWebSockets()) {
      if (this.attachment(ws)?.connId === connId && ws.readyState === WebSocket.OPEN) return ws;
    }
    return null;
  }

  private markDisconnected(ws: WebSocket): void {
    const attachment = this.attachment(ws);
    if (attachment?.nodeId)
      store.disconnectGateway(this.db, attachment.nodeId, attachment.connId, Date.now());
  }

  private send(ws: WebSocket, message: ControlMessage): void {
    this.sendRaw(ws, JSON.stringify(message));
  }

  private sendRaw(ws: WebSocket, text: string): void {
    try {
      ws.send(text);
    } catch (error) {
      if (!isBenignSocketError(error)) console.error("Error in QueueDO send:", error);
    }
  }

  private closeQuietly(ws: WebSocket, code: number, reason: string): void {
    try {
      ws.close(code, reason);
    } catch {
      // Already closing or closed: nothing to do.
    }
  }
}
