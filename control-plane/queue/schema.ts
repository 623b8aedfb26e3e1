/**
 * Tables of the dispatcher (one QueueDO per queue name). Socket identity lives in each socket's
 * attachment; everything else is here so it survives hibernation and restarts.
 *
 * @example
 * ```ts
 * const db = drizzle(ctx.storage, { schema });
 * ```
 *
 * @module
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/**
 * Sessions waiting for a gateway. `reserved_lease` is set while the dispatcher waits for the
 * ledger to record an assignment; `loan_token` while the row is lent to a sibling shard (work
 * stealing). Rows with either set are skipped by dispatch passes and by other loans.
 */
export const pending = sqliteTable(
  "pending",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    sessionId: text("session_id").notNull().unique(),
    batchId: text("batch_id").notNull(),
    attempt: integer("attempt").notNull(),
    priority: integer("priority").notNull(),
    /** JSON of the SessionAssignment sent to the gateway. */
    payload: text("payload").notNull(),
    enqueuedAt: integer("enqueued_at").notNull(),
    reservedLease: text("reserved_lease"),
    /** Token of the loan to a sibling shard that holds this row; the thief settles by it. */
    loanToken: text("loan_token"),
    /** Shard name of the sibling the row is lent to. */
    lentTo: text("lent_to"),
    /** When an unsettled loan returns the row to this shard's dispatch (ms since the epoch). */
    lentUntil: integer("lent_until"),
  },
  (t) => [
    index("pending_order_idx").on(t.reservedLease, t.loanToken, t.priority, t.seq),
    index("pending_loan_idx").on(t.loanToken),
  ],
);

/** Gateways that said hello; `conn_id` names the socket currently speaking for the node. */
export const gateways = sqliteTable("gateways", {
  nodeId: text("node_id").primaryKey(),
  connId: text("conn_id").notNull(),
  credit: integer("credit").notNull(),
  /** JSON of GatewayCapacity from the hello. */
  capacity: text("capacity").notNull(),
  connected: integer("connected", { mode: "boolean" }).notNull(),
  connectedAt: integer("connected_at").notNull(),
  disconnectedAt: integer("disconnected_at"),
  /** JSON of the last StageMetrics the gateway sent (on credit or progress). */
  metrics: text("metrics"),
  /** Assignments since the last metrics (upstream's `dispatch_reservations`). */
  reservations: integer("reservations").notNull().default(0),
  /** Drained: receives no new sessions, finishes the ones it holds. */
  draining: integer("draining", { mode: "boolean" }).notNull().default(false),
  /** Last frame received from the gateway (liveness, with the auto-response ping timestamp). */
  lastSeenAt: integer("last_seen_at"),
});

/**
 * Sessions in a gateway's hands. A lost lease goes back to the ledger, which re-enqueues the
 * session with its own copy of the assignment, so no payload is kept here.
 */
export const leases = sqliteTable(
  "leases",
  {
    leaseId: text("lease_id").primaryKey(),
    sessionId: text("session_id").notNull(),
    batchId: text("batch_id").notNull(),
    nodeId: text("node_id").notNull(),
    attempt: integer("attempt").notNull(),
    assignedAt: integer("assigned_at").notNull(),
    /** When the lease counts as lost (gateway gone past the grace); null while the gateway holds it. */
    lostAt: integer("lost_at"),
  },
  (t) => [index("leases_node_idx").on(t.nodeId), index("leases_session_idx").on(t.sessionId)],
);

/** Named counters (stale progress, stale results seen by the dispatcher, …). */
export const counters = sqliteTable("counters", {
  name: text("name").primaryKey(),
  value: integer("value").notNull(),
});

/**
 * The queue's inference fence (one row, `id = 1`): stored before any gateway is told, replayed to
 * every gateway in `welcome`. Each shard of a sharded queue keeps its own copy of the same state.
 */
export const fence = sqliteTable("fence", {
  id: integer("id").primaryKey(),
  paused: integer("paused", { mode: "boolean" }).notNull(),
  /** `drain` or `abort` while paused; null while running. */
  mode: text("mode"),
  policyVersion: text("policy_version"),
  fenceSeq: integer("fence_seq").notNull(),
  pausedAt: integer("paused_at"),
  updatedAt: integer("updated_at").notNull(),
});
export { eventOutbox } from "../events/outbox-schema";

/**
 * The last state event this shard sent per gateway (`gateway:<node>`) and for the fence
 * (`fence`): a change is announced once, and a gateway's credit and metrics at most every 2 s
 * (see `events.ts`).
 */
export const eventSnapshots = sqliteTable("event_snapshots", {
  name: text("name").primaryKey(),
  /** JSON of the fields whose every change is announced. */
  state: text("state").notNull(),
  /** JSON of the whole event data. */
  full: text("full").notNull(),
  at: integer("at").notNull(),
});
