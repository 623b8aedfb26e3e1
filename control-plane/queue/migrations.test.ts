import { env, runInDurableObject } from "cloudflare:test";
import { asc } from "drizzle-orm";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import { describe, expect, it } from "vitest";
import migrations from "./drizzle/migrations.js";
import { endExpiredLoan, expiredLoans, lendPending, settleLent } from "./loan-store";
import { nextPending } from "./pending-store";
import * as schema from "./schema";

/** The migration set as it stood before migration `n` (0-based) was added. */
function upTo(n: number): typeof migrations {
  return {
    ...migrations,
    journal: { ...migrations.journal, entries: migrations.journal.entries.slice(0, n) },
  };
}

describe("queue migrations on an existing database", () => {
  it("0003 moves steal:<until>:<thief> loans into loan columns and drops leases.payload", async () => {
    await runInDurableObject(env.QUEUE.getByName("migrate-0003"), async (_obj, state) => {
      const sql = state.storage.sql;
      // Back to an empty database, then up to the schema before 0003, as a deployed shard has it.
      for (const table of [
        "pending",
        "gateways",
        "leases",
        "counters",
        "fence",
        "event_outbox",
        "event_snapshots",
        "__drizzle_migrations",
      ]) {
        sql.exec(`DROP TABLE IF EXISTS ${table}`);
      }
      const db = drizzle(state.storage, { schema });
      await migrate(db, upTo(3));
      sql.exec(
        `INSERT INTO pending (session_id, batch_id, attempt, priority, payload, enqueued_at, reserved_lease)
         VALUES ('b.0.0', 'b', 0, 0, '{"n":0}', 1, 'steal:4000000000000:default#1'),
                ('b.0.1', 'b', 0, 0, '{"n":1}', 2, 'l_inflight'),
                ('b.0.2', 'b', 0, 0, '{"n":2}', 3, NULL)`,
      );
      sql.exec(
        `INSERT INTO leases (lease_id, session_id, batch_id, node_id, attempt, assigned_at, payload)
         VALUES ('l_held', 'b.0.3', 'b', 'node-a', 0, 4, '{}')`,
      );

      await migrate(db, migrations);

      const rows = db.select().from(schema.pending).orderBy(asc(schema.pending.seq)).all();
      expect(rows.map((r) => [r.sessionId, r.reservedLease, r.loanToken, r.lentTo, r.lentUntil])).toEqual([
        ["b.0.0", null, "steal:4000000000000:default#1", "default#1", 4_000_000_000_000],
        ["b.0.1", "l_inflight", null, null, null],
        ["b.0.2", null, null, null, null],
      ]);
      // Only the row nobody holds is dispatched; the old loan is still settled by its old token.
      expect(nextPending(db)?.sessionId).toBe("b.0.2");
      expect(settleLent(db, "steal:4000000000000:default#1", ["b.0.0"])).toBe(1);
      const leaseColumns = [...sql.exec("SELECT name FROM pragma_table_info('leases')")].map((r) => r.name);
      expect(leaseColumns).not.toContain("payload");
      expect(
        db
          .select()
          .from(schema.leases)
          .all()
          .map((l) => l.leaseId),
      ).toEqual(["l_held"]);
    });
  });

  it("a loan made after the migration expires, is released back to dispatch by its token, and is settled by its token", async () => {
    await runInDurableObject(env.QUEUE.getByName("migrate-loans"), async (_obj, state) => {
      const db = drizzle(state.storage, { schema });
      state.storage.sql.exec(
        `INSERT INTO pending (session_id, batch_id, attempt, priority, payload, enqueued_at)
         VALUES ('c.0.0', 'c', 0, 0, '{}', 1), ('c.0.1', 'c', 0, 0, '{}', 2)`,
      );
      const loan = lendPending(db, "q#1", 1, 1000);
      expect(loan.payloads).toHaveLength(1);
      expect(nextPending(db)?.sessionId).toBe("c.0.1");
      expect(expiredLoans(db, 999)).toEqual([]);
      expect(expiredLoans(db, 1000)).toEqual([
        { sessionId: "c.0.0", batchId: "c", attempt: 0, loanToken: loan.token },
      ]);
      expect(endExpiredLoan(db, "c.0.0", "loan_other", "release")).toBe(false);
      expect(endExpiredLoan(db, "c.0.0", loan.token, "release")).toBe(true);
      expect(expiredLoans(db, 1000)).toEqual([]);
      expect(settleLent(db, loan.token, ["c.0.0"])).toBe(0);
      const again = lendPending(db, "q#1", 2, 5000);
      expect(settleLent(db, again.token, ["c.0.0", "c.0.1"])).toBe(2);
      expect(nextPending(db)).toBeUndefined();
    });
  });
});
