/**
 * The accepted results of the batch ledger as stored: a result's JSON in chunks under SQLite's
 * row limit, read back whole, by cursor (bounded pages) or by session. Writing them is
 * `lifecycle.recordResult`'s job; like `store.ts`, nothing here awaits.
 *
 * @module
 */
import { asc, eq, gt, sql } from "drizzle-orm";
import type { RawResult } from "../shared/ledger-rpc";
import * as schema from "./schema";
import type { BatchDb } from "./store";

/**
 * Characters per stored result chunk. A UTF-16 code unit is at most 3 UTF-8 bytes, so a chunk is at
 * most 768 KiB on disk: well under SQLite's 2 MB row limit.
 *
 * @example
 * ```ts
 * splitText(json, RESULT_CHUNK_CHARS);
 * ```
 */
export const RESULT_CHUNK_CHARS = 256 * 1024;

/**
 * Splits text into pieces of at most `size` UTF-16 code units without cutting a surrogate pair
 * (a lone surrogate would not survive a round trip through SQLite text).
 *
 * @example
 * ```ts
 * splitText("abcdef", 4); // ["abcd", "ef"]
 * ```
 */
export function splitText(text: string, size: number): string[] {
  const pieces: string[] = [];
  let start = 0;
  while (start < text.length) {
    let end = Math.min(start + size, text.length);
    const last = text.charCodeAt(end - 1);
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end -= 1;
    pieces.push(text.slice(start, end));
    start = end;
  }
  return pieces.length > 0 ? pieces : [""];
}

/** The JSON of stored result `seq`, joined from its chunks in order. */
function resultText(db: BatchDb, seq: number): string {
  const pieces = db
    .select({ data: schema.resultChunks.data })
    .from(schema.resultChunks)
    .where(eq(schema.resultChunks.seq, seq))
    .orderBy(asc(schema.resultChunks.chunkIndex))
    .all();
  return pieces.map((p) => p.data).join("");
}

/**
 * Results after cursor `after`, up to `limit` rows and (beyond the first row) `maxChars` characters
 * of JSON (uploaded trajectories counted), so one page stays bounded once trajectories are spliced.
 *
 * @example
 * ```ts
 * resultsAfter(db, 0, 100, 8 * 1024 * 1024); // [{ seq: 1, json: "{…}" }, …]
 * ```
 */
export function resultsAfter(db: BatchDb, after: number, limit: number, maxChars: number): RawResult[] {
  const rows = db
    .select({
      seq: schema.results.seq,
      chars: schema.results.chars,
      trajectoryKey: schema.results.trajectoryKey,
      trajectoryBytes: schema.results.trajectoryBytes,
    })
    .from(schema.results)
    .where(gt(schema.results.seq, after))
    .orderBy(asc(schema.results.seq))
    .limit(limit)
    .all();
  const out: RawResult[] = [];
  let chars = 0;
  for (const row of rows) {
    // An uploaded trajectory is spliced in when served: count its bytes against the page too.
    const size = row.chars + (row.trajectoryBytes ?? 0);
    if (out.length > 0 && chars + size > maxChars) break;
    out.push({ seq: row.seq, json: resultText(db, row.seq), trajectory_key: row.trajectoryKey });
    chars += size;
  }
  return out;
}

/**
 * Highest result sequence number so far (0 when none).
 *
 * @example
 * ```ts
 * lastResultSeq(db); // 0 before the first result
 * ```
 */
export function lastResultSeq(db: BatchDb): number {
  return (
    db
      .select({ seq: sql<number>`coalesce(max(${schema.results.seq}), 0)` })
      .from(schema.results)
      .get()?.seq ?? 0
  );
}

/**
 * One stored result by sequence number, or null.
 *
 * @example
 * ```ts
 * resultBySeq(db, 3)?.json;
 * ```
 */
export function resultBySeq(db: BatchDb, seq: number): RawResult | null {
  const row = db.select().from(schema.results).where(eq(schema.results.seq, seq)).get();
  if (!row) return null;
  return { seq, json: resultText(db, seq), trajectory_key: row.trajectoryKey };
}

/**
 * The accepted result row of a session (without its chunks), or undefined.
 *
 * @example
 * ```ts
 * resultOfSession(db, "b_1.0.0")?.seq;
 * ```
 */
export function resultOfSession(
  db: BatchDb,
  sessionId: string,
): typeof schema.results.$inferSelect | undefined {
  return db.select().from(schema.results).where(eq(schema.results.sessionId, sessionId)).get();
}
