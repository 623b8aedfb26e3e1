/**
 * Counters of one dispatcher shard (the `counters` table): stale and duplicate frames, requeued
 * leases, sessions stolen and lent.
 *
 * @module
 */
import { sql } from "drizzle-orm";
import type { QueueDb } from "./db";
import * as schema from "./schema";

/**
 * Counters kept by the dispatcher.
 *
 * @example
 * ```ts
 * const counters: QueueCounters = readCounters(db);
 * ```
 */
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
