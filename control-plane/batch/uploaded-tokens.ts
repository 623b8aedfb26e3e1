/**
 * Token counts of a trajectory uploaded to R2 (over `LIMITS.inlineTrajectoryBytes`): its traces
 * are not in the result, so the ledger reads the object once after acceptance, off the path of
 * the gateway's ack, and fills the result's `prompt_tokens` / `response_tokens` (what
 * `GET /v1/batches/:id/summary` sums). Best effort: a missing or unreadable object leaves them
 * null, and the summary counts only what it knows.
 *
 * @module
 */
import { and, eq, isNull } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import type { ArtifactRef } from "../../protocol";
import * as schema from "./schema";

/** Largest uploaded trajectory counted (parsing one holds it in the object's memory). */
export const MAX_COUNTED_TRAJECTORY_BYTES = 32 * 1024 * 1024;

/**
 * Counts the token ids of the trajectory stored under `ref` and records them on `sessionId`'s
 * result (only where none are recorded). Never throws.
 *
 * @example
 * ```ts
 * ctx.waitUntil(countUploadedTokens(db, env.TRAJECTORIES, sessionId, refs.trajectory));
 * ```
 */
export async function countUploadedTokens(
  db: DrizzleSqliteDODatabase<typeof schema>,
  bucket: R2Bucket,
  sessionId: string,
  ref: ArtifactRef,
): Promise<void> {
  try {
    if (ref.bytes > MAX_COUNTED_TRAJECTORY_BYTES) return;
    const object = await bucket.get(ref.key);
    if (!object) return;
    const trajectory = (await object.json()) as {
      traces?: { prompt_ids?: unknown[]; response_ids?: unknown[] }[];
    };
    const traces = Array.isArray(trajectory.traces) ? trajectory.traces : [];
    const promptTokens = traces.reduce((n, t) => n + (t.prompt_ids?.length ?? 0), 0);
    const responseTokens = traces.reduce((n, t) => n + (t.response_ids?.length ?? 0), 0);
    db.update(schema.results)
      .set({ promptTokens, responseTokens })
      .where(and(eq(schema.results.sessionId, sessionId), isNull(schema.results.promptTokens)))
      .run();
  } catch (error) {
    console.warn(`token counts of the uploaded trajectory of ${sessionId} unknown:`, error);
  }
}
