/**
 * Loans of pending sessions to sibling shards (work stealing), in the `pending` table's loan
 * columns: a lent row stays here, skipped by dispatch, until the thief settles it (then it is
 * deleted) or `lent_until` passes (then the ledger decides: dispatched here again if the session
 * is still queued there, deleted if it runs or ran elsewhere).
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

/** A lent row whose loan ran out unsettled, as {@link expiredLoans} lists it. */
export interface ExpiredLoan {
  sessionId: string;
  batchId: string;
  attempt: number;
  loanToken: string;
}

/**
 * The lent rows whose `lent_until` has passed without the thief settling them (it failed after
 * taking them, or before): whether each goes back to this shard's dispatch is the ledger's call
 * (see `reclaimExpiredLoans`).
 *
 * @example
 * ```ts
 * expiredLoans(db, Date.now()); // [{ sessionId, batchId, attempt, loanToken }]
 * ```
 */
export function expiredLoans(db: QueueDb, now: number, limit = 100): ExpiredLoan[] {
  return db
    .select({
      sessionId: schema.pending.sessionId,
      batchId: schema.pending.batchId,
      attempt: schema.pending.attempt,
      loanToken: schema.pending.loanToken,
    })
    .from(schema.pending)
    .where(and(isNotNull(schema.pending.loanToken), lte(schema.pending.lentUntil, now)))
    .orderBy(asc(schema.pending.lentUntil))
    .limit(limit)
    .all()
    .map((r) => ({ ...r, loanToken: r.loanToken! }));
}

/**
 * Ends an expired loan: `release` makes the row this shard's to dispatch again, `drop` deletes it
 * (the session runs, or ran, elsewhere). Only while the row is still lent under `token`: a settle
 * or a steal-back that came first wins. Returns whether the row changed.
 *
 * @example
 * ```ts
 * endExpiredLoan(db, "b_1.0.0", "loan_…", "release"); // true
 * ```
 */
export function endExpiredLoan(
  db: QueueDb,
  sessionId: string,
  token: string,
  how: "release" | "drop",
): boolean {
  const where = and(eq(schema.pending.sessionId, sessionId), eq(schema.pending.loanToken, token));
  const changed =
    how === "release"
      ? db.update(schema.pending).set(NOT_LENT).where(where).returning({ seq: schema.pending.seq }).all()
      : db.delete(schema.pending).where(where).returning({ seq: schema.pending.seq }).all();
  return changed.length > 0;
}
