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
  type AdminMessage,
  CLOSE_NODE_MISMATCH,
  CLOSE_REPLACED,
  CLOSE_SILENT,
  type ControlMessage,
  type CreditMessage,
  type FenceNode,
  type FenceState,
  type HelloMessage,
  LIMITS,
  type ProgressMessage,
  type ResultMessage,
  type SessionAssignment,
  WIRE_VERSION,
} from "../../protocol";
import { artifactKey } from "../artifacts";
import type { AssignOutcome } from "../batch/dto";
import { newConnectionId, newLeaseId, parseSessionId } from "../ids";
import { REGISTRY_NAME } from "../registry/registry-do";
import { AdminFanout, type AdminNodeResult } from "./admin-fanout";
import migrations from "./drizzle/migrations.js";
import {
  changeFence,
  type FenceChange,
  fenceDelivery,
  fenceReaches,
  forPeer,
  readFence,
  UNAWAITED_REQUEST_PREFIX,
} from "./fence";
import { errorFrame, parseGatewayFrame } from "./messages";
import * as schema from "./schema";
import { parseShardName, shardsOf } from "./shards";
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
 * Seconds between the gateway's `ping` frames, announced in `welcome` (Worker variable
 * `POLAR_PING_INTERVAL_SECONDS` changes it, e.g. for tests).
 *
 * @example
 * ```ts
 * setInterval(() => ws.send("ping"), PING_INTERVAL_SECONDS * 1000);
 * ```
 */
export const PING_INTERVAL_SECONDS = 15;
/**
 * Ping intervals of silence after which a gateway's socket is declared dead, on both sides: 45 s
 * at the default interval. The QueueDO's alarm is armed for the moment the limit is reached after
 * the newest frame of any gateway, so a silent socket is closed at the limit (plus the alarm's
 * lateness), not on some later tick.
 *
 * @example
 * ```ts
 * const livenessMs = MISSED_PINGS * PING_INTERVAL_SECONDS * 1000; // 45_000
 * ```
 */
export const MISSED_PINGS = 3;
/**
 * Header the Worker sets when a per-gateway token authenticated the upgrade: the node id the
 * hello must name.
 *
 * @example
 * ```ts
 * headers.set(NODE_HEADER, "node-a");
 * ```
 */
export const NODE_HEADER = "X-Polar-Node-Id";
/**
 * Header the Worker sets when it chose the shard by the `node_id` query parameter: the hello must
 * name that node, so the gateway speaks on the shard that holds its leases.
 *
 * @example
 * ```ts
 * headers.set(NODE_HINT_HEADER, "node-a");
 * ```
 */
export const NODE_HINT_HEADER = "X-Polar-Node-Hint";
/** Delay before the alarm retries a dispatch whose ledger call failed. */
const DISPATCH_RETRY_MS = 2000;
/** How long sessions lent to a sibling shard stay reserved if the thief never settles them. */
const STEAL_LOAN_MS = 60_000;
/** After a steal round found nothing, credit messages do not trigger another for this long (a poke does). */
const STEAL_IDLE_BACKOFF_MS = 1000;
/** A shard holding undispatched sessions reminds its siblings this often (backstop of the pokes). */
const STEAL_NUDGE_MS = 5000;
/** Most sessions taken from one sibling in one steal call. */
const MAX_STEAL_PER_CALL = 500;
/** How long acks of actions that do not drain (resume, version, status, drain) are waited for. */
const ACK_WAIT_MS = 10_000;
/** Default of `POLAR_FENCE_ACK_MARGIN_SECONDS`: transit time allowed on top of a pause's timeout. */
const DEFAULT_FENCE_ACK_MARGIN_SECONDS = 5;

/** What survives hibernation on each socket: its connection id, node id after hello, token binding. */
interface SocketAttachment {
  connId: string;
  nodeId: string | null;
  /** Node id bound by a per-gateway token; the hello must match it. */
  boundNode?: string | null;
  /** Node id the Worker chose this shard by (`?node_id=`); the hello must match it. */
  hintNode?: string | null;
  /** Wire version of the hello: what this socket is sent (v1 gateways get v1 messages). */
  wire?: number;
}

