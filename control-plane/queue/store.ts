/**
 * Repository functions of the dispatcher: synchronous Drizzle queries over the QueueDO's SQLite.
 * Runs of these calls without an `await` in between commit atomically.
 *
 * @module
 */
import { and, asc, desc, eq, inArray, isNotNull, isNull, lte, min, sql } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import type { GatewayCapacity, SessionAssignment, StageMetrics } from "../../protocol";
import * as schema from "./schema";
import { type GatewayLoad, pickBest } from "./scoring";

/** The dispatcher's Drizzle handle. */
export type QueueDb = DrizzleSqliteDODatabase<typeof schema>;
export type PendingRow = typeof schema.pending.$inferSelect;
export type GatewayRow = typeof schema.gateways.$inferSelect;
export type LeaseRow = typeof schema.leases.$inferSelect;

/**
 * Upper bound of a gateway's unused credit, so a buggy gateway cannot claim the whole queue at once.
 *
 * @example
 * ```ts
 * Math.min(hello.credit, MAX_GATEWAY_CREDIT);
 * ```
 */
export const MAX_GATEWAY_CREDIT = 4096;

/** Counters kept by the dispatcher. */
export interface QueueCounters {
  stale_progress: number;
  stale_results: number;
  duplicate_results: number;
  requeued_leases: number;
  /** Sessions this shard took from sibling shards for its idle gateways. */
  stolen_sessions: number;
  /** Sessions sibling shards took from this one. */
  lent_sessions: number;
}

/**
 * Adds sessions to the pending list. Idempotent by session id: a session already pending, or held
 * under a lease of the same or a later attempt, is skipped. Returns how many were added.
 *
 * @example
 * ```ts
 * enqueueSessions(db, [assignment], Date.now()); // 1, then 0 on a replay
 * ```
 */
export function enqueueSessions(db: QueueDb, items: SessionAssignment[], now: number): number {
  let added = 0;
  for (const item of items) {
    const leased = db
      .select({ attempt: schema.leases.attempt })
      .from(schema.leases)
      .where(
        and(eq(schema.leases.sessionId, item.session_id), sql`${schema.leases.attempt} >= ${item.attempt}`),
      )
      .get();
    if (leased) continue;
    const inserted = db
      .insert(schema.pending)
      .values({
        sessionId: item.session_id,
        batchId: item.batch_id,
        attempt: item.attempt,
        priority: item.dispatch_priority,
        payload: JSON.stringify(item),
        enqueuedAt: now,
      })
      .onConflictDoNothing({ target: schema.pending.sessionId })
      .returning({ seq: schema.pending.seq })
      .all();
    added += inserted.length;
  }
  return added;
}

/**
 * Next unreserved pending session: highest priority first, then first in.
 *
 * @example
 * ```ts
 * const item = nextPending(db); // highest priority, oldest first
 * ```
 */
export function nextPending(db: QueueDb): PendingRow | undefined {
  return db
    .select()
    .from(schema.pending)
    .where(isNull(schema.pending.reservedLease))
    .orderBy(desc(schema.pending.priority), asc(schema.pending.seq))
    .limit(1)
    .get();
}

/**
 * The gateway to receive the next session: among connected, non-draining gateways with credit,
 * the best by upstream's stage-pressure score (see `scoring.ts`).
 *
 * @example
 * ```ts
 * const gateway = pickGateway(db); if (!gateway) return; // nobody has credit
 * ```
 */
export function pickGateway(db: QueueDb): GatewayRow | undefined {
  const rows = db
    .select()
    .from(schema.gateways)
    .where(
      and(
        eq(schema.gateways.connected, true),
        eq(schema.gateways.draining, false),
        sql`${schema.gateways.credit} > 0`,
      ),
    )
    .all();
  if (rows.length <= 1) return rows[0];
  const leaseCounts = new Map(
    db
      .select({ nodeId: schema.leases.nodeId, n: sql<number>`count(*)` })
      .from(schema.leases)
      .groupBy(schema.leases.nodeId)
      .all()
      .map((r) => [r.nodeId, r.n]),
  );
  const loads: GatewayLoad[] = rows.map((r) => ({
    nodeId: r.nodeId,
    capacity: JSON.parse(r.capacity) as GatewayCapacity,
    metrics: r.metrics ? (JSON.parse(r.metrics) as StageMetrics) : null,
    reservations: r.reservations,
    leases: leaseCounts.get(r.nodeId) ?? 0,
  }));
  const best = pickBest(loads);
  return rows.find((r) => r.nodeId === best?.nodeId);
}

