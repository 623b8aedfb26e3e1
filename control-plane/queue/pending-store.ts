/**
 * Pending sessions of one dispatcher shard (the `pending` table): enqueue, the dispatch order,
 * reservations while the ledger records an assignment.
 * Synchronous Drizzle queries: a run of them without an `await` in between commits atomically.
 *
 * @module
 */
import { and, asc, desc, eq, isNotNull, isNull, sql } from "drizzle-orm";
import type { SessionAssignment } from "../../protocol";
import type { PendingRow, QueueDb } from "./db";
import * as schema from "./schema";

/** Rows neither reserved by a dispatch pass nor lent to a sibling shard: this shard's to hand out. */
const NOT_HELD = and(isNull(schema.pending.reservedLease), isNull(schema.pending.loanToken));

/**
 * Adds sessions to the pending list. Idempotent by session id: a session already pending at the
 * same or a later attempt, or held under a lease of a later attempt or of the same attempt that is
 * not being handed back, is skipped. A lease whose grace has run out (`lost_at` passed) does not
 * hold its session: its ledger may already have requeued it at the same attempt (a session lost
 * before INITIALIZING keeps its attempt), and that enqueue can arrive before the ledger's answer to
 * `leaseLost`. A pending row of an earlier attempt (a copy lent to a sibling that never settled)
 * is replaced by the new attempt and is no longer lent. Returns how many were added or replaced.
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
        and(
          eq(schema.leases.sessionId, item.session_id),
          sql`(${schema.leases.attempt} > ${item.attempt} OR (${schema.leases.attempt} = ${item.attempt} AND (${schema.leases.lostAt} IS NULL OR ${schema.leases.lostAt} > ${now})))`,
        ),
      )
      .get();
    if (leased) continue;
    const row = {
      batchId: item.batch_id,
      attempt: item.attempt,
      priority: item.dispatch_priority,
      payload: JSON.stringify(item),
      enqueuedAt: now,
    };
    const inserted = db
      .insert(schema.pending)
      .values({ sessionId: item.session_id, ...row })
      .onConflictDoUpdate({
        target: schema.pending.sessionId,
        set: { ...row, loanToken: null, lentTo: null, lentUntil: null },
        setWhere: sql`${schema.pending.attempt} < ${item.attempt}`,
      })
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
    .where(NOT_HELD)
    .orderBy(desc(schema.pending.priority), asc(schema.pending.seq))
    .limit(1)
    .get();
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
 * After a restart no assignment is in flight, so every reservation is void (loans to siblings
 * are not: the thief may hold them, and they expire by themselves).
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
 * Pending sessions neither reserved by a dispatch pass nor lent to a sibling.
 *
 * @example
 * ```ts
 * unreservedPending(db) > 0; // work this shard could hand out or lend
 * ```
 */
export function unreservedPending(db: QueueDb): number {
  return db.select({ n: sql<number>`count(*)` }).from(schema.pending).where(NOT_HELD).get()?.n ?? 0;
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
