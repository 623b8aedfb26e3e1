import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { describe, expect, it } from "vitest";
import type { SessionAssignment } from "../../protocol";
import { uniqueId } from "../testing/fixtures";
import * as schema from "./schema";
import * as store from "./store";

/** Runs `body` on the tables of a fresh dispatcher shard (migrated by its constructor). */
function onShard<T>(body: (db: store.QueueDb, sql: SqlStorage) => T): Promise<T> {
  return runInDurableObject(env.QUEUE.getByName(uniqueId("stores")), (_, state) =>
    body(drizzle(state.storage, { schema }), state.storage.sql),
  );
}

/** An assignment as far as the pending list reads it. */
function assignment(sessionId: string, attempt: number, priority = 0): SessionAssignment {
  return {
    session_id: sessionId,
    batch_id: "b",
    task_id: "t",
    attempt,
    instruction: "solve t",
    dispatch_priority: priority,
  } as SessionAssignment;
}

function addLease(
  sql: SqlStorage,
  leaseId: string,
  sessionId: string,
  attempt: number,
  lostAt: number | null,
) {
  sql.exec(
    "INSERT INTO leases (lease_id, session_id, batch_id, node_id, attempt, assigned_at, lost_at) VALUES (?, ?, 'b', 'node-a', ?, 1, ?)",
    leaseId,
    sessionId,
    attempt,
    lostAt,
  );
}

function pendingRows(sql: SqlStorage) {
  return sql
    .exec<{ session_id: string; attempt: number; loan_token: string | null; reserved_lease: string | null }>(
      "SELECT session_id, attempt, loan_token, reserved_lease FROM pending ORDER BY seq",
    )
    .toArray();
}

describe("pending-store: enqueueSessions", () => {
  it("skips a session a lease holds at the same attempt (held, or in its grace) or at a later one; adds it when the lease is of an earlier attempt or its grace ran out", async () => {
    const now = 1_000_000;
    const added = await onShard((db, sql) => {
      addLease(sql, "l_held", "held.0.0", 1, null);
      addLease(sql, "l_grace", "grace.0.0", 1, now + 1);
      addLease(sql, "l_later", "later.0.0", 2, now - 1);
      addLease(sql, "l_earlier", "earlier.0.0", 1, null);
      addLease(sql, "l_lost", "lost.0.0", 1, now);
      return Object.fromEntries(
        [
          ["held", 1],
          ["grace", 1],
          ["later", 1],
          ["earlier", 2],
          ["lost", 1],
        ].map(([name, attempt]) => [
          name,
          store.enqueueSessions(db, [assignment(`${name}.0.0`, attempt as number)], now),
        ]),
      );
    });
    // A lease whose grace ran out is being handed back: the ledger may have requeued its session at
    // the same attempt (lost before INITIALIZING) before it answered the shard's leaseLost.
    expect(added).toEqual({ held: 0, grace: 0, later: 0, earlier: 1, lost: 1 });
  });

  it("a session pending at the same or a later attempt is not added again; one of an earlier attempt is replaced by the new attempt and is no longer lent", async () => {
    const rows = await onShard((db, sql) => {
      expect(store.enqueueSessions(db, [assignment("s.0.0", 1), assignment("t.0.0", 2)], 1)).toBe(2);
      const loan = store.lendPending(db, "q#1", 2, 1000);
      expect(loan.payloads).toHaveLength(2);
      expect(store.enqueueSessions(db, [assignment("s.0.0", 1), assignment("t.0.0", 1)], 2)).toBe(0);
      const unchanged = pendingRows(sql);
      expect(unchanged.map((r) => [r.session_id, r.attempt, r.loan_token])).toEqual([
        ["s.0.0", 1, loan.token],
        ["t.0.0", 2, loan.token],
      ]);
      expect(store.enqueueSessions(db, [assignment("s.0.0", 2)], 3)).toBe(1);
      // The lender's late settle of the old loan no longer deletes the new attempt.
      expect(store.settleLent(db, loan.token, ["s.0.0"])).toBe(0);
      const next = store.nextPending(db);
      return {
        rows: pendingRows(sql),
        next: next && { id: next.sessionId, payload: JSON.parse(next.payload) },
      };
    });
    expect(rows.rows.map((r) => [r.session_id, r.attempt, r.loan_token === null])).toEqual([
      ["s.0.0", 2, true],
      ["t.0.0", 2, false],
    ]);
    expect(rows.next).toMatchObject({ id: "s.0.0", payload: { session_id: "s.0.0", attempt: 2 } });
  });
});

