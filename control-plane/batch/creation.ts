/**
 * Creating a batch: its tasks, sessions and outbox rows in one transaction, idempotent under the
 * request's hash, refused when the queue is over its depth limit or the id was cancelled.
 *
 * @module
 */
import type { BatchRequest } from "../../protocol";
import type { CreateOutcome } from "../shared/ledger-rpc";
import type { Deliveries } from "./deliveries";
import type { Ledger } from "./ledger";
import { queueOverLimit } from "./queue-limit";
import * as store from "./store";

/**
 * Thrown when a request reaches the BatchDO of another batch id (a routing bug, never user input).
 *
 * @example
 * ```ts
 * throw new BatchRoutingError("batch b_1 was routed to the ledger of b_2");
 * ```
 */
export class BatchRoutingError extends Error {
  override name = "BatchRoutingError";
}

/** The answer to a create whose batch is already stored: a replay, or a conflict. */
function existingOutcome(
  ledger: Ledger,
  existing: NonNullable<ReturnType<typeof store.readBatch>>,
  request: BatchRequest & { batch_id: string },
  requestHash: string,
): CreateOutcome {
  if (existing.cancelledAt !== null) {
    return {
      kind: "conflict",
      message: `batch '${request.batch_id}' was cancelled; a cancelled batch id cannot be resubmitted`,
    };
  }
  if (existing.requestHash !== requestHash) {
    return {
      kind: "conflict",
      message: `batch '${request.batch_id}' already exists with a different body`,
    };
  }
  const status = store.batchStatus(ledger.db)!;
  return {
    kind: "exists",
    body: {
      batch_id: existing.batchId,
      queue: existing.queue,
      tasks: status.tasks.length,
      sessions: status.sessions,
      created: false,
    },
  };
}

/**
 * Creates the batch (tasks, sessions, outbox) in one transaction, then tries to deliver the
 * outbox right away. Replaying the same request hash answers `exists`; another hash, or a
 * cancelled id, `conflict`; a queue over `LIMITS.maxQueueDepth` `queue_full`.
 *
 * @example
 * ```ts
 * const outcome = await createBatch(ledger, deliveries, request, await canonicalHash(request));
 * ```
 */
export async function createBatch(
  ledger: Ledger,
  deliveries: Deliveries,
  request: BatchRequest & { batch_id: string },
  requestHash: string,
): Promise<CreateOutcome> {
  const { ctx, db } = ledger;
  const name = ctx.id.name;
  if (name !== undefined && name !== request.batch_id) {
    throw new BatchRoutingError(`batch ${request.batch_id} was routed to the ledger of ${name}`);
  }
  const queue = request.queue ?? "default";
  if (!store.readBatch(db)) {
    const full = await queueOverLimit(ledger.env, request, queue);
    if (full) return full;
  }
  // The limit check awaited (the input gate opened): the batch is read again inside the transaction.
  const outcome = ctx.storage.transactionSync((): CreateOutcome => {
    const existing = store.readBatch(db);
    if (existing) return existingOutcome(ledger, existing, request, requestHash);
    const counts = store.insertBatch(db, request, requestHash, queue, Date.now(), ledger.noGatewayMs);
    return { kind: "created", body: { batch_id: request.batch_id, queue, ...counts, created: true } };
  });
  if (outcome.kind === "created") {
    ledger.events.schedule();
    await deliveries.drainOutbox();
  }
  return outcome;
}
