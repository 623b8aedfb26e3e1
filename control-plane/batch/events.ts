/**
 * The ledger's state events (`GET /v1/events`): a `session` event for each status or stage change
 * of a session, and `batch` events that coalesce them. Every function is synchronous and writes
 * only to the ledger's `event_outbox`: call them inside the transaction of the change, and the
 * BatchDO's flusher sends them on (see `control-plane/events/outbox.ts`).
 *
 * @module
 */
import { eq, sql } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import { isTerminal, type SessionStatus } from "../../protocol";
import type { BatchEventData, SessionEventData } from "../events/kinds";
import { addEvent, newestEvent } from "../events/outbox";
import * as schema from "./schema";

/** The ledger's handle (as `store.BatchDb`, which cannot be imported here: store imports this module). */
type LedgerDb = DrizzleSqliteDODatabase<typeof schema>;

/**
 * The stage of a session for the dashboards: its status while a gateway holds it (ASSIGNED …
 * POST_RUNNING), else null (waiting, or ended).
 *
 * @example
 * ```ts
 * stageOf("RUNNING"); // "RUNNING"
 * stageOf("QUEUED"); // null
 * ```
 */
export function stageOf(status: SessionStatus): string | null {
  return status === "QUEUED" || isTerminal(status) ? null : status;
}

/**
 * Records a `session` event with the session as it is now (call after writing the change).
 *
 * @example
 * ```ts
 * recordSessionEvent(db, "b_1.0.0", Date.now());
 * ```
 */
export function recordSessionEvent(db: LedgerDb, sessionId: string, now: number): void {
  const row = db
    .select({
      batchId: schema.batch.batchId,
      taskId: schema.tasks.taskId,
      status: schema.sessions.status,
      nodeId: schema.sessions.nodeId,
      attempt: schema.sessions.attempt,
      reward: schema.results.reward,
      errorKind: schema.results.errorKind,
    })
    .from(schema.sessions)
    .innerJoin(schema.tasks, eq(schema.tasks.taskIndex, schema.sessions.taskIndex))
    .innerJoin(schema.batch, sql`1 = 1`)
    .leftJoin(schema.results, eq(schema.results.sessionId, schema.sessions.sessionId))
    .where(eq(schema.sessions.sessionId, sessionId))
    .get();
  if (!row) return;
  const data: SessionEventData = {
    batch_id: row.batchId,
    task_id: row.taskId,
    session_id: sessionId,
    status: row.status,
    stage: stageOf(row.status),
    node_id: row.nodeId,
    attempt: row.attempt,
    // A requeued session keeps no result: reward and error belong to an ended one only.
    reward: isTerminal(row.status) ? row.reward : null,
    error_kind: isTerminal(row.status) ? row.errorKind : null,
  };
  addEvent(db, "session", row.batchId, data, now);
}

/**
 * The batch as a `batch` event shows it, or null when no batch is stored.
 *
 * @example
 * ```ts
 * batchEventData(db)?.counts.COMPLETED;
 * ```
 */
export function batchEventData(db: LedgerDb): BatchEventData | null {
  const batch = db.select().from(schema.batch).get();
  if (!batch) return null;
  const grouped = db
    .select({ status: schema.sessions.status, n: sql<number>`count(*)` })
    .from(schema.sessions)
    .groupBy(schema.sessions.status)
    .all();
  const counts: Record<string, number> = {};
  let total = 0;
  let open = 0;
  for (const g of grouped) {
    counts[g.status] = g.n;
    total += g.n;
    if (!isTerminal(g.status)) open += g.n;
  }
  const mean = db.get<{ mean: number | null } | undefined>(
    sql`SELECT avg(reward) AS mean FROM results WHERE reward IS NOT NULL`,
  );
  return {
    batch_id: batch.batchId,
    status: batch.cancelledAt !== null ? "cancelled" : open === 0 ? "completed" : "running",
    counts,
    total,
    mean_reward: mean?.mean ?? null,
    created_at: batch.createdAt,
  };
}

/**
 * Records a `batch` event with the batch as it is now.
 *
 * @example
 * ```ts
 * recordBatchEvent(db, Date.now()); // after create or cancel
 * ```
 */
export function recordBatchEvent(db: LedgerDb, now: number): void {
  const data = batchEventData(db);
  if (data) addEvent(db, "batch", data.batch_id, data, now);
}

/**
 * Records one `batch` event after the session events waiting in the outbox, when the newest
 * waiting event is a session's: the batch's counts after all of them, once per flush rather than
 * once per transition.
 *
 * @example
 * ```ts
 * coalesceBatchEvent(db, Date.now()); // before the flusher reads the outbox
 * ```
 */
export function coalesceBatchEvent(db: LedgerDb, now: number): void {
  if (newestEvent(db)?.kind === "session") recordBatchEvent(db, now);
}
