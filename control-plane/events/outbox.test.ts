import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import type { BatchDO } from "../batch/batch-do";
import { call, POLL, postBatch, TOKENS, task, uniqueId } from "../testing/fixtures";

interface Page {
  events: { seq: number; kind: string; data: { status?: string; session_id?: string } }[];
}

async function eventsOf(batchId: string): Promise<Page["events"]> {
  const res = await call(`/v1/events?batch_id=${batchId}&limit=1000`, {
    headers: { Authorization: `Bearer ${TOKENS.viewer}` },
  });
  return ((await res.json()) as Page).events;
}

/**
 * Swaps the ledger's EVENTS binding (the log) for one whose appends fail (`down`) or never
 * answer (`hung`), or back to the real one.
 */
async function logDown(batchId: string, down: boolean | "hung"): Promise<void> {
  const append =
    down === "hung" ? () => new Promise<never>(() => {}) : () => Promise.reject(new Error("the log is down"));
  await runInDurableObject(env.BATCH.getByName(batchId), (instance: BatchDO) => {
    const self = instance as unknown as { env: Env };
    self.env = down ? ({ ...env, EVENTS: { getByName: () => ({ append }) } } as unknown as Env) : env;
  });
}

/** When the ledger's flusher retries after a failure (0: no failure pending). */
function retryAt(batchId: string): Promise<number> {
  return runInDurableObject(
    env.BATCH.getByName(batchId),
    (instance: BatchDO) =>
      (instance as unknown as { ledger: { events: { retryAt: number } } }).ledger.events.retryAt,
  );
}

describe("event outbox", () => {
  it("keeps events while the log fails, answers without waiting on it, and sends them once on the retry", async () => {
    const batchId = uniqueId("outbox");
    expect((await postBatch({ batch_id: batchId, tasks: [task("t0", { num_samples: 2 })] })).status).toBe(
      201,
    );
    await expect.poll(() => eventsOf(batchId), POLL).toHaveLength(1);
    const ledger = env.BATCH.getByName(batchId);

    await logDown(batchId, true);
    const cancel = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    // The change is the truth: it commits and answers while the log refuses every append.
    expect(cancel.status).toBe(200);
    expect((await ledger.status())?.counts.CANCELLED).toBe(2);
    // Two session events and the cancelled batch wait in the outbox; the alarm is armed to retry.
    await expect.poll(() => ledger.pendingEvents(), POLL).toBe(3);
    expect(await eventsOf(batchId)).toHaveLength(1);
    await expect.poll(() => retryAt(batchId), POLL).toBeGreaterThan(0);
    const alarm = await runInDurableObject(ledger, (_, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeLessThanOrEqual(await retryAt(batchId));

    await logDown(batchId, false);
    await runDurableObjectAlarm(ledger);
    expect(await ledger.pendingEvents()).toBe(0);
    const events = await eventsOf(batchId);
    expect(events.map((e) => [e.kind, e.data.status])).toEqual([
      ["batch", "running"],
      ["session", "CANCELLED"],
      ["session", "CANCELLED"],
      ["batch", "cancelled"],
    ]);
    // A second flush finds nothing to send: nothing is logged twice.
    await runInDurableObject(ledger, (_, state) => state.storage.setAlarm(Date.now()));
    await runDurableObjectAlarm(ledger);
    expect(await eventsOf(batchId)).toHaveLength(4);
  });

  it("gives up on an append that never answers, keeps its events and retries later", async () => {
    const batchId = uniqueId("outbox-hung");
    expect((await postBatch({ batch_id: batchId, tasks: [task("t0")] })).status).toBe(201);
    await expect.poll(() => eventsOf(batchId), POLL).toHaveLength(1);
    const ledger = env.BATCH.getByName(batchId);
    await logDown(batchId, "hung");
    const cancel = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(cancel.status).toBe(200);
    // After APPEND_TIMEOUT_MS the flush stops waiting and schedules a retry.
    await expect.poll(() => retryAt(batchId), { timeout: 15_000 }).toBeGreaterThan(0);
    expect(await ledger.pendingEvents()).toBe(2);
    await logDown(batchId, false);
    await runDurableObjectAlarm(ledger);
    expect((await eventsOf(batchId)).map((e) => e.kind)).toEqual(["batch", "session", "batch"]);
  });
});