/**
 * Stores a gateway's latest stage metrics and clears its reservations (as upstream's heartbeat).
 *
 * @example
 * ```ts
 * updateMetrics(db, "node-a", credit.metrics);
 * ```
 */
export function updateMetrics(db: QueueDb, nodeId: string, metrics: StageMetrics): void {
  db.update(schema.gateways)
    .set({ metrics: JSON.stringify(metrics), reservations: 0 })
    .where(eq(schema.gateways.nodeId, nodeId))
    .run();
}

/**
 * Records that a frame arrived from `nodeId` (liveness).
 *
 * @example
 * ```ts
 * touchGateway(db, "node-a", Date.now());
 * ```
 */
export function touchGateway(db: QueueDb, nodeId: string, now: number): void {
  db.update(schema.gateways).set({ lastSeenAt: now }).where(eq(schema.gateways.nodeId, nodeId)).run();
}

/**
 * Sets or clears a gateway's draining flag; false when the node is unknown.
 *
 * @example
 * ```ts
 * setDraining(db, "node-a", true);
 * ```
 */
export function setDraining(db: QueueDb, nodeId: string, draining: boolean): boolean {
  return (
    db
      .update(schema.gateways)
      .set({ draining })
      .where(eq(schema.gateways.nodeId, nodeId))
      .returning({ nodeId: schema.gateways.nodeId })
      .all().length > 0
  );
}

/**
 * Starts the grace period of every lease `nodeId` holds: they count as lost at `at`.
 *
 * @example
 * ```ts
 * startLeaseGrace(db, "node-a", Date.now() + 30_000);
 * ```
 */
export function startLeaseGrace(db: QueueDb, nodeId: string, at: number): void {
  db.update(schema.leases)
    .set({ lostAt: at })
    .where(and(eq(schema.leases.nodeId, nodeId), isNull(schema.leases.lostAt)))
    .run();
}

/**
 * Marks one lease lost at `at` (`null` = held again).
 *
 * @example
 * ```ts
 * setLeaseLostAt(db, "l_…", null); // the gateway reclaimed it
 * ```
 */
export function setLeaseLostAt(db: QueueDb, leaseId: string, at: number | null): void {
  db.update(schema.leases).set({ lostAt: at }).where(eq(schema.leases.leaseId, leaseId)).run();
}

/**
 * Leases whose grace has run out.
 *
 * @example
 * ```ts
 * for (const lease of dueLostLeases(db, Date.now())) await ledger.leaseLost(…);
 * ```
 */
export function dueLostLeases(db: QueueDb, now: number): LeaseRow[] {
  return db
    .select()
    .from(schema.leases)
    .where(and(isNotNull(schema.leases.lostAt), lte(schema.leases.lostAt, now)))
    .all();
}

/**
 * Earliest `lost_at` among leases, or null.
 *
 * @example
 * ```ts
 * nextLostAt(db); // when the alarm must run
 * ```
 */
export function nextLostAt(db: QueueDb): number | null {
  return (
    db
      .select({ at: min(schema.leases.lostAt) })
      .from(schema.leases)
      .get()?.at ?? null
  );
}

/**
 * Withdraws sessions that ended on the ledger: drops them from pending and removes their leases.
 * Returns the leases that a connected gateway must be told to cancel.
 *
 * @example
 * ```ts
 * const cancelled = withdrawSessions(db, [{ session_id: "b.0.0", lease_id: "l_…" }]);
 * ```
 */
export function withdrawSessions(
  db: QueueDb,
  items: { session_id: string; lease_id: string | null }[],
): LeaseRow[] {
  const ids = items.map((i) => i.session_id);
  if (ids.length === 0) return [];
  db.delete(schema.pending).where(inArray(schema.pending.sessionId, ids)).run();
  const leases = db.select().from(schema.leases).where(inArray(schema.leases.sessionId, ids)).all();
  if (leases.length > 0)
    db.delete(schema.leases)
      .where(
        inArray(
          schema.leases.leaseId,
          leases.map((l) => l.leaseId),
        ),
      )
      .run();
  return leases;
}

/**
 * Marks a pending session as being assigned under `leaseId` (skipped by other passes).
 *
 * @example
 * ```ts
 * reservePending(db, item.sessionId, leaseId);
 * ```
 */
