/**
 * Runs of an upstream task id. Upstream reruns a finished task id afresh when it is submitted
 * again (a restarted trainer reuses its ids, with a new callback URL); Polar-TS's own API keeps a
 * batch id for good (same body: replay, other body: 409). On `/rollout/*` each submit after the
 * previous run finished starts a new run, stored as its own batch:
 *
 * - run 1 of task `t`: batch `rollout:t`; run n ≥ 2: batch `rollout::n:t` (a task id starts with
 *   a letter or digit, so no run-1 id starts with `rollout::`).
 * - The ledger of run 1 holds the number of the current run (`BatchDO.rolloutGeneration`); a new
 *   run is claimed by compare-and-set on it, so two submits racing on a finished id start one run.
 * - While a run is running: the same body is an idempotent replay (200), another body 409 (as
 *   upstream's "already running").
 * - A task id cancelled before it was ever submitted (`DELETE …?register_if_missing=true`) refuses
 *   submits for {@link TOMBSTONE_SECONDS} (upstream's window), then runs afresh like any finished id.
 * - `GET`/`DELETE` see the current run; when a claimed run could not be created (e.g. 429), the
 *   previous one.
 *
 * @module
 */
import { type BatchStatusBody, LIMITS } from "../../protocol";
import { ApiError } from "../errors";
import { ROLLOUT_PREFIX, rolloutState } from "./render";

/** How long a tombstone of a never-submitted task id refuses submits (upstream: 300 s). */
export const TOMBSTONE_SECONDS = 300;

/** Longest run number the batch ids leave room for. */
const MAX_RUN_DIGITS = 6;

/** Longest task id on `/rollout/*`: `rollout::<run>:<task_id>` must fit a batch id. */
export const MAX_ROLLOUT_TASK_ID_CHARS =
  LIMITS.maxBatchIdChars - `${ROLLOUT_PREFIX}:`.length - MAX_RUN_DIGITS - 1;

/**
 * The batch id of run `run` (1-based) of upstream task `taskId`; 400 naming `task_id` when the id
 * is too long for the `/rollout` routes.
 *
 * @example
 * ```ts
 * rolloutBatchId("t1"); // "rollout:t1"
 * rolloutBatchId("t1", 2); // "rollout::2:t1"
 * ```
 */
export function rolloutBatchId(taskId: string, run = 1): string {
  if (taskId.length > MAX_ROLLOUT_TASK_ID_CHARS) {
    throw ApiError.badRequest(
      "validation_failed",
      `task_id: at most ${MAX_ROLLOUT_TASK_ID_CHARS} characters on /rollout routes`,
      [{ field: "task_id", message: "too long" }],
    );
  }
  return run === 1 ? `${ROLLOUT_PREFIX}${taskId}` : `${ROLLOUT_PREFIX}:${run}:${taskId}`;
}

/**
 * The task id and run of an upstream batch id, or null for another batch id.
 *
 * @example
 * ```ts
 * parseRolloutBatchId("rollout::3:t1"); // { taskId: "t1", run: 3 }
 * ```
 */
export function parseRolloutBatchId(batchId: string): { taskId: string; run: number } | null {
  if (!batchId.startsWith(ROLLOUT_PREFIX)) return null;
  const rest = batchId.slice(ROLLOUT_PREFIX.length);
  const later = /^:(\d+):(.+)$/.exec(rest);
  if (later) return { taskId: later[2]!, run: Number(later[1]) };
  return rest.length > 0 ? { taskId: rest, run: 1 } : null;
}

/**
 * True for a batch that is only a tombstone (cancelled before it was ever submitted).
 *
 * @example
 * ```ts
 * isTombstone(status); // true for what DELETE …?register_if_missing=true left of an unknown id
 * ```
 */
export function isTombstone(status: BatchStatusBody): boolean {
  return status.tasks.length === 0;
}

/** The run a task id shows: its batch id and status (null when it never ran). */
export interface CurrentRun {
  batchId: string;
  run: number;
  status: BatchStatusBody | null;
}

/**
 * The current run of `taskId`; when the claimed run was never created, the one before it.
 *
 * @example
 * ```ts
 * const { batchId, status } = await currentRun(env, "t1");
 * ```
 */
export async function currentRun(env: Env, taskId: string): Promise<CurrentRun> {
  const run = await env.BATCH.getByName(rolloutBatchId(taskId)).rolloutGeneration();
  const batchId = rolloutBatchId(taskId, run);
  const status = await env.BATCH.getByName(batchId).status();
  if (status || run === 1) return { batchId, run, status };
  const previous = rolloutBatchId(taskId, run - 1);
  const before = await env.BATCH.getByName(previous).status();
  return before ? { batchId: previous, run: run - 1, status: before } : { batchId, run, status };
}

/**
 * The batch id a submit of `taskId` must create (or replay) under the rule of this module: the
 * current run when it is absent or running, else a newly claimed run. 409 within the tombstone
 * window.
 *
 * @example
 * ```ts
 * const batchId = await batchForSubmit(env, "t1", Date.now()); // "rollout::2:t1" after a finished run 1
 * ```
 */
export async function batchForSubmit(env: Env, taskId: string, now: number): Promise<string> {
  const head = env.BATCH.getByName(rolloutBatchId(taskId));
  // Each pass either returns or sees a run number that another submit just advanced: a few
  // passes cover any realistic race; more means something keeps finishing runs instantly.
  for (let pass = 0; pass < 8; pass++) {
    const run = await head.rolloutGeneration();
    const batchId = rolloutBatchId(taskId, run);
    const status = await env.BATCH.getByName(batchId).status();
    if (!status) return batchId;
    if (isTombstone(status)) {
      const age = now - (status.cancelled_at ?? 0);
      if (age < TOMBSTONE_SECONDS * 1000) {
        throw ApiError.conflict(
          `task '${taskId}' was cancelled before submission (DELETE with register_if_missing); it can be submitted again ${Math.ceil(TOMBSTONE_SECONDS - age / 1000)} s from now`,
        );
      }
    } else if (rolloutState(status) === "running") {
      return batchId;
    }
    await head.advanceRolloutGeneration(run);
  }
  throw new ApiError(503, "busy", `task '${taskId}': could not claim a new run; retry`, undefined, {
    "Retry-After": "1",
  });
}
