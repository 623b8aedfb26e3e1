/**
 * Loans of pending sessions to sibling shards (work stealing), in the `pending` table's loan
 * columns: a lent row stays here, skipped by dispatch, until the thief settles it (then it is
 * deleted) or `lent_until` passes (then it is dispatched here again).
 *
 * @module
 */
import { and, asc, desc, eq, inArray, isNotNull, isNull, lte } from "drizzle-orm";
import type { SessionAssignment } from "../../protocol";
import { idChunks } from "../sql-chunks";
import type { QueueDb } from "./db";
import { enqueueSessions } from "./pending-store";
import * as schema from "./schema";

/** A lent row's loan columns cleared: it is this shard's to dispatch again. */
const NOT_LENT = { loanToken: null, lentTo: null, lentUntil: null } as const;

/**
 * Sessions lent to a sibling shard: the token to settle them with and their SessionAssignment
 * JSON (text, because an RPC return type must not contain `unknown`, and it is stored as text).
 *
 * @example
 * ```ts
 * const loan: SessionLoan = { token: "loan_…", payloads: [JSON.stringify(assignment)] };
 * ```
 */
export interface SessionLoan {
  token: string;
  payloads: string[];
}

/**
 * Lends up to `k` pending sessions nobody reserved (dispatch order) to sibling shard `thief`
 * until `lentUntil`: they are skipped by this shard's dispatch, and deleted when the thief settles
 * them. Returns the token and the sessions.
 *
 * @example
 * ```ts
 * const { token, payloads } = lendPending(db, "default#1", 4, Date.now() + 60_000);
 * ```
 */
export function lendPending(db: QueueDb, thief: string, k: number, lentUntil: number): SessionLoan {
  const token = `loan_${crypto.randomUUID()}`;
  const rows = db
    .select({ sessionId: schema.pending.sessionId, payload: schema.pending.payload })
    .from(schema.pending)
    .where(and(isNull(schema.pending.reservedLease), isNull(schema.pending.loanToken)))
    .orderBy(desc(schema.pending.priority), asc(schema.pending.seq))
    .limit(k)
    .all();
  if (rows.length === 0) return { token, payloads: [] };
  for (const ids of idChunks(rows.map((r) => r.sessionId)))
    db.update(schema.pending)
      .set({ loanToken: token, lentTo: thief, lentUntil })
      .where(inArray(schema.pending.sessionId, ids))
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
  if (sessionIds.length === 0 || token === "") return 0;
  let deleted = 0;
  for (const ids of idChunks(sessionIds))
    deleted += db
      .delete(schema.pending)
      .where(and(eq(schema.pending.loanToken, token), inArray(schema.pending.sessionId, ids)))
      .returning({ seq: schema.pending.seq })
      .all().length;
  return deleted;
}

/**
 * Takes in sessions stolen from a sibling (after `lendPending` there). A session this shard still
 * holds as lent to someone (it went round the shards back here before that loan was settled) is
 * taken back: its loan is cleared, so settling that loan no longer deletes it here, while the
 * lender of this steal deletes its copy — exactly one shard keeps it. Returns how many rows are
 * now pending here because of this call.
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
      .set(NOT_LENT)
      .where(and(eq(schema.pending.sessionId, item.session_id), isNotNull(schema.pending.loanToken)))
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
  return db
    .update(schema.pending)
    .set(NOT_LENT)
    .where(and(isNotNull(schema.pending.loanToken), lte(schema.pending.lentUntil, now)))
    .returning({ seq: schema.pending.seq })
    .all().length;
}