export function reservePending(db: QueueDb, sessionId: string, leaseId: string): void {
  db.update(schema.pending)
    .set({ reservedLease: leaseId })
    .where(eq(schema.pending.sessionId, sessionId))
    .run();
}

/**
 * Returns a reserved session to the pending list.
 *
 * @example
 * ```ts
 * unreservePending(db, item.sessionId); // ledger call failed: retry later
 * ```
 */
export function unreservePending(db: QueueDb, sessionId: string): void {
  db.update(schema.pending).set({ reservedLease: null }).where(eq(schema.pending.sessionId, sessionId)).run();
}

/**
 * After a restart no assignment is in flight, so every reservation is void.
 *
 * @example
 * ```ts
 * releaseAllReservations(db); // in the constructor
 * ```
 */
export function releaseAllReservations(db: QueueDb): number {
  return db
    .update(schema.pending)
    .set({ reservedLease: null })
    .where(isNotNull(schema.pending.reservedLease))
    .returning({ seq: schema.pending.seq })
    .all().length;
}

/**
 * Drops a pending session the ledger will not dispatch (finished or unknown).
 *
 * @example
 * ```ts
 * dropPending(db, item.sessionId); // the ledger says it is finished
 * ```
 */
export function dropPending(db: QueueDb, sessionId: string): void {
  db.delete(schema.pending).where(eq(schema.pending.sessionId, sessionId)).run();
}

/**
 * Turns a reserved pending session into a lease held by `nodeId` and spends one credit.
 *
 * @example
 * ```ts
 * confirmAssignment(db, item, leaseId, "node-a", Date.now());
 * ```
 */
export function confirmAssignment(
  db: QueueDb,
  item: PendingRow,
  leaseId: string,
  nodeId: string,
  now: number,
): void {
  db.insert(schema.leases)
    .values({
      leaseId,
      sessionId: item.sessionId,
      batchId: item.batchId,
      nodeId,
      attempt: item.attempt,
      assignedAt: now,
      payload: item.payload,
    })
    .run();
  db.delete(schema.pending).where(eq(schema.pending.sessionId, item.sessionId)).run();
  db.update(schema.gateways)
    .set({
      credit: sql`max(${schema.gateways.credit} - 1, 0)`,
      reservations: sql`${schema.gateways.reservations} + 1`,
    })
    .where(eq(schema.gateways.nodeId, nodeId))
    .run();
}

/**
 * A gateway row by node id.
 *
 * @example
 * ```ts
 * getGateway(db, "node-a")?.credit;
 * ```
 */
export function getGateway(db: QueueDb, nodeId: string): GatewayRow | undefined {
  return db.select().from(schema.gateways).where(eq(schema.gateways.nodeId, nodeId)).get();
}

/**
 * All gateway rows.
 *
 * @example
 * ```ts
 * listGateways(db).filter((g) => g.connected);
 * ```
 */
export function listGateways(db: QueueDb): GatewayRow[] {
  return db.select().from(schema.gateways).orderBy(asc(schema.gateways.nodeId)).all();
}

/**
 * Registers (or re-registers) a gateway under connection `connId` with a fresh credit.
 *
 * @example
 * ```ts
 * upsertGateway(db, hello.node_id, connId, hello.credit, hello.capacity, Date.now());
 * ```
 */
export function upsertGateway(
  db: QueueDb,
  nodeId: string,
  connId: string,
  credit: number,
  capacity: GatewayCapacity,
  now: number,
): void {
  const values = {
    connId,
    credit: Math.min(credit, MAX_GATEWAY_CREDIT),
    capacity: JSON.stringify(capacity),
    connected: true,
    connectedAt: now,
    disconnectedAt: null,
    lastSeenAt: now,
    reservations: 0,
  };
  db.insert(schema.gateways)
    .values({ nodeId, ...values })
    .onConflictDoUpdate({ target: schema.gateways.nodeId, set: values })
    .run();
}

/**
 * Adds `grant` to a gateway's credit (capped at MAX_GATEWAY_CREDIT).
 *
 * @example
 * ```ts
 * addCredit(db, "node-a", 2);
 * ```
 */
export function addCredit(db: QueueDb, nodeId: string, grant: number): void {
  db.update(schema.gateways)
    .set({ credit: sql`min(${schema.gateways.credit} + ${grant}, ${MAX_GATEWAY_CREDIT})` })
    .where(eq(schema.gateways.nodeId, nodeId))
    .run();
}

