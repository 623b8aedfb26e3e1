/**
 * The no-gateway limit: when a session's queue (every shard of it) has had no gateway connected
 * for `POLAR_NO_GATEWAY_SECONDS` (default `LIMITS.noGatewaySeconds`), counted from the later of the
 * session entering QUEUED and the last moment a gateway was connected, the session ends TIMEOUT
 * with `timeout_source: no_gateway`. The dispatchers know which gateways are connected, so the
 * ledger asks them when a session's check comes due (`QueueDO.gatewayPresence`), then ends the
 * session or re-arms the check one limit after a gateway was last there. Functions here are
 * synchronous; the asking happens in `BatchDO.alarm`.
 *
 * @module
 */
import { and, eq, isNotNull, isNull, lte } from "drizzle-orm";
import type { GatewayPresence } from "../queue/stats";
import { afterTerminal, TaskCache, timeOutSessions, type Withdrawal } from "./lifecycle";
import * as schema from "./schema";
import { OPEN_SESSION } from "./statuses";
import type { BatchDb } from "./store";
import { queuedAtOf, waitingTimerAt } from "./waiting";

type SessionRow = typeof schema.sessions.$inferSelect;

/** Open sessions before INITIALIZING whose timer is due: no-gateway checks (queue timeouts are ended first). */
function dueChecks(db: BatchDb, now: number): SessionRow[] {
  return db
    .select()
    .from(schema.sessions)
    .where(
      and(
        OPEN_SESSION,
        isNull(schema.sessions.startedAt),
        isNotNull(schema.sessions.deadlineAt),
        lte(schema.sessions.deadlineAt, now),
      ),
    )
    .all();
}

/**
 * Queues with a no-gateway check due now, for the ledger to ask their dispatchers.
 *
 * @example
 * ```ts
 * for (const queue of queuesToCheck(db, Date.now())) await presenceOf(queue);
 * ```
 */
export function queuesToCheck(db: BatchDb, now: number): string[] {
  const tasks = new TaskCache(db);
  return [...new Set(dueChecks(db, now).map((s) => tasks.get(s.taskIndex).row.queue))];
}

/**
 * Combines the presence reported by each shard of a queue: a gateway on any shard serves them all
 * (idle shards steal from their siblings).
 *
 * @example
 * ```ts
 * combinePresence([{ connected: false, last_connected_at: 5 }, { connected: true, last_connected_at: 9 }]);
 * // { connected: true, last_connected_at: 9 }
 * ```
 */
export function combinePresence(shards: GatewayPresence[]): GatewayPresence {
  let last: number | null = null;
  for (const p of shards) {
    if (p.last_connected_at !== null)
      last = last === null ? p.last_connected_at : Math.max(last, p.last_connected_at);
  }
  return { connected: shards.some((p) => p.connected), last_connected_at: last };
}

/**
 * Applies the queue's gateway presence to its due checks: sessions whose queue has had no gateway
 * for `limitMs` end as TIMEOUT (`timeout_source: no_gateway`); the others are checked again one
 * limit after a gateway was last there. Returns what the queue must withdraw.
 *
 * @example
 * ```ts
 * applyPresence(db, batchId, "default", { connected: false, last_connected_at: null }, 3_600_000, Date.now());
 * ```
 */
export function applyPresence(
  db: BatchDb,
  batchId: string,
  queue: string,
  presence: GatewayPresence,
  limitMs: number,
  now: number,
): Withdrawal[] {
  const tasks = new TaskCache(db);
  const lastServed = presence.connected ? now : presence.last_connected_at;
  const out: Withdrawal[] = [];
  const ended = new Set<number>();
  for (const session of dueChecks(db, now)) {
    const { row, spec } = tasks.get(session.taskIndex);
    if (row.queue !== queue) continue;
    const queuedAt = queuedAtOf(session);
    const since = Math.max(queuedAt, lastServed ?? queuedAt);
    if (now - since >= limitMs) {
      const seconds = Math.round(limitMs / 1000);
      const withdrawn = timeOutSessions(
        db,
        batchId,
        tasks,
        [session],
        `no gateway was connected to queue '${queue}' for ${seconds} s (POLAR_NO_GATEWAY_SECONDS); the session never ran`,
        "no_gateway",
        now,
      );
      out.push(...withdrawn);
      ended.add(session.taskIndex);
      continue;
    }
    db.update(schema.sessions)
      .set({ deadlineAt: waitingTimerAt(spec, queuedAt, since + limitMs) })
      .where(eq(schema.sessions.sessionId, session.sessionId))
      .run();
  }
  for (const taskIndex of ended) out.push(...afterTerminal(db, taskIndex, now));
  return out;
}

/**
 * Postpones the due checks of `queue` to `until` (its dispatchers could not be asked).
 *
 * @example
 * ```ts
 * deferChecks(db, "default", Date.now() + 30_000, Date.now());
 * ```
 */
export function deferChecks(db: BatchDb, queue: string, until: number, now: number): void {
  const tasks = new TaskCache(db);
  for (const session of dueChecks(db, now)) {
    const { row, spec } = tasks.get(session.taskIndex);
    if (row.queue !== queue) continue;
    db.update(schema.sessions)
      .set({ deadlineAt: waitingTimerAt(spec, queuedAtOf(session), until) })
      .where(eq(schema.sessions.sessionId, session.sessionId))
      .run();
  }
}
