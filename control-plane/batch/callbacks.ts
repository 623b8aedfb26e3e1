/**
 * Task callbacks: when a task's group completes, POST its TaskResult (upstream's shape:
 * `{task_id, status, results, result_paths}` plus `batch_id`) to the callback URL. Delivery is
 * at-least-once: retried with exponential backoff until a 2xx or `LIMITS.maxCallbackAttempts`;
 * every attempt carries the same `Idempotency-Key` so the trainer can drop repeats.
 *
 * @module
 */
import { and, asc, eq, inArray, isNotNull, isNull, lte } from "drizzle-orm";
import { LIMITS } from "../../protocol";
import { callbackUrlProblem } from "../callback-url";
import { idChunks } from "../sql-chunks";
import * as schema from "./schema";
import type { BatchDb } from "./store";

/** Per-attempt timeout of a callback POST. */
export const CALLBACK_TIMEOUT_MS = 10_000;

/**
 * Backoff before retry `attempts`: 1 s doubling, at most 5 minutes.
 *
 * @example
 * ```ts
 * callbackBackoffMs(3); // 4000
 * ```
 */
export function callbackBackoffMs(attempts: number): number {
  return Math.min(300_000, 1000 * 2 ** Math.max(0, attempts - 1));
}

/** A callback due for delivery. */
export interface DueCallback {
  taskIndex: number;
  taskId: string;
  url: string;
  attempts: number;
}

/**
 * Callbacks due at `now`.
 *
 * @example
 * ```ts
 * for (const cb of dueCallbacks(db, Date.now())) await deliver(cb);
 * ```
 */
export function dueCallbacks(db: BatchDb, now: number): DueCallback[] {
  return db
    .select({
      taskIndex: schema.callbacks.taskIndex,
      taskId: schema.tasks.taskId,
      url: schema.callbacks.url,
      attempts: schema.callbacks.attempts,
    })
    .from(schema.callbacks)
    .innerJoin(schema.tasks, eq(schema.tasks.taskIndex, schema.callbacks.taskIndex))
    .where(
      and(
        isNull(schema.callbacks.deliveredAt),
        isNotNull(schema.callbacks.nextAttemptAt),
        lte(schema.callbacks.nextAttemptAt, now),
      ),
    )
    .orderBy(asc(schema.callbacks.taskIndex))
    .all();
}

/**
 * Result sequence numbers of a task's sessions (the callback body is built from them).
 *
 * @example
 * ```ts
 * taskResultSeqs(db, 0); // [3, 5, 9]
 * ```
 */
export function taskResultSeqs(db: BatchDb, taskIndex: number): number[] {
  const ids = db
    .select({ id: schema.sessions.sessionId })
    .from(schema.sessions)
    .where(eq(schema.sessions.taskIndex, taskIndex))
    .orderBy(asc(schema.sessions.sampleIndex))
    .all()
    .map((r) => r.id);
  if (ids.length === 0) return [];
  // In chunks: a task may have up to 1024 samples (SQLite's parameter limit).
  const bySession = new Map(
    idChunks(ids).flatMap((chunk) =>
      db
        .select({ seq: schema.results.seq, sessionId: schema.results.sessionId })
        .from(schema.results)
        .where(inArray(schema.results.sessionId, chunk))
        .all()
        .map((r): [string, number] => [r.sessionId, r.seq]),
    ),
  );
  return ids.map((id) => bySession.get(id)).filter((s): s is number => s !== undefined);
}

/**
 * Records the outcome of one delivery attempt.
 *
 * @example
 * ```ts
 * recordAttempt(db, 0, null, Date.now()); // delivered
 * ```
 */
export function recordAttempt(db: BatchDb, taskIndex: number, error: string | null, now: number): void {
  const row = db.select().from(schema.callbacks).where(eq(schema.callbacks.taskIndex, taskIndex)).get();
  if (!row) return;
  const attempts = row.attempts + 1;
  if (error === null) {
    db.update(schema.callbacks)
      .set({ attempts, deliveredAt: now, nextAttemptAt: null, lastError: null })
      .where(eq(schema.callbacks.taskIndex, taskIndex))
      .run();
    return;
  }
  const giveUp = attempts >= LIMITS.maxCallbackAttempts;
  if (giveUp)
    console.warn(`callback of task index ${taskIndex} abandoned after ${attempts} attempts: ${error}`);
  db.update(schema.callbacks)
    .set({
      attempts,
      nextAttemptAt: giveUp ? null : now + callbackBackoffMs(attempts),
      lastError: error.slice(0, 1000),
    })
    .where(eq(schema.callbacks.taskIndex, taskIndex))
    .run();
}

/**
 * Ends a callback without sending it (a policy, not a failure): it is never retried, and
 * `last_error` says why.
 *
 * @example
 * ```ts
 * skipCallback(db, 0, "not sent: the task was cancelled");
 * ```
 */
export function skipCallback(db: BatchDb, taskIndex: number, reason: string): void {
  db.update(schema.callbacks)
    .set({ nextAttemptAt: null, lastError: reason })
    .where(eq(schema.callbacks.taskIndex, taskIndex))
    .run();
}

/**
 * POSTs one callback body; resolves to null on a 2xx, else the reason.
 *
 * @example
 * ```ts
 * const error = await postCallback(fetch, url, body, "b_1:t0", false);
 * ```
 */
export async function postCallback(
  fetcher: typeof fetch,
  url: string,
  body: string,
  idempotencyKey: string,
  allowPrivate: boolean,
): Promise<string | null> {
  const problem = callbackUrlProblem(url, allowPrivate);
  if (problem) return `callback_url ${problem}`;
  try {
    const res = await fetcher(url, {
      method: "POST",
      headers: { "Content-Type": "application/json", "Idempotency-Key": idempotencyKey },
      body,
      signal: AbortSignal.timeout(CALLBACK_TIMEOUT_MS),
      // Never follow a redirect: its target was never checked, so a public host could bounce the
      // POST to a private one. With "manual", fetch hands back the 3xx itself (Fetch standard;
      // workerd implements it), and the callback counts as failed and is retried with backoff.
      redirect: "manual",
    });
    await res.body?.cancel().catch(() => {});
    if (res.status >= 300 && res.status < 400)
      return `HTTP ${res.status}: redirects are not followed (callback_url must be the final address${res.headers.get("location") ? `; Location: ${res.headers.get("location")}` : ""})`;
    return res.ok ? null : `HTTP ${res.status}`;
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * Every callback row (tests and observability).
 *
 * @example
 * ```ts
 * allCallbacks(db).filter((c) => c.deliveredAt === null);
 * ```
 */
export function allCallbacks(db: BatchDb): (typeof schema.callbacks.$inferSelect)[] {
  return db.select().from(schema.callbacks).all();
}