/** One gateway as reported by `stats()`. */
export interface GatewayStats {
  node_id: string;
  /** The queue name gateways and trainers use. */
  queue: string;
  /** The dispatcher holding this gateway: the queue name, or `queue#i` for a sharded queue. */
  shard: string;
  credit: number;
  connected: boolean;
  draining: boolean;
  leases: number;
  /** Sessions assigned since the gateway's last metrics (upstream's `dispatch_reservations`). */
  reservations: number;
  capacity: { max_init: number; max_run: number; max_postrun: number };
  metrics: {
    init_queue_depth: number;
    init_inflight: number;
    ready_depth: number;
    run_inflight: number;
    postrun_queue_depth: number;
    postrun_inflight: number;
  } | null;
  connected_at: number;
  disconnected_at: number | null;
  last_seen_at: number | null;
}

/**
 * Whether this dispatcher has a gateway connected, and when it last had one (null: never). The
 * ledger uses it to end sessions of a queue that has had no gateway for a long time.
 */
export interface GatewayPresence {
  connected: boolean;
  last_connected_at: number | null;
}

/** Snapshot of the dispatcher (tests and observability). */
export interface QueueStats {
  queue: string;
  /** This dispatcher's name (`queue` or `queue#i`). */
  shard: string;
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
  /** Until when credit-triggered steal rounds are skipped (the last one found nothing). */
  private stealIdleUntil = 0;
  /** Rotates the sibling a steal round starts with, so no sibling is always drained first. */
  private stealCursor = 0;
  private readonly admins = new AdminFanout();

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
        if (gw.connected && !live.has(gw.connId)) this.disconnect(gw.nodeId, gw.connId);
      }
      await this.armAlarm();
    });
  }

  /** Seconds between pings (announced in welcome); the liveness limit is MISSED_PINGS of them. */
  private get pingIntervalSeconds(): number {
    const raw = Number(this.env.POLAR_PING_INTERVAL_SECONDS);
    return Number.isInteger(raw) && raw >= 1 ? raw : PING_INTERVAL_SECONDS;
  }

  private get livenessMs(): number {
    return MISSED_PINGS * this.pingIntervalSeconds * 1000;
  }

  private get leaseGraceMs(): number {
    const raw = Number(this.env.POLAR_LEASE_GRACE_SECONDS);
    return (Number.isFinite(raw) && raw >= 0 ? raw : LIMITS.leaseGraceSeconds) * 1000;
  }

  /** This dispatcher's name: the queue name, or `queue#i` for shard i of a sharded queue. */
  private get queueName(): string {
    return this.ctx.id.name ?? "unknown";
  }

  /** The other shards of this queue (none for an unsharded queue). */
  private get siblings(): string[] {
    const { queue } = parseShardName(this.queueName);
    return shardsOf(queue, this.env.POLAR_QUEUE_SHARDS).filter((name) => name !== this.queueName);
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
    const attachment: SocketAttachment = {
      connId: newConnectionId(),
      nodeId: null,
      boundNode: request.headers.get(NODE_HEADER),
      hintNode: request.headers.get(NODE_HINT_HEADER),
    };
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

  /**
   * Alarm: declares silent gateways dead (liveness from the auto-response ping timestamps),
   * hands leases whose grace ran out back to their ledgers, retries dispatch, and re-arms.
   */
  override async alarm(): Promise<void> {
    this.checkLiveness(Date.now());
    await this.processLostLeases();
    store.releaseExpiredLoans(this.db, Date.now());
    await this.dispatch();
    await this.pokeSiblingsIfBacklogged();
    await this.armAlarm();
  }

  /**
   * The newest frame of each connected gateway's socket: its last ping (answered by the
   * platform's auto-response without waking us; `getWebSocketAutoResponseTimestamp` tells when),
   * its last message, or its hello.
   */
  private lastFrames(): Array<{ ws: WebSocket; nodeId: string; connId: string; last: number }> {
    const out: Array<{ ws: WebSocket; nodeId: string; connId: string; last: number }> = [];
    for (const ws of this.ctx.getWebSockets()) {
      const att = this.attachment(ws);
      if (!att?.nodeId) continue;
      const gw = store.getGateway(this.db, att.nodeId);
      if (!gw?.connected || gw.connId !== att.connId) continue;
      const pinged = this.ctx.getWebSocketAutoResponseTimestamp(ws)?.getTime() ?? 0;
      out.push({
        ws,
        nodeId: att.nodeId,
        connId: att.connId,
        last: Math.max(pinged, gw.lastSeenAt ?? 0, gw.connectedAt),
      });
    }
    return out;
  }

  /** Closes sockets silent (no ping, no message) for the liveness limit or longer. */
  private checkLiveness(now: number): void {
    const limit = this.livenessMs;
    for (const { ws, nodeId, connId, last } of this.lastFrames()) {
      if (now - last < limit) continue;
      console.warn(`QueueDO ${this.queueName}: gateway ${nodeId} silent for ${now - last} ms; closing`);
      // last_seen_at then says when the last frame came: disconnected_at minus it is the detection time.
      store.touchGateway(this.db, nodeId, last);
      this.closeQuietly(ws, CLOSE_SILENT, "no ping");
      this.disconnect(nodeId, connId);
    }
  }

  /** Leases past their grace go back to their ledger (requeue or infra failure). Never throws. */
  private async processLostLeases(): Promise<void> {
    for (const lease of store.dueLostLeases(this.db, Date.now())) {
      try {
        const outcome = await this.env.BATCH.getByName(lease.batchId).leaseLost(
          lease.sessionId,
          lease.leaseId,
          `gateway ${lease.nodeId} lost the session`,
        );
        // Re-read after the await: a reconnect may have reclaimed it meanwhile.
        const current = store.findLease(this.db, lease.leaseId);
        if (current && (current.lostAt === null || outcome !== "stale" || current.lostAt <= Date.now())) {
          store.deleteLease(this.db, lease.leaseId);
          if (outcome === "requeued") store.bumpCounter(this.db, "requeued_leases");
        }
      } catch (error) {
        console.warn(`QueueDO ${this.queueName}: ledger refused lost lease ${lease.leaseId}:`, error);
        store.setLeaseLostAt(this.db, lease.leaseId, Date.now() + DISPATCH_RETRY_MS);
      }
    }
  }

  /**
   * Arms the alarm at the earliest of: the next lost lease, the moment a connected gateway's
   * socket reaches the liveness limit if nothing arrives before (the alarm then re-arms from the
   * newer frame), a steal nudge.
   */
  private async armAlarm(): Promise<void> {
    const times: number[] = [];
    const lost = store.nextLostAt(this.db);
    if (lost !== null) times.push(lost);
    const sizes = store.sizes(this.db);
    const frames = this.lastFrames();
    if (frames.length > 0) times.push(Math.min(...frames.map((f) => f.last)) + this.livenessMs);
    // Sessions waiting here while siblings may have idle gateways: remind them now and then,
    // in case a poke was lost (and release loans a failed thief never settled).
    if (sizes.pending > 0 && this.siblings.length > 0) times.push(Date.now() + STEAL_NUDGE_MS);
    if (times.length === 0) return;
    const next = Math.max(Math.min(...times), Date.now());
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(next);
  }

  /**
   * Withdraws sessions that ended on the ledger (deadline, cancel, early stop): drops them from
   * the pending list and tells the gateways holding them to cancel.
   */
  async withdraw(items: { session_id: string; lease_id: string | null }[], reason: string): Promise<number> {
    const leases = this.ctx.storage.transactionSync(() => store.withdrawSessions(this.db, items));
    for (const lease of leases) {
      const gw = store.getGateway(this.db, lease.nodeId);
      const socket = gw?.connected ? this.socketOf(gw.connId) : null;
      if (socket) {
        this.send(socket, {
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

  /**
   * Whether a gateway is connected here (after closing silent ones), else when the last one left.
   * A draining gateway counts as connected: an operator chose to hold it.
   */
  async gatewayPresence(): Promise<GatewayPresence> {
    const now = Date.now();
    this.checkLiveness(now);
    let connected = false;
    let last: number | null = null;
    for (const gw of store.listGateways(this.db)) {
      connected ||= gw.connected;
      const seen = gw.connected ? now : (gw.disconnectedAt ?? gw.connectedAt);
      last = last === null ? seen : Math.max(last, seen);
    }
    return { connected, last_connected_at: last };
  }

  /** Sessions waiting for a gateway (the queue-depth limit). */
  async depth(): Promise<number> {
    return store.sizes(this.db).pending;
  }

  /**
   * Sends each connected gateway (or only `nodeId`) what `build` makes for its wire version and
   * collects the acks of the awaited requests until all answered or `timeoutMs` passed.
   */
  private async collectAcks(
    build: (requestId: string, peer: number) => { messages: AdminMessage[]; awaited: string | null },
    timeoutMs: number,
    nodeId?: string,
  ): Promise<AdminNodeResult[]> {
    const requestId = `adm_${crypto.randomUUID()}`;
    const waits: Promise<AdminNodeResult>[] = [];
    for (const gw of store.listGateways(this.db)) {
      if (!gw.connected || (nodeId !== undefined && gw.nodeId !== nodeId)) continue;
      const socket = this.socketOf(gw.connId);
      if (!socket) continue;
      const peer = this.attachment(socket)?.wire ?? 1;
      const delivery = build(requestId, peer);
      if (delivery.awaited !== null) waits.push(this.admins.expect(delivery.awaited, gw.nodeId, timeoutMs));
      else
        waits.push(
          Promise.resolve({
            node_id: gw.nodeId,
            ok: false,
            paused: false,
            inflight: 0,
            policy_version: null,
            error: `this gateway speaks wire protocol v${peer}, which has no answer for this request`,
          }),
        );
      for (const message of delivery.messages) this.send(socket, message);
    }
    return Promise.all(waits);
  }

  /** Transit time allowed on top of a pause's timeout for the gateways' answers (ms). */
  private get fenceAckMarginMs(): number {
    const raw = Number(this.env.POLAR_FENCE_ACK_MARGIN_SECONDS);
    return (Number.isFinite(raw) && raw >= 0 ? raw : DEFAULT_FENCE_ACK_MARGIN_SECONDS) * 1000;
  }

  /** The queue's inference fence as stored here. */
  async fence(): Promise<FenceState> {
    return readFence(this.db, parseShardName(this.queueName).queue);
  }

  /**
   * Changes the queue's fence: stores it first (a gateway that connects from now on gets it in
   * `welcome`), then tells every connected gateway and collects their answers. A pause waits
   * `timeoutSeconds` (the gateways drain, or abort, within the same timeout) plus a transit
   * margin; the other changes are answered at once.
   */
  async changeFence(
    change: FenceChange,
    timeoutSeconds: number,
  ): Promise<{ fence: FenceState; nodes: FenceNode[] }> {
    const fence = changeFence(this.db, parseShardName(this.queueName).queue, change, Date.now());
    const waitMs = change.kind === "pause" ? timeoutSeconds * 1000 + this.fenceAckMarginMs : ACK_WAIT_MS;
    const nodes = await this.collectAcks(
      (requestId, peer) => fenceDelivery(fence, change.kind, requestId, timeoutSeconds, peer),
      waitMs,
    );
    return { fence, nodes };
  }

  /**
   * Brings the fence where `change` asks without fencing every gateway again when it is there
   * already: then only `nodeId` (when connected here) gets the current fence, and its answer is
   * collected. The upstream `/nodes` routes use it: a bridge fences each gateway of a queue at the
   * same time, and the first call's fan-out already reached them all (or they got the fence in
   * `welcome`). The check and the store are one synchronous step, so two calls never both store.
   */
  async ensureFence(
    change: FenceChange,
    timeoutSeconds: number,
    nodeId: string,
  ): Promise<{ fence: FenceState; nodes: FenceNode[] }> {
    const fence = readFence(this.db, parseShardName(this.queueName).queue);
    if (!fenceReaches(fence, change)) return this.changeFence(change, timeoutSeconds);
    const waitMs = change.kind === "pause" ? timeoutSeconds * 1000 + this.fenceAckMarginMs : ACK_WAIT_MS;
    const nodes = await this.collectAcks(
      (requestId, peer) => fenceDelivery(fence, change.kind, requestId, timeoutSeconds, peer),
      waitMs,
      nodeId,
    );
    return { fence, nodes };
  }

  /** The fence and every connected gateway's gate (`admin status`), changing nothing. */
  async fenceStatus(): Promise<{ fence: FenceState; nodes: FenceNode[] }> {
    const nodes = await this.collectAcks(
      (requestId, peer) =>
        peer >= 2
          ? {
              messages: [{ v: WIRE_VERSION, type: "admin", request_id: requestId, action: "status" }],
              awaited: requestId,
            }
          : { messages: [], awaited: null },
      ACK_WAIT_MS,
    );
    return { fence: await this.fence(), nodes };
  }

  /**
   * Drains a gateway: it gets no new sessions, and is told (`admin drain`) to finish the ones it
   * holds. Null when the node never connected to this queue.
   */
  async drain(nodeId: string): Promise<AdminNodeResult | null> {
    if (!store.setDraining(this.db, nodeId, true)) return null;
    const [answer] = await this.collectAcks(
      (requestId, peer) => ({
        messages: [
          { v: peer >= 2 ? WIRE_VERSION : 1, type: "admin", request_id: requestId, action: "drain" },
        ],
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

  /**
   * Adds sessions to the pending list (idempotent by session id) and dispatches.
   *
   * @returns how many sessions were new
   */
  async enqueue(items: SessionAssignment[]): Promise<number> {
    const added = this.ctx.storage.transactionSync(() => store.enqueueSessions(this.db, items, Date.now()));
    // Do not hold the caller (the ledger's outbox) while gateways are being served.
    this.ctx.waitUntil(
      (async () => {
        await this.dispatch();
        await this.pokeSiblingsIfBacklogged();
        await this.armAlarm();
      })(),
    );
    return added;
  }

  // ---- sharding: work stealing between the shards of one queue ------------------------------

  /**
   * A sibling shard asks for up to `k` pending sessions for its idle gateways. They are lent (kept
   * here, reserved) until the thief settles them; a loan never settled returns to this shard's
   * pending list after STEAL_LOAN_MS. The ledger's leases fence the rare double dispatch that can
   * follow (the later assignment supersedes the earlier one).
   */
  async steal(thief: string, k: number): Promise<store.SessionLoan> {
    if (thief === this.queueName || k <= 0) return { token: "", payloads: [] };
    const now = Date.now();
    return this.ctx.storage.transactionSync(() => {
      store.releaseExpiredLoans(this.db, now);
      const loan = store.lendPending(this.db, thief, Math.min(k, MAX_STEAL_PER_CALL), now + STEAL_LOAN_MS);
      if (loan.payloads.length > 0) store.bumpCounter(this.db, "lent_sessions", loan.payloads.length);
      return loan;
    });
  }

  /** The thief has taken over sessions lent under `token`: they leave this shard. */
  async settle(token: string, sessionIds: string[]): Promise<number> {
    return store.settleLent(this.db, token, sessionIds);
  }

  /** A sibling has sessions its own gateways cannot take: steal now if this shard has credit. */
  async poke(): Promise<void> {
    this.stealIdleUntil = 0;
    this.ctx.waitUntil(this.dispatch());
  }

  /** Tells every sibling when sessions are left here that no gateway of this shard can take. */
  private async pokeSiblingsIfBacklogged(): Promise<void> {
    const siblings = this.siblings;
    if (siblings.length === 0 || store.unreservedPending(this.db) === 0) return;
    await Promise.all(
      siblings.map((name) =>
        this.env.QUEUE.getByName(name)
          .poke()
          .catch((error: unknown) =>
            console.warn(`QueueDO ${this.queueName}: poke of ${name} failed:`, error),
          ),
      ),
    );
  }

  /**
   * Takes pending sessions from siblings, up to this shard's spare credit, into its own pending
   * list. Returns how many were taken. Never throws.
   */
  private async stealFromSiblings(): Promise<number> {
    const siblings = this.siblings;
    if (siblings.length === 0 || Date.now() < this.stealIdleUntil) return 0;
    let taken = 0;
    const start = this.stealCursor++;
    for (let i = 0; i < siblings.length; i++) {
      const want =
        Math.min(store.spareCredit(this.db), MAX_STEAL_PER_CALL) - store.unreservedPending(this.db);
      if (want <= 0) break;
      const sibling = siblings[(start + i) % siblings.length]!;
      try {
        const stub = this.env.QUEUE.getByName(sibling);
        const loan = await stub.steal(this.queueName, want);
        if (loan.payloads.length === 0) continue;
        const items = loan.payloads.map((p) => JSON.parse(p) as SessionAssignment);
        this.ctx.storage.transactionSync(() => {
          store.adoptStolen(this.db, items, Date.now());
          store.bumpCounter(this.db, "stolen_sessions", items.length);
        });
        taken += items.length;
        const ids = items.map((item) => item.session_id);
        // The sessions are safe here now; the lender may forget them (not on the dispatch path).
        this.ctx.waitUntil(
          stub
            .settle(loan.token, ids)
            .then(() => undefined)
            .catch((error: unknown) =>
              console.warn(`QueueDO ${this.queueName}: settling a loan from ${sibling} failed:`, error),
            ),
        );
      } catch (error) {
        console.warn(`QueueDO ${this.queueName}: stealing from ${sibling} failed:`, error);
      }
    }
    if (taken === 0) this.stealIdleUntil = Date.now() + STEAL_IDLE_BACKOFF_MS;
    return taken;
  }

  /** Pending, leases, gateways and counters. */
  async stats(): Promise<QueueStats> {
    const sizes = store.sizes(this.db);
    const gateways: GatewayStats[] = store.listGateways(this.db).map((g) => ({
      node_id: g.nodeId,
      queue: parseShardName(this.queueName).queue,
      shard: this.queueName,
      credit: g.credit,
      connected: g.connected,
      draining: g.draining,
      leases: store.leasesOfNode(this.db, g.nodeId).length,
      reservations: g.reservations,
      capacity: JSON.parse(g.capacity) as GatewayStats["capacity"],
      metrics: g.metrics ? (JSON.parse(g.metrics) as GatewayStats["metrics"]) : null,
      connected_at: g.connectedAt,
      disconnected_at: g.disconnectedAt,
      last_seen_at: g.lastSeenAt,
    }));
    return {
      queue: parseShardName(this.queueName).queue,
      shard: this.queueName,
      ...sizes,
      gateways,
      counters: store.readCounters(this.db),
    };
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
    store.touchGateway(this.db, nodeId, Date.now());
    if (message.type === "credit") await this.onCredit(nodeId, message);
    else if (message.type === "progress") await this.onProgress(ws, nodeId, message);
    else if (message.type === "result") await this.onResult(ws, message);
    else if (
      !this.admins.resolve(nodeId, message) &&
      !message.request_id.startsWith(UNAWAITED_REQUEST_PREFIX)
    )
      console.warn(`QueueDO: late admin_ack from ${nodeId} for ${message.request_id}`);
  }

  private async onHello(ws: WebSocket, hello: HelloMessage): Promise<void> {
    const attachment = this.attachment(ws);
    if (!attachment) return;
    if (attachment.nodeId && attachment.nodeId !== hello.node_id) {
      this.send(ws, errorFrame("node_id_changed", `this connection is node '${attachment.nodeId}'`));
      return;
    }
    if (attachment.boundNode && attachment.boundNode !== hello.node_id) {
      // A per-gateway token names its node: it cannot speak for another one.
      this.send(
        ws,
        errorFrame(
          "node_id_mismatch",
          `this token belongs to node '${attachment.boundNode}', not '${hello.node_id}'`,
        ),
      );
      this.closeQuietly(ws, CLOSE_NODE_MISMATCH, "node_id_mismatch");
      return;
    }
    if (attachment.hintNode && attachment.hintNode !== hello.node_id) {
      // The Worker chose this shard by the node id in the connect URL; another node belongs elsewhere.
      this.send(
        ws,
        errorFrame(
          "node_id_mismatch",
          `this connection was opened with node_id '${attachment.hintNode}', but the hello names '${hello.node_id}'`,
        ),
      );
      this.closeQuietly(ws, CLOSE_NODE_MISMATCH, "node_id_mismatch");
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
      const leases = store.leasesOfNode(this.db, hello.node_id);
      for (const lease of leases) {
        if (held.get(lease.leaseId) === lease.sessionId) {
          kept.push(lease.leaseId);
          store.setLeaseLostAt(this.db, lease.leaseId, null);
        }
        // The gateway no longer has this session (it restarted): lost now, no grace.
        else store.setLeaseLostAt(this.db, lease.leaseId, now);
      }
      // A drained node that comes back holding nothing is a fresh node.
      if (leases.length === 0 && hello.leases.length === 0) store.setDraining(this.db, hello.node_id, false);
    });
    ws.serializeAttachment({
      ...attachment,
      nodeId: hello.node_id,
      wire: hello.v,
    } satisfies SocketAttachment);
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
    // The fence first, before any assignment: the gateway comes up paused when the queue is.
    const fence = readFence(this.db, parseShardName(this.queueName).queue);
    this.send(ws, {
      v: WIRE_VERSION,
      type: "welcome",
      queue: this.queueName,
      node_id: hello.node_id,
      kept_leases: kept,
      ping_interval_seconds: this.pingIntervalSeconds,
      fence,
    });
    const replay = fenceDelivery(fence, "replay", `adm_${crypto.randomUUID()}`, 0, hello.v);
    for (const message of replay.messages) this.send(ws, message);
    await this.processLostLeases();
    await this.dispatch();
    await this.armAlarm();
    try {
      await this.env.REGISTRY.getByName(REGISTRY_NAME).recordNode(this.queueName, hello.node_id);
    } catch (error) {
      // Only listings and drain-by-node use it; dispatch does not depend on it.
      console.warn(`QueueDO ${this.queueName}: registry did not record ${hello.node_id}:`, error);
    }
  }

  private async onCredit(nodeId: string, credit: CreditMessage): Promise<void> {
    store.addCredit(this.db, nodeId, credit.grant);
    if (credit.metrics) store.updateMetrics(this.db, nodeId, credit.metrics);
    await this.dispatch();
  }

  private async onProgress(ws: WebSocket, nodeId: string, progress: ProgressMessage): Promise<void> {
    if (progress.metrics) store.updateMetrics(this.db, nodeId, progress.metrics);
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
    // An artifact reference must point at this session's upload under this lease, nothing else.
    const parts = parseSessionId(sessionId);
    for (const [kind, ref] of [
      ["trajectory", message.trajectory_ref],
      ["completions", message.completions_ref],
    ] as const) {
      if (ref && (!parts || ref.key !== artifactKey(parts.batchId, sessionId, message.lease_id, kind))) {
        this.send(
          ws,
          errorFrame("invalid_message", `${kind}_ref.key: not the upload of this session and lease`),
        );
        return;
      }
    }
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
    const refs = {
      ...(message.trajectory_ref ? { trajectory: message.trajectory_ref } : {}),
      ...(message.completions_ref ? { completions: message.completions_ref } : {}),
    };
    return this.env.BATCH.getByName(batchId).submitResult(sessionId, message.lease_id, message.result, refs);
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
      if (!item) {
        // Nothing left here: idle gateways of this shard take work from sibling shards.
        if (store.pickGateway(this.db) && (await this.stealFromSiblings()) > 0) continue;
        return;
      }
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
        if (current && !socket) this.disconnect(current.nodeId, current.connId);
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
    if (attachment?.nodeId) this.disconnect(attachment.nodeId, attachment.connId);
  }

  /**
   * Marks the node disconnected (if `connId` is still its connection) and starts the grace period
   * of its leases: a reconnect within it reclaims them, after it they go back to the ledger.
   */
  private disconnect(nodeId: string, connId: string): void {
    const now = Date.now();
    if (!store.disconnectGateway(this.db, nodeId, connId, now)) return;
    store.startLeaseGrace(this.db, nodeId, now + this.leaseGraceMs);
    this.admins.failNode(nodeId, "gateway disconnected");
    this.ctx.waitUntil(this.armAlarm());
  }

  /** Sends a message in the socket's wire version (v1 gateways never see v2 fields). */
  private send(ws: WebSocket, message: ControlMessage): void {
    this.sendRaw(ws, JSON.stringify(forPeer(message, this.attachment(ws)?.wire ?? 1)));
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