/**
 * Marks a gateway disconnected (credit 0) if `connId` is still its current, connected connection;
 * a replaced socket closing late must not disconnect its successor. Leases stay for a reconnect.
 * True when this call disconnected it.
 *
 * @example
 * ```ts
 * disconnectGateway(db, "node-a", connId, Date.now());
 * ```
 */
export function disconnectGateway(db: QueueDb, nodeId: string, connId: string, now: number): boolean {
  return (
    db
      .update(schema.gateways)
      .set({ connected: false, credit: 0, disconnectedAt: now })
      .where(
        and(
          eq(schema.gateways.nodeId, nodeId),
          eq(schema.gateways.connId, connId),
          eq(schema.gateways.connected, true),
        ),
      )
      .returning({ nodeId: schema.gateways.nodeId })
      .all().length > 0
  );
}

/**
 * A lease by id.
 *
 * @example
 * ```ts
 * const lease = findLease(db, message.lease_id);
 * ```
 */
export function findLease(db: QueueDb, leaseId: string): LeaseRow | undefined {
  return db.select().from(schema.leases).where(eq(schema.leases.leaseId, leaseId)).get();
}

/**
 * Leases held by `nodeId`.
 *
 * @example
 * ```ts
 * leasesOfNode(db, "node-a").map((l) => l.leaseId);
 * ```
 */
export function leasesOfNode(db: QueueDb, nodeId: string): LeaseRow[] {
  return db.select().from(schema.leases).where(eq(schema.leases.nodeId, nodeId)).all();
}

/**
 * Removes a lease (its session reported a result).
 *
 * @example
 * ```ts
 * deleteLease(db, lease.leaseId);
 * ```
 */
export function deleteLease(db: QueueDb, leaseId: string): void {
  db.delete(schema.leases).where(eq(schema.leases.leaseId, leaseId)).run();
}

/**
 * Adds `by` (default one) to counter `name`.
 *
 * @example
 * ```ts
 * bumpCounter(db, "stale_progress");
 * ```
 */
export function bumpCounter(db: QueueDb, name: keyof QueueCounters, by = 1): void {
  db.insert(schema.counters)
    .values({ name, value: by })
    .onConflictDoUpdate({
      target: schema.counters.name,
      set: { value: sql`${schema.counters.value} + ${by}` },
    })
    .run();
}

/**
 * All counters, zero when never bumped.
 *
 * @example
 * ```ts
 * readCounters(db).stale_results;
 * ```
 */
export function readCounters(db: QueueDb): QueueCounters {
  const out: QueueCounters = {
    stale_progress: 0,
    stale_results: 0,
    duplicate_results: 0,
    requeued_leases: 0,
    stolen_sessions: 0,
    lent_sessions: 0,
  };
  for (const row of db.select().from(schema.counters).all()) {
    if (row.name in out) out[row.name as keyof QueueCounters] = row.value;
  }
  return out;
}

/**
 * Row counts of the pending list and the lease table.
 *
 * @example
 * ```ts
 * sizes(db); // { pending: 3, leases: 1 }
 * ```
 */
export function sizes(db: QueueDb): { pending: number; leases: number } {
  const pending = db.select({ n: sql<number>`count(*)` }).from(schema.pending).get()?.n ?? 0;
  const leases = db.select({ n: sql<number>`count(*)` }).from(schema.leases).get()?.n ?? 0;
  return { pending, leases };
}

/** Prefix of `reserved_lease` for rows lent to a sibling shard (`steal:<expiresAt>:<thief>`). */
const STEAL_PREFIX = "steal:";

/**
 * Sessions lent to a sibling shard: the token to settle them with and their SessionAssignment
 * JSON (text, because an RPC return type must not contain `unknown`, and it is stored as text).
 */
export interface SessionLoan {
  token: string;
  payloads: string[];
}

/**
 * Lends up to `k` unreserved pending sessions (dispatch order) to sibling shard `thief` until
 * `expiresAt`: they are reserved under a steal token, skipped by this shard's dispatch, and
 * deleted when the thief settles them. Returns the token and the sessions.
 *
 * @example
 * ```ts
 * const { token, items } = lendPending(db, "default#1", 4, Date.now() + 60_000);
 * ```
 */
