/**
 * Cancelling a batch or one of its tasks: every open session ends CANCELLED and the queues are
 * told to withdraw them, through the outbox written in the same transaction.
 *
 * @module
 */

import type { CancelOutcome } from "../shared/ledger-rpc";
import type { Deliveries } from "./deliveries";
import { recordBatchEvent } from "./events";
import type { Ledger } from "./ledger";
import * as lifecycle from "./lifecycle";
import * as outbox from "./outbox-store";
import * as store from "./store";

/**
 * Cancels the batch (`taskId` null) or one task: every open session ends CANCELLED and the
 * queues withdraw them. Idempotent. Cancelling an unknown batch leaves a tombstone, so the id
 * cannot be submitted later (upstream's `register_if_missing`). With `onlyIfOpen` (upstream's
 * DELETE), a batch whose sessions have all ended is left as it is (`finished`), not relabelled
 * cancelled.
 *
 * @example
 * ```ts
 * await cancel(ledger, deliveries, "b_1", null); // { kind: "cancelled", ended: 8 }
 * ```
 */
export async function cancel(
  ledger: Ledger,
  deliveries: Deliveries,
  batchId: string,
  taskId: string | null,
  opts: { onlyIfOpen?: boolean } = {},
): Promise<CancelOutcome> {
  const { db } = ledger;
  const outcome = ledger.ctx.storage.transactionSync((): CancelOutcome => {
    const now = Date.now();
    const batch = store.readBatch(db);
    if (batch && opts.onlyIfOpen && store.allSessionsFinished(db)) return { kind: "finished" };
    if (!batch) {
      if (taskId !== null) return { kind: "not_found", message: `batch '${batchId}' does not exist` };
      store.insertTombstone(db, batchId, store.TOMBSTONE, now);
      return { kind: "cancelled", ended: 0 };
    }
    let taskIndex: number | null = null;
    if (taskId !== null) {
      const task = store.taskById(db, taskId);
      if (!task) return { kind: "not_found", message: `task '${taskId}' is not in batch '${batchId}'` };
      taskIndex = task.taskIndex;
    }
    const withdrawn = lifecycle.cancelSessions(db, batch.batchId, taskIndex, now);
    outbox.addWithdrawals(db, withdrawn, now);
    // The batch is cancelled even when no session was open any more: say so.
    if (taskIndex === null) recordBatchEvent(db, now);
    return { kind: "cancelled", ended: withdrawn.length };
  });
  if (outcome.kind === "cancelled") ledger.events.schedule();
  if (outcome.kind === "cancelled" && outcome.ended > 0) await deliveries.afterChange();
  return outcome;
}
