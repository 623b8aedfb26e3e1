import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { describe, expect, it } from "vitest";
import { uniqueId } from "../testing/fixtures";
import { resultsAfter } from "./result-store";
import * as schema from "./schema";

/** Stores a result row counted as `chars` characters of JSON and an uploaded trajectory of `bytes`. */
function storeResult(sql: SqlStorage, sessionId: string, chars: number, bytes: number | null): void {
  const json = JSON.stringify({ session_id: sessionId });
  const seq = sql
    .exec<{ seq: number }>(
      `INSERT INTO results (session_id, lease_id, status, chars, chunk_count, accepted_at, trajectory_key, trajectory_bytes)
       VALUES (?, 'l', 'COMPLETED', ?, 1, 1, ?, ?) RETURNING seq`,
      sessionId,
      chars,
      bytes === null ? null : `batches/b/sessions/${sessionId}/l/trajectory.json`,
      bytes,
    )
    .one().seq;
  sql.exec("INSERT INTO result_chunks (seq, chunk_index, data) VALUES (?, 0, ?)", seq, json);
}

describe("result pages (result-store.ts)", () => {
  it("a page holds at least one result however large its uploaded trajectory, and stops before the result that would pass the budget", async () => {
    const pages = await runInDurableObject(env.BATCH.getByName(uniqueId("b")), (_, state) => {
      const db = drizzle(state.storage, { schema });
      storeResult(state.storage.sql, "b.0.0", 100, 20_000_000);
      storeResult(state.storage.sql, "b.0.1", 100, null);
      storeResult(state.storage.sql, "b.0.2", 100, 900);
      storeResult(state.storage.sql, "b.0.3", 100, null);
      const seqs = (after: number) => resultsAfter(db, after, 100, 1_150).map((r) => r.seq);
      return { first: seqs(0), second: seqs(1), last: seqs(3), json: resultsAfter(db, 0, 1, 10)[0]?.json };
    });
    // The first result alone is over the 1 150-character budget: it is served by itself, not held back.
    expect(pages.first).toEqual([1]);
    // 100 + (100 + 900) = 1 100 fits the budget; a fourth result (100 more) does not.
    expect(pages.second).toEqual([2, 3]);
    expect(pages.last).toEqual([4]);
    expect(JSON.parse(pages.json!)).toMatchObject({ session_id: "b.0.0" });
  });
});
