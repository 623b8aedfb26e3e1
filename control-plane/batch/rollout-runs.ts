/**
 * The rollout run of a ledger that serves upstream task ids (`rollout_runs`, one row): upstream
 * reuses a task id for a new run, so the ledger whose run 1 it is counts the runs.
 *
 * @module
 */
import * as schema from "./schema";
import type { BatchDb } from "./store";

/**
 * The current run (1 when none was claimed).
 *
 * @example
 * ```ts
 * currentRun(db); // 1
 * ```
 */
export function currentRun(db: BatchDb): number {
  return db.select().from(schema.rolloutRuns).get()?.run ?? 1;
}

/**
 * Claims run `from + 1` when `from` is still the current run; returns the current run after. Run
 * it inside one synchronous transaction.
 *
 * @example
 * ```ts
 * ctx.storage.transactionSync(() => advanceRun(db, 1)); // 2
 * ```
 */
export function advanceRun(db: BatchDb, from: number): number {
  const current = currentRun(db);
  if (current !== from) return current;
  db.insert(schema.rolloutRuns)
    .values({ id: 0, run: from + 1 })
    .onConflictDoUpdate({ target: schema.rolloutRuns.id, set: { run: from + 1 } })
    .run();
  return from + 1;
}