describe("pending-store: reservations", () => {
  it("after a restart every reservation is void: a reserved session is dispatchable again, a lent one stays lent", async () => {
    const out = await onShard((db, sql) => {
      store.enqueueSessions(db, [assignment("a.0.0", 1), assignment("b.0.0", 1)], 1);
      const loan = store.lendPending(db, "q#1", 1, 1000);
      store.reservePending(db, "b.0.0", "l_in_flight");
      const before = store.nextPending(db)?.sessionId ?? null;
      const released = store.releaseAllReservations(db);
      return {
        before,
        released,
        next: store.nextPending(db)?.sessionId,
        rows: pendingRows(sql),
        token: loan.token,
      };
    });
    expect(out.before).toBeNull();
    expect(out.released).toBe(1);
    expect(out.next).toBe("b.0.0");
    expect(out.rows).toEqual([
      { session_id: "a.0.0", attempt: 1, loan_token: out.token, reserved_lease: null },
      { session_id: "b.0.0", attempt: 1, loan_token: null, reserved_lease: null },
    ]);
  });
});

describe("loan-store: lendPending", () => {
  it("lends at most k sessions, highest priority first, never one a dispatch pass has reserved or one already lent", async () => {
    const out = await onShard((db) => {
      store.enqueueSessions(
        db,
        [
          assignment("low.0.0", 1, 0),
          assignment("high.0.0", 1, 9),
          assignment("mid.0.0", 1, 5),
          assignment("mid.0.1", 1, 5),
        ],
        1,
      );
      store.reservePending(db, "high.0.0", "l_in_flight");
      const first = store.lendPending(db, "q#1", 2, 1000);
      const second = store.lendPending(db, "q#2", 5, 1000);
      const ids = (loan: store.SessionLoan) => loan.payloads.map((p) => JSON.parse(p).session_id as string);
      return { first: ids(first), second: ids(second), third: ids(store.lendPending(db, "q#3", 5, 1000)) };
    });
    expect(out).toEqual({ first: ["mid.0.0", "mid.0.1"], second: ["low.0.0"], third: [] });
  });
});

describe("lease-store: grace and expiry", () => {
  it("a disconnect starts the grace of that node's held leases only; a lease already counted lost keeps its time", async () => {
    const rows = await onShard((db, sql) => {
      addLease(sql, "l_a_held", "a.0.0", 1, null);
      addLease(sql, "l_a_lost", "a.0.1", 1, 500);
      sql.exec(
        "INSERT INTO leases (lease_id, session_id, batch_id, node_id, attempt, assigned_at) VALUES ('l_b_held', 'b.0.0', 'b', 'node-b', 1, 1)",
      );
      store.startLeaseGrace(db, "node-a", 30_000);
      return sql
        .exec<{ lease_id: string; lost_at: number | null }>(
          "SELECT lease_id, lost_at FROM leases ORDER BY lease_id",
        )
        .toArray();
    });
    expect(rows).toEqual([
      { lease_id: "l_a_held", lost_at: 30_000 },
      { lease_id: "l_a_lost", lost_at: 500 },
      { lease_id: "l_b_held", lost_at: null },
    ]);
  });

  it("a lease is due once its grace ends, not before, and a held one never is", async () => {
    const due = await onShard((db, sql) => {
      addLease(sql, "l_held", "h.0.0", 1, null);
      addLease(sql, "l_ends_now", "n.0.0", 1, 1000);
      addLease(sql, "l_ended", "e.0.0", 1, 999);
      addLease(sql, "l_in_grace", "g.0.0", 1, 1001);
      return store
        .dueLostLeases(db, 1000)
        .map((l) => l.leaseId)
        .sort();
    });
    expect(due).toEqual(["l_ended", "l_ends_now"]);
  });
});
