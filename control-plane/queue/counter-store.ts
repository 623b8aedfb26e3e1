/**
 * Counters of one dispatcher shard (the `counters` table): stale and duplicate frames, requeued
 * leases, sessions stolen and lent; and the rows behind the control plane's `/metrics`: the
 * dispatch-latency histogram and accepted results by status.
 *
 * @module
 */
import { sql } from "drizzle-orm";
import { countersFrom } from "../shared/counters";
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
  bumpNamed(db, name, by);
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
  const zeros: QueueCounters = {
    stale_progress: 0,
    stale_results: 0,
    duplicate_results: 0,
    requeued_leases: 0,
    stolen_sessions: 0,
    lent_sessions: 0,
  };
  return countersFrom(zeros, db.select().from(schema.counters).all());
}

/**
 * Upper bounds (seconds) of the dispatch-latency histogram: from a session entering this shard's
 * pending list to its lease (the assignment sent to a gateway). Idle gateways take work in
 * milliseconds; a backlog waits minutes to hours.
 */
export const DISPATCH_BUCKETS_S = [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, 3600] as const;

/** Counter-row names of the histogram: one per bucket (not cumulative), the sum and the count. */
const BUCKET_PREFIX = "dispatch_bucket:";
const DISPATCH_SUM = "dispatch_sum_ms";
const DISPATCH_COUNT = "dispatch_count";
/** Counter rows of accepted results by session status: `result:<STATUS>`. */
const RESULT_PREFIX = "result:";

/**
 * The dispatch-latency histogram as Prometheus wants it: cumulative counts per upper bound (the
 * last one `+Inf`), the sum in seconds and the count.
 *
 * @example
 * ```ts
 * const h: DispatchHistogram = readDispatchHistogram(db);
 * h.buckets.at(-1); // { le: Infinity, count: h.count }
 * ```
 */
export interface DispatchHistogram {
  buckets: { le: number; count: number }[];
  sum_seconds: number;
  count: number;
}

/**
 * Records one lease's dispatch latency `ms`: one bucket row, the sum and the count, three upserts
 * in the caller's transaction (so the histogram and the lease commit together).
 *
 * @example
 * ```ts
 * observeDispatch(db, now - item.enqueuedAt);
 * ```
 */
export function observeDispatch(db: QueueDb, ms: number): void {
  const ms0 = Math.max(0, ms);
  const bound = DISPATCH_BUCKETS_S.find((le) => ms0 <= le * 1000);
  bumpNamed(db, `${BUCKET_PREFIX}${bound ?? "+Inf"}`, 1);
  bumpNamed(db, DISPATCH_SUM, Math.round(ms0));
  bumpNamed(db, DISPATCH_COUNT, 1);
}

/**
 * Counts one result the ledger accepted (not stale, not a duplicate), by its session status.
 *
 * @example
 * ```ts
 * bumpResult(db, "COMPLETED");
 * ```
 */
export function bumpResult(db: QueueDb, status: string): void {
  bumpNamed(db, `${RESULT_PREFIX}${status}`, 1);
}

/**
 * The dispatch histogram and the accepted results by status, from the counter rows.
 *
 * @example
 * ```ts
 * const { dispatch, results } = readMetricCounters(db);
 * results.COMPLETED; // 12
 * ```
 */
export function readMetricCounters(db: QueueDb): {
  dispatch: DispatchHistogram;
  results: Record<string, number>;
} {
  const perBucket = new Map<string, number>();
  const results: Record<string, number> = {};
  let sumMs = 0;
  let count = 0;
  for (const row of db.select().from(schema.counters).all()) {
    if (row.name.startsWith(BUCKET_PREFIX)) perBucket.set(row.name.slice(BUCKET_PREFIX.length), row.value);
    else if (row.name.startsWith(RESULT_PREFIX)) results[row.name.slice(RESULT_PREFIX.length)] = row.value;
    else if (row.name === DISPATCH_SUM) sumMs = row.value;
    else if (row.name === DISPATCH_COUNT) count = row.value;
  }
  let cumulative = 0;
  const buckets: DispatchHistogram["buckets"] = DISPATCH_BUCKETS_S.map((le) => {
    cumulative += perBucket.get(String(le)) ?? 0;
    return { le, count: cumulative };
  });
  buckets.push({ le: Number.POSITIVE_INFINITY, count });
  return { dispatch: { buckets, sum_seconds: sumMs / 1000, count }, results };
}

function bumpNamed(db: QueueDb, name: string, by: number): void {
  db.insert(schema.counters)
    .values({ name, value: by })
    .onConflictDoUpdate({
      target: schema.counters.name,
      set: { value: sql`${schema.counters.value} + ${by}` },
    })
    .run();
}
