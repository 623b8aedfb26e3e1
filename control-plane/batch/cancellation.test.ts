import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { ResultsPage, type SessionAssignment } from "../../protocol";
import { getAsTrainer, postBatch, resultFor, task, uniqueId } from "../testing/fixtures";

async function storedResults(batchId: string) {
  const res = await getAsTrainer(`/v1/batches/${batchId}/results`);
  expect(res.status).toBe(200);
  return ResultsPage.parse(await res.json()).results.map((r) => r.result);
}

describe("cancellation (cancellation.ts)", () => {
  it("a cancel asked only if the batch is open leaves a batch whose sessions all ended as it is: finished, not cancelled, results unchanged", async () => {
    const batchId = uniqueId("b");
    const res = await postBatch({ batch_id: batchId, queue: uniqueId("cancel-done"), tasks: [task("t")] });
    expect(res.status).toBe(201);
    const ledger = env.BATCH.getByName(batchId);
    const sessionId = `${batchId}.0.0`;
    const assignment = {
      session_id: sessionId,
      batch_id: batchId,
      task_id: "t",
      attempt: 1,
      instruction: "solve t",
    };
    expect(await ledger.markAssigned(sessionId, "l_1", 1, "node-a")).toBe("assigned");
    expect(
      await ledger.submitResult(sessionId, "l_1", resultFor(assignment as SessionAssignment, "node-a")),
    ).toBe("accepted");

    expect(await ledger.cancel(batchId, null, { onlyIfOpen: true })).toEqual({ kind: "finished" });
    expect(await ledger.status()).toMatchObject({ status: "completed", cancelled_at: null });
    expect((await storedResults(batchId)).map((r) => r.status)).toEqual(["COMPLETED"]);
    // A plain cancel of the same batch ends nothing either, but marks it cancelled.
    expect(await ledger.cancel(batchId, null)).toEqual({ kind: "cancelled", ended: 0 });
    expect((await ledger.status())?.cancelled_at).toBeTypeOf("number");
    expect((await storedResults(batchId)).map((r) => r.status)).toEqual(["COMPLETED"]);
  });
});
