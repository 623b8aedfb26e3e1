/**
 * Task callbacks' retry schedule and give-up (`callbacks.ts`): 1 s doubling to 5 minutes, and no
 * further attempt after `LIMITS.maxCallbackAttempts`, the last error kept; then the same through
 * the ledger's own delivery (`callback-delivery.ts`) and its alarm.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { describe, expect, it } from "vitest";
import { LIMITS } from "../../protocol";
import { Gateway, POLL, postBatch, resultFor, task, uniqueId } from "../testing/fixtures";
import type { BatchDO } from "./batch-do";
import { allCallbacks, callbackBackoffMs, recordAttempt } from "./callbacks";
import * as schema from "./schema";

describe("callback retries", () => {
  it("back off 1 s doubling per failed attempt, capped at 5 minutes", () => {
    expect([1, 2, 3, 4, 9].map(callbackBackoffMs)).toEqual([1_000, 2_000, 4_000, 8_000, 256_000]);
    expect(callbackBackoffMs(10)).toBe(300_000);
    expect(callbackBackoffMs(40)).toBe(300_000);
  });

  it("give up after maxCallbackAttempts failures: no next attempt, the last error kept", async () => {
    const stub = env.BATCH.getByName(uniqueId("cb"));
    await runInDurableObject(stub, (_, state) => {
      const db = drizzle(state.storage, { schema });
      state.storage.sql.exec(
        "INSERT INTO callbacks (task_index, url, attempts) VALUES (0, 'http://x/cb', 0)",
      );
      const t0 = 1_000_000;
      const schedule: Array<number | null> = [];
      for (let i = 1; i <= LIMITS.maxCallbackAttempts; i++) {
        recordAttempt(db, 0, `HTTP 500 (try ${i})`, t0);
        const row = allCallbacks(db)[0]!;
        expect(row.attempts).toBe(i);
        schedule.push(row.nextAttemptAt === null ? null : row.nextAttemptAt - t0);
      }
      // Each failure but the last schedules the next try by the backoff; the last gives up.
      expect(schedule).toEqual([
        ...Array.from({ length: LIMITS.maxCallbackAttempts - 1 }, (_, i) => callbackBackoffMs(i + 1)),
        null,
      ]);
      expect(allCallbacks(db)[0]).toMatchObject({
        deliveredAt: null,
        lastError: `HTTP 500 (try ${LIMITS.maxCallbackAttempts})`,
      });
    });
  });

  it("a success ends the retries and clears the error", async () => {
    const stub = env.BATCH.getByName(uniqueId("cb"));
    await runInDurableObject(stub, (_, state) => {
      const db = drizzle(state.storage, { schema });
      state.storage.sql.exec(
        "INSERT INTO callbacks (task_index, url, attempts) VALUES (0, 'http://x/cb', 0)",
      );
      recordAttempt(db, 0, "HTTP 503", 10);
      recordAttempt(db, 0, null, 5_000);
      expect(allCallbacks(db)[0]).toMatchObject({
        attempts: 2,
        deliveredAt: 5_000,
        nextAttemptAt: null,
        lastError: null,
      });
    });
  });

  it("through the ledger: each failed POST is retried at its backoff with the same key, and after maxCallbackAttempts none is sent again", async () => {
    const queue = uniqueId("cb-give-up");
    const batchId = uniqueId("b");
    expect(
      (
        await postBatch({
          batch_id: batchId,
          queue,
          tasks: [task("t", { callback_url: "https://trainer.example/cb" })],
        })
      ).status,
    ).toBe(201);
    const stub = env.BATCH.getByName(batchId);
    const posts: { key: string | null; at: number }[] = [];
    await runInDurableObject(stub, (instance: BatchDO) => {
      instance.callbackFetch = async (_url, init) => {
        posts.push({ key: new Headers(init?.headers).get("Idempotency-Key"), at: Date.now() });
        return new Response("down", { status: 500 });
      };
    });
    const gw = await Gateway.connect(queue);
    try {
      gw.hello("node-cb-give-up", 1);
      await gw.expect("welcome");
      const a = await gw.expect("assign");
      gw.send({
        v: 1,
        type: "result",
        lease_id: a.lease_id,
        result: resultFor(a.session, "node-cb-give-up"),
      });
      expect((await gw.expect("ack")).status).toBe("accepted");
    } finally {
      gw.close();
    }
    // The first POST follows the result; the row then waits its backoff.
    await expect.poll(async () => (await stub.callbackState())[0]?.attempts, POLL).toBe(1);
    const row = () =>
      runInDurableObject(stub, (_, state) =>
        state.storage.sql
          .exec<{ attempts: number; next_attempt_at: number | null; last_error: string | null }>(
            "SELECT attempts, next_attempt_at, last_error FROM callbacks",
          )
          .one(),
      );
    // Attempt i is recorded at a moment between its POST and the read after it: its next try must
    // come callbackBackoffMs(i) after that moment.
    const attempts = [{ next: (await row()).next_attempt_at, after: Date.now() }];
    // Each further attempt: the row made due and delivered in one step inside the object (so the
    // ledger's own alarm cannot take the attempt in between), then its next time read back.
    for (let attempt = 2; attempt <= LIMITS.maxCallbackAttempts; attempt++) {
      await runInDurableObject(stub, async (instance: BatchDO, state) => {
        state.storage.sql.exec("UPDATE callbacks SET next_attempt_at = 1");
        await instance.deliverCallbacks();
      });
      const now = await row();
      expect(now.attempts).toBe(attempt);
      expect(posts).toHaveLength(attempt);
      attempts.push({ next: now.next_attempt_at, after: Date.now() });
    }
    for (const [i, { next, after }] of attempts.entries()) {
      if (i === LIMITS.maxCallbackAttempts - 1) {
        expect(next, "the last failure schedules nothing").toBeNull();
        continue;
      }
      const recordedAt = next! - callbackBackoffMs(i + 1);
      expect(recordedAt, `attempt ${i + 1}`).toBeGreaterThanOrEqual(posts[i]!.at);
      expect(recordedAt, `attempt ${i + 1}`).toBeLessThanOrEqual(after);
    }
    expect(new Set(posts.map((p) => p.key))).toEqual(new Set([`${batchId}:t`]));
    expect(await stub.callbackState()).toEqual([
      { task_index: 0, attempts: LIMITS.maxCallbackAttempts, delivered: false, last_error: "HTTP 500" },
    ]);
    // Given up: neither a delivery pass nor the alarm sends it again.
    await stub.deliverCallbacks();
    await runInDurableObject(stub, (_, state) => state.storage.setAlarm(Date.now()));
    await runDurableObjectAlarm(stub);
    await stub.deliverCallbacks();
    expect(posts).toHaveLength(LIMITS.maxCallbackAttempts);
    expect((await row()).next_attempt_at).toBeNull();
  });
});
