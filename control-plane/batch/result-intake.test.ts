import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ResultsPage, type SessionAssignment } from "../../protocol";
import { getAsTrainer, postBatch, resultFor, task, uniqueId } from "../testing/fixtures";

/** A batch of one task on a queue no gateway serves, and its ledger, driven by its RPCs. */
async function ledgerOf(extra: Parameters<typeof task>[1] = {}) {
  const batchId = uniqueId("b");
  const res = await postBatch({ batch_id: batchId, queue: uniqueId("intake"), tasks: [task("t", extra)] });
  expect(res.status).toBe(201);
  const sessionId = `${batchId}.0.0`;
  const assignment = {
    session_id: sessionId,
    batch_id: batchId,
    task_id: "t",
    attempt: 1,
    instruction: "solve t",
  } as SessionAssignment;
  return { batchId, sessionId, assignment, ledger: env.BATCH.getByName(batchId) };
}

async function storedResults(batchId: string) {
  const res = await getAsTrainer(`/v1/batches/${batchId}/results`);
  expect(res.status).toBe(200);
  return ResultsPage.parse(await res.json()).results.map((r) => r.result);
}

describe("result intake: one result per session, under its current lease (result-intake.ts)", () => {
  it("a result under a superseded lease is stale and counted, the session stays open; the current lease's result is accepted once, a repeat is a duplicate", async () => {
    const { batchId, sessionId, assignment, ledger } = await ledgerOf();
    expect(await ledger.markAssigned(sessionId, "l_early", 1, "node-a")).toBe("assigned");
    expect(await ledger.markAssigned(sessionId, "l_later", 1, "node-b")).toBe("assigned");

    expect(await ledger.submitResult(sessionId, "l_early", resultFor(assignment, "node-a"))).toBe("stale");
    expect(await ledger.session(sessionId)).toMatchObject({
      status: "ASSIGNED",
      lease_id: "l_later",
      result_json: null,
    });
    expect(await ledger.counters()).toMatchObject({ stale_results: 1, duplicate_results: 0 });

    expect(await ledger.submitResult(sessionId, "l_later", resultFor(assignment, "node-b"))).toBe("accepted");
    expect(await ledger.submitResult(sessionId, "l_later", resultFor(assignment, "node-b"))).toBe(
      "duplicate",
    );
    expect(await ledger.submitResult(sessionId, "l_early", resultFor(assignment, "node-a"))).toBe(
      "duplicate",
    );
    expect(await ledger.counters()).toMatchObject({ stale_results: 1, duplicate_results: 2 });
    const results = await storedResults(batchId);
    expect(results.map((r) => [r.session_id, r.node_id])).toEqual([[sessionId, "node-b"]]);
    expect(await ledger.session(sessionId)).toMatchObject({ status: "COMPLETED", lease_id: "l_later" });
  });

  it("an infra failure on the last attempt is answered accepted and ends the session with the ledger's one ERROR result, not the gateway's besides", async () => {
    const { batchId, sessionId, assignment, ledger } = await ledgerOf({ max_attempts: 1 });
    expect(await ledger.markAssigned(sessionId, "l_1", 1, "node-a")).toBe("assigned");
    const infra = {
      ...resultFor(assignment, "node-a"),
      status: "ERROR" as const,
      reward: null,
      error: { kind: "infra" as const, message: "runtime failed to start" },
    };
    expect(await ledger.submitResult(sessionId, "l_1", infra)).toBe("accepted");
    expect(await ledger.session(sessionId)).toMatchObject({ status: "ERROR", attempt: 1 });
    const results = await storedResults(batchId);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({ status: "ERROR", attempt: 1, error: { kind: "infra" } });
    expect(results[0]!.error!.message).toContain("gave up after 1 attempt(s) (max_attempts 1)");
    expect((await ledger.counters()).requeued_sessions).toBe(0);
    expect(await ledger.submitResult(sessionId, "l_1", infra)).toBe("duplicate");
  });
});
