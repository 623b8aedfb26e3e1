/**
 * The results stream as the ledger serves it: pages of accepted results after a cursor, bounded
 * by count and bytes, and the long-poll that holds an empty page until the next result.
 *
 * @module
 */
import { LIMITS } from "../../protocol";
import type { RawResultsPage } from "../shared/ledger-rpc";
import type { Ledger } from "./ledger";
import * as resultStore from "./result-store";
import * as store from "./store";

/** Longest wait of one `results` call held inside this object; the Worker loops for longer waits. */
const MAX_HELD_WAIT_MS = 30_000;

/** One page after `after`; `done` once every session ended and the page reached the last result. */
function page(ledger: Ledger, after: number, limit: number): NonNullable<RawResultsPage> {
  const finished = store.allSessionsFinished(ledger.db);
  const results = resultStore.resultsAfter(ledger.db, after, limit, LIMITS.maxResultsPageBytes);
  const next = results.length > 0 ? results[results.length - 1]!.seq : after;
  return { results, next, done: finished && next >= resultStore.lastResultSeq(ledger.db) };
}

/**
 * Results after cursor `after` (at most `limit`, bounded by bytes), or null when no batch is
 * stored here. With `waitMs` > 0 and nothing new, waits up to that long for the next result.
 *
 * @example
 * ```ts
 * const page = await resultsPage(ledger, 0, 100, 30_000);
 * ```
 */
export async function resultsPage(
  ledger: Ledger,
  after: number,
  limit: number,
  waitMs = 0,
): Promise<RawResultsPage> {
  const batch = store.readBatch(ledger.db);
  if (!batch || batch.requestHash === store.TOMBSTONE) return null;
  let current = page(ledger, after, limit);
  if (current.results.length === 0 && !current.done && waitMs > 0) {
    await ledger.waiters.wait(Math.min(waitMs, MAX_HELD_WAIT_MS));
    // Read again after the wait: the result that woke it committed while the gate was open.
    current = page(ledger, after, limit);
  }
  return current;
}
