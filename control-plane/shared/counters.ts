/**
 * Named counters as the ledger and the dispatcher keep them: one `counters` row (name, value) per
 * counter bumped at least once. A counter never bumped has no row, so a reader starts from zeros.
 *
 * @module
 */

/**
 * A stored counter row.
 *
 * @example
 * ```ts
 * const rows: CounterRow[] = db.select().from(schema.counters).all();
 * ```
 */
export interface CounterRow {
  name: string;
  value: number;
}

/**
 * `zeros` with the value of each row whose name it has; rows of other names (a histogram bucket,
 * a counter an older version kept) are left out.
 *
 * @example
 * ```ts
 * countersFrom({ stale_results: 0, duplicate_results: 0 }, [{ name: "stale_results", value: 2 }]);
 * // { stale_results: 2, duplicate_results: 0 }
 * ```
 */
export function countersFrom<T extends { [K in keyof T]: number }>(zeros: T, rows: readonly CounterRow[]): T {
  const out: Record<string, number> = { ...zeros };
  for (const row of rows) {
    if (row.name in out) out[row.name] = row.value;
  }
  return out as T;
}
