/**
 * Leases of one dispatcher shard (the `leases` table): sessions in a gateway's hands, their grace
 * after a disconnect, and the sessions withdrawn because they ended on the ledger.
 * Synchronous Drizzle queries: a run of them without an `await` in between commits atomically.
 *
 * @module
 */
import { and, eq, inArray, isNotNull, isNull, lte, min, sql } from "drizzle-orm";
import { idChunks } from "../sql-chunks";
import { observeDispatch } from "./counter-store";
import type { LeaseRow, PendingRow, QueueDb } from "./db";
import * as schema from "./schema";

/**
 * Turns a reserved pending session into a lease held by `nodeId`, spends one credit, and records
 * how long the session waited in this shard's pending list (the dispatch-latency histogram).
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
  observeDispatch(db, now - item.enqueuedAt);
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
 * Withdraws sessions that ended on the ledger: drops them from pending and removes their leases;
 * an item marked `superseded` removes only its lease (the session runs on under a later one).
 * Returns the leases that a connected gateway must be told to cancel.
 *
 * @example
 * ```ts
 * const cancelled = withdrawSessions(db, [{ session_id: "b.0.0", lease_id: "l_…" }]);
 * ```
 */
export function withdrawSessions(
  db: QueueDb,
  items: { session_id: string; lease_id: string | null; superseded?: boolean }[],
): LeaseRow[] {
  const leases: LeaseRow[] = [];
  // A superseded lease ends alone: the session goes on under its later lease (maybe on this shard).
  const only = items.filter((i) => i.superseded && i.lease_id !== null).map((i) => i.lease_id as string);
  for (const ids of idChunks(only)) {
    const found = db.select().from(schema.leases).where(inArray(schema.leases.leaseId, ids)).all();
    if (found.length > 0) db.delete(schema.leases).where(inArray(schema.leases.leaseId, ids)).run();
    leases.push(...found);
  }
  items = items.filter((i) => !i.superseded);
  // In chunks: a cancelled batch withdraws all its sessions at once (SQLite's parameter limit).
  for (const ids of idChunks(items.map((i) => i.session_id))) {
    db.delete(schema.pending).where(inArray(schema.pending.sessionId, ids)).run();
    const found = db.select().from(schema.leases).where(inArray(schema.leases.sessionId, ids)).all();
    if (found.length > 0)
      db.delete(schema.leases)
        .where(
          inArray(
            schema.leases.leaseId,
            found.map((l) => l.leaseId),
          ),
        )
        .run();
    leases.push(...found);
  }
  return leases;
}
