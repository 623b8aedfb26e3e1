/**
 * Work stealing between the shards of one queue: a shard whose gateways are idle takes pending
 * sessions from its siblings. The lender keeps them, lent (see `loan-store`), until the thief
 * settles them. A loan never settled within STEAL_LOAN_MS is resolved by the ledger: the lender
 * dispatches its copy again only if the session is still queued at that attempt there; one the
 * thief (or anyone) has dispatched is dropped, so a stale copy does not start beside the running
 * one. The ledger's leases fence the rare double dispatch that can still follow (a thief that
 * stored the sessions but had not dispatched them when the loan ran out): the later assignment
 * supersedes the earlier one, whose gateway is told to stop.
 *
 * @module
 */
import type { SessionAssignment } from "../../protocol";
import type { Shard } from "./shard";
import * as store from "./store";

/** How long sessions lent to a sibling shard stay reserved if the thief never settles them. */
const STEAL_LOAN_MS = 60_000;
/** After a steal round found nothing, credit messages do not trigger another for this long (a poke does). */
const STEAL_IDLE_BACKOFF_MS = 1000;
/**
 * A shard holding undispatched sessions reminds its siblings this often (backstop of the pokes).
 *
 * @example
 * ```ts
 * times.push(Date.now() + STEAL_NUDGE_MS);
 * ```
 */
export const STEAL_NUDGE_MS = 5000;
/** Most sessions taken from one sibling in one steal call. */
const MAX_STEAL_PER_CALL = 500;

/**
 * Both sides of stealing for one shard. The only state is in memory and may be lost: when the last
 * round found nothing (back-off) and which sibling the next round starts with.
 *
 * @example
 * ```ts
 * const stealing = new Stealing(shard);
 * const taken = await stealing.stealFromSiblings();
 * ```
 */
export class Stealing {
  /** Until when credit-triggered steal rounds are skipped (the last one found nothing). */
  private idleUntil = 0;
  /** Rotates the sibling a steal round starts with, so no sibling is always drained first. */
  private cursor = 0;

  constructor(private readonly shard: Shard) {}

  /** Lender side: lends up to `k` pending sessions to sibling `thief` (none to itself). */
  lend(thief: string, k: number): store.SessionLoan {
    const { db, ctx } = this.shard;
    if (thief === this.shard.shardName || k <= 0) return { token: "", payloads: [] };
    const now = Date.now();
    return ctx.storage.transactionSync(() => {
      const loan = store.lendPending(db, thief, Math.min(k, MAX_STEAL_PER_CALL), now + STEAL_LOAN_MS);
      if (loan.payloads.length > 0) store.bumpCounter(db, "lent_sessions", loan.payloads.length);
      return loan;
    });
  }

  /**
   * Lender side: resolves loans that ran out unsettled by asking each session's ledger. Still
   * queued at the lent attempt: the row is this shard's to dispatch again. Dispatched since (the
   * thief ran it), requeued at a later attempt, or ended: the row is deleted. A ledger that does
   * not answer leaves the row lent for the next alarm. Returns how many were released and dropped.
   */
  async reclaimExpiredLoans(now = Date.now()): Promise<{ released: number; dropped: number }> {
    const { db, env, shardName } = this.shard;
    let released = 0;
    let dropped = 0;
    for (const loan of store.expiredLoans(db, now)) {
      const state = await env.BATCH.getByName(loan.batchId)
        .sessionState(loan.sessionId)
        .catch((error: unknown) => {
          console.warn(
            `QueueDO ${shardName}: no answer from the ledger of ${loan.sessionId} (expired loan):`,
            error,
          );
          return undefined;
        });
      if (state === undefined) continue;
      const again = state !== null && state.status === "QUEUED" && state.attempt === loan.attempt;
      if (store.endExpiredLoan(db, loan.sessionId, loan.loanToken, again ? "release" : "drop")) {
        if (again) released++;
        else dropped++;
      }
    }
    return { released, dropped };
  }

  /** Lender side: the thief has taken over sessions lent under `token`; they leave this shard. */
  settle(token: string, sessionIds: string[]): number {
    return store.settleLent(this.shard.db, token, sessionIds);
  }

  /** A sibling has work its gateways cannot take: the next round runs without back-off. */
  wake(): void {
    this.idleUntil = 0;
  }

  /** Tells every sibling when sessions are left here that no gateway of this shard can take. */
  async pokeSiblingsIfBacklogged(): Promise<void> {
    const { db, env, shardName } = this.shard;
    const siblings = this.shard.siblings;
    if (siblings.length === 0 || store.unreservedPending(db) === 0) return;
    await Promise.all(
      siblings.map((name) =>
        env.QUEUE.getByName(name)
          .poke()
          .catch((error: unknown) => console.warn(`QueueDO ${shardName}: poke of ${name} failed:`, error)),
      ),
    );
  }

  /**
   * Thief side: takes pending sessions from siblings, up to this shard's spare credit, into its
   * own pending list. Returns how many were taken. Never throws.
   */
  async stealFromSiblings(): Promise<number> {
    const siblings = this.shard.siblings;
    if (siblings.length === 0 || Date.now() < this.idleUntil) return 0;
    let taken = 0;
    const start = this.cursor++;
    for (let i = 0; i < siblings.length; i++) {
      const { db } = this.shard;
      const want = Math.min(store.spareCredit(db), MAX_STEAL_PER_CALL) - store.unreservedPending(db);
      if (want <= 0) break;
      taken += await this.stealFrom(siblings[(start + i) % siblings.length]!, want);
    }
    if (taken === 0) this.idleUntil = Date.now() + STEAL_IDLE_BACKOFF_MS;
    return taken;
  }

  /** One steal call to `sibling`: adopts what it lends, then settles the loan. Never throws. */
  private async stealFrom(sibling: string, want: number): Promise<number> {
    const { db, ctx, env, shardName } = this.shard;
    try {
      const stub = env.QUEUE.getByName(sibling);
      const loan = await stub.steal(shardName, want);
      if (loan.payloads.length === 0) return 0;
      const items = loan.payloads.map((p) => JSON.parse(p) as SessionAssignment);
      ctx.storage.transactionSync(() => {
        store.adoptStolen(db, items, Date.now());
        store.bumpCounter(db, "stolen_sessions", items.length);
      });
      const ids = items.map((item) => item.session_id);
      // The sessions are safe here now; the lender may forget them (not on the dispatch path).
      ctx.waitUntil(
        stub
          .settle(loan.token, ids)
          .then(() => undefined)
          .catch((error: unknown) =>
            console.warn(`QueueDO ${shardName}: settling a loan from ${sibling} failed:`, error),
          ),
      );
      return items.length;
    } catch (error) {
      console.warn(`QueueDO ${shardName}: stealing from ${sibling} failed:`, error);
      return 0;
    }
  }
}
