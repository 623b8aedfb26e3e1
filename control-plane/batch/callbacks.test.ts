/**
 * Task callbacks' retry schedule and give-up (`callbacks.ts`): 1 s doubling to 5 minutes, and no
 * further attempt after `LIMITS.maxCallbackAttempts`, the last error kept.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { describe, expect, it } from "vitest";
import { LIMITS } from "../../protocol";
import { uniqueId } from "../testing/fixtures";
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
});
