import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ResultsPage, type SessionAssignment } from "../../protocol";
import { getAsTrainer, postBatch, resultFor, task, uniqueId } from "../testing/fixtures";

/**
 * A batch of one task on a queue no gateway serves (its sessions wait there, pending), and its
 * ledger, driven here the way a dispatcher shard drives it: by its RPCs.
 */
async function ledgerOf(extra: Parameters<typeof task>[1] = {}) {
  const queue = uniqueId("ledger");
  const batchId = uniqueId("b");
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t", extra)] })).status).toBe(201);
  const sessionId = `${batchId}.0.0`;
  const assignment = {
    session_id: sessionId,
    batch_id: batchId,
    task_id: "t",
    attempt: 1,
    instruction: "solve t",
  } as SessionAssignment;
  return { queue, batchId, sessionId, assignment, ledger: env.BATCH.getByName(batchId) };
}

async function storedResults(batchId: string) {
  const res = await getAsTrainer(`/v1/batches/${batchId}/results`);
  expect(res.status).toBe(200);
  return ResultsPage.parse(await res.json()).results.map((r) => r.result);
}

describe("the ledger's answers to a dispatcher (assignments.ts, store.ts, lifecycle.ts)", () => {
  it("an assignment of a session that already ended is refused as finished and leaves it ended with its one result", async () => {
    const { batchId, sessionId, assignment, ledger } = await ledgerOf();
    expect(await ledger.markAssigned(sessionId, "l_first", 1, "node-a")).toBe("assigned");
    expect(await ledger.submitResult(sessionId, "l_first", resultFor(assignment, "node-a"))).toBe("accepted");
    // A copy still pending on some shard is dispatched again (a withdrawal not yet delivered).
    expect(await ledger.markAssigned(sessionId, "l_second", 1, "node-b")).toBe("finished");
    expect(await ledger.session(sessionId)).toMatchObject({
      status: "COMPLETED",
      lease_id: "l_first",
      node_id: "node-a",
    });
    expect((await ledger.status())?.status).toBe("completed");
    // Its gateway's result would be a duplicate, not a second result.
    expect(await ledger.submitResult(sessionId, "l_second", resultFor(assignment, "node-b"))).toBe(
      "duplicate",
    );
    expect((await storedResults(batchId)).map((r) => r.node_id)).toEqual(["node-a"]);
  });

  it("a progress report under the lease of a session that already ended is stale and does not reopen it", async () => {
    const { sessionId, assignment, ledger } = await ledgerOf();
    expect(await ledger.markAssigned(sessionId, "l_1", 1, "node-a")).toBe("assigned");
    expect(await ledger.submitResult(sessionId, "l_1", resultFor(assignment, "node-a"))).toBe("accepted");
    const before = (await ledger.counters()).stale_progress;
    expect(await ledger.markProgress(sessionId, "l_1", "RUNNING")).toBe("stale");
    expect(await ledger.session(sessionId)).toMatchObject({ status: "COMPLETED", deadline_at: null });
    expect((await ledger.status())?.status).toBe("completed");
    expect((await ledger.counters()).stale_progress).toBe(before + 1);
  });

  it("a lost lease of a session that already ended is stale: it is not requeued and keeps its one result", async () => {
    const { batchId, sessionId, assignment, ledger } = await ledgerOf({ max_attempts: 3 });
    expect(await ledger.markAssigned(sessionId, "l_1", 1, "node-a")).toBe("assigned");
    expect(await ledger.submitResult(sessionId, "l_1", resultFor(assignment, "node-a"))).toBe("accepted");
    // Its gateway left after reporting; the queue hands the lease back when its grace runs out.
    expect(await ledger.leaseLost(sessionId, "l_1", "gateway node-a lost the session")).toBe("stale");
    expect(await ledger.session(sessionId)).toMatchObject({ status: "COMPLETED", attempt: 1 });
    expect((await ledger.counters()).requeued_sessions).toBe(0);
    expect((await storedResults(batchId)).map((r) => r.status)).toEqual(["COMPLETED"]);
  });

  it("a lost lease that a later assignment superseded is stale: the session keeps running under the later lease", async () => {
    const { sessionId, ledger } = await ledgerOf({ max_attempts: 3 });
    expect(await ledger.markAssigned(sessionId, "l_early", 1, "node-a")).toBe("assigned");
    expect(await ledger.markAssigned(sessionId, "l_later", 1, "node-b")).toBe("assigned");
    expect(await ledger.markProgress(sessionId, "l_later", "INITIALIZING")).toBe("ok");
    expect(await ledger.leaseLost(sessionId, "l_early", "gateway node-a lost the session")).toBe("stale");
    expect(await ledger.session(sessionId)).toMatchObject({
      status: "INITIALIZING",
      attempt: 1,
      lease_id: "l_later",
      node_id: "node-b",
    });
    expect((await ledger.counters()).requeued_sessions).toBe(0);
    // The lease that is current is the one a loss requeues.
    expect(await ledger.leaseLost(sessionId, "l_later", "gateway node-b lost the session")).toBe("requeued");
    expect(await ledger.session(sessionId)).toMatchObject({ status: "QUEUED", attempt: 2, lease_id: null });
  });
});