export function lendPending(db: QueueDb, thief: string, k: number, expiresAt: number): SessionLoan {
  const token = `${STEAL_PREFIX}${expiresAt}:${thief}`;
  const rows = db
    .select({ sessionId: schema.pending.sessionId, payload: schema.pending.payload })
    .from(schema.pending)
    .where(isNull(schema.pending.reservedLease))
    .orderBy(desc(schema.pending.priority), asc(schema.pending.seq))
    .limit(k)
    .all();
  if (rows.length === 0) return { token, payloads: [] };
  db.update(schema.pending)
    .set({ reservedLease: token })
    .where(
      inArray(
        schema.pending.sessionId,
        rows.map((r) => r.sessionId),
      ),
    )
    .run();
  return { token, payloads: rows.map((r) => r.payload) };
}

/**
 * Deletes the sessions lent under `token` that the thief has taken over. Returns how many.
 *
 * @example
 * ```ts
 * settleLent(db, token, ["b_1.0.0"]); // 1
 * ```
 */
export function settleLent(db: QueueDb, token: string, sessionIds: string[]): number {
  if (sessionIds.length === 0) return 0;
  return db
    .delete(schema.pending)
    .where(and(eq(schema.pending.reservedLease, token), inArray(schema.pending.sessionId, sessionIds)))
    .returning({ seq: schema.pending.seq })
    .all().length;
}

/**
 * Takes in sessions stolen from a sibling (after `lendPending` there). A session this shard still
 * holds as lent to someone (it went round the shards back here before that loan was settled) is
 * taken back: its loan token is cleared, so settling that loan no longer deletes it here, while
 * the lender of this steal deletes its copy — exactly one shard keeps it. Returns how many rows
 * are now pending here because of this call.
 *
 * @example
 * ```ts
 * adoptStolen(db, items, Date.now());
 * ```
 */
export function adoptStolen(db: QueueDb, items: SessionAssignment[], now: number): number {
  let adopted = 0;
  for (const item of items) {
    const reclaimed = db
      .update(schema.pending)
      .set({ reservedLease: null })
      .where(
        and(
          eq(schema.pending.sessionId, item.session_id),
          sql`${schema.pending.reservedLease} LIKE ${`${STEAL_PREFIX}%`}`,
        ),
      )
      .returning({ seq: schema.pending.seq })
      .all().length;
    adopted += reclaimed > 0 ? reclaimed : enqueueSessions(db, [item], now);
  }
  return adopted;
}

/**
 * Returns lent sessions whose thief never settled them (it failed mid-steal) to the pending list.
 *
 * @example
 * ```ts
 * releaseExpiredLoans(db, Date.now()); // number released
 * ```
 */
export function releaseExpiredLoans(db: QueueDb, now: number): number {
  const lent = db
    .select({ sessionId: schema.pending.sessionId, token: schema.pending.reservedLease })
    .from(schema.pending)
    .where(sql`${schema.pending.reservedLease} LIKE ${`${STEAL_PREFIX}%`}`)
    .all();
  const expired = lent.filter((r) => Number(r.token?.slice(STEAL_PREFIX.length).split(":")[0]) <= now);
  if (expired.length === 0) return 0;
  db.update(schema.pending)
    .set({ reservedLease: null })
    .where(
      inArray(
        schema.pending.sessionId,
        expired.map((r) => r.sessionId),
      ),
    )
    .run();
  return expired.length;
}

/**
 * Unused credit of the gateways that may receive sessions (connected, not draining).
 *
 * @example
 * ```ts
 * spareCredit(db); // how many sessions this shard could hand out now
 * ```
 */
export function spareCredit(db: QueueDb): number {
  return (
    db
      .select({ n: sql<number>`coalesce(sum(${schema.gateways.credit}), 0)` })
      .from(schema.gateways)
      .where(and(eq(schema.gateways.connected, true), eq(schema.gateways.draining, false)))
      .get()?.n ?? 0
  );
}

/**
 * Pending sessions not reserved by a dispatch pass or lent to a sibling.
 *
 * @example
 * ```ts
 * unreservedPending(db) > 0; // work this shard could hand out or lend
 * ```
 */
export function unreservedPending(db: QueueDb): number {
  return (
    db
      .select({ n: sql<number>`count(*)` })
      .from(schema.pending)
      .where(isNull(schema.pending.reservedLease))
      .get()?.n ?? 0
  );
}
