/**
 * Delivery of task callbacks: for every due callback, its body (the upstream shape for a rollout
 * batch, Polar's own otherwise) from the task's accepted results, one POST, and the attempt
 * recorded with its backoff (`callbacks.ts`).
 *
 * @module
 */
import type { SessionResult } from "../../protocol";
import { resultJson } from "../artifacts";
import { privateCallbacksAllowed } from "../callback-url";
import { callbackId, isRolloutBatch, rolloutState, upstreamTaskResult } from "../upstream/render";
import * as callbacks from "./callbacks";
import * as resultStore from "./result-store";
import * as store from "./store";

/**
 * POSTs every due callback once; failures are rescheduled with backoff. Never throws.
 *
 * @example
 * ```ts
 * await deliverDueCallbacks(db, env, fetch);
 * ```
 */
export async function deliverDueCallbacks(db: store.BatchDb, env: Env, fetcher: typeof fetch): Promise<void> {
  const batch = store.readBatch(db);
  if (!batch) return;
  for (const due of callbacks.dueCallbacks(db, Date.now())) {
    let error: string | null;
    try {
      const seqs = callbacks.taskResultSeqs(db, due.taskIndex);
      const results = await Promise.all(
        seqs.map((seq) => resultJson(env.TRAJECTORIES, resultStore.resultBySeq(db, seq)!)),
      );
      const task = store.taskByIndex(db, due.taskIndex);
      const status = task?.cancelledAt !== null ? "cancelled" : "completed";
      let body: string;
      if (isRolloutBatch(batch.batchId)) {
        // Upstream posts no callback for a cancelled task: none is sent (nor retried).
        if (status === "cancelled") {
          callbacks.skipCallback(
            db,
            due.taskIndex,
            "not sent: upstream sends no callback for a cancelled task",
          );
          continue;
        }
        const state = rolloutState({ ...store.batchStatus(db)!, cancelled_at: null });
        body = JSON.stringify(
          upstreamTaskResult(
            due.taskId,
            batch.batchId,
            state === "failed" ? "failed" : "completed",
            results.map((r) => JSON.parse(r) as SessionResult),
          ),
        );
      } else {
        body = `{"task_id":${JSON.stringify(due.taskId)},"batch_id":${JSON.stringify(batch.batchId)},"status":"${status}","results":[${results.join(",")}],"result_paths":[]}`;
      }
      error = await callbacks.postCallback(
        fetcher,
        due.url,
        body,
        callbackId(batch.batchId, due.taskId),
        privateCallbacksAllowed(env),
      );
    } catch (e) {
      error = e instanceof Error ? e.message : String(e);
    }
    callbacks.recordAttempt(db, due.taskIndex, error, Date.now());
  }
}
