/**
 * Durable Object SQLite binds at most 100 parameters per statement (the platform's limit; workerd
 * enforces it locally too: "too many SQL variables"). A query over a list of ids (`IN (…)`) is
 * therefore run in chunks of {@link MAX_IDS_PER_STATEMENT}, which leaves room for the statement's
 * other parameters.
 *
 * @module
 */

/** Ids bound by one `IN (…)` list: below the 100-parameter limit with room for ten more. */
export const MAX_IDS_PER_STATEMENT = 90;

/**
 * `items` in consecutive chunks of at most `size`.
 *
 * @example
 * ```ts
 * for (const ids of idChunks(sessionIds)) db.delete(t).where(inArray(t.id, ids)).run();
 * idChunks([1, 2, 3], 2); // [[1, 2], [3]]
 * ```
 */
export function idChunks<T>(items: readonly T[], size: number = MAX_IDS_PER_STATEMENT): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
