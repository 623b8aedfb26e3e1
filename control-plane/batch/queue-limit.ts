/**
 * The intake limit of a batch (I5): the sessions it adds to each queue, against the depth that
 * queue's shards report, checked before the batch is stored.
 *
 * @module
 */
import { type BatchRequest, LIMITS } from "../../protocol";
import { shardsOf } from "../queue/shards";
import type { CreateOutcome } from "../shared/ledger-rpc";

/**
 * I5: a trainer over the queue limit gets 429 with Retry-After, before anything is stored. Asks
 * each queue the batch adds to (every shard of it) for its depth; a queue that cannot answer is
 * skipped.
 *
 * @example
 * ```ts
 * const full = await queueOverLimit(env, request, request.queue ?? "default");
 * if (full) return full; // { kind: "queue_full", message, retryAfterSeconds: 30 }
 * ```
 */
export async function queueOverLimit(
  env: Env,
  request: BatchRequest,
  batchQueue: string,
): Promise<Extract<CreateOutcome, { kind: "queue_full" }> | null> {
  const perQueue = new Map<string, number>();
  for (const task of request.tasks) {
    const q = task.queue ?? batchQueue;
    perQueue.set(q, (perQueue.get(q) ?? 0) + task.num_samples);
  }
  for (const [q, adding] of perQueue) {
    let depth: number;
    try {
      // A sharded queue's depth is the sum over its shards.
      const depths = await Promise.all(
        shardsOf(q, env.POLAR_QUEUE_SHARDS).map((name) => env.QUEUE.getByName(name).depth()),
      );
      depth = depths.reduce((a, b) => a + b, 0);
    } catch (error) {
      // The outbox delivers once the queue is back; an unreachable queue must not block intake.
      console.warn(`BatchDO: depth of queue '${q}' unknown:`, error);
      continue;
    }
    if (depth + adding > LIMITS.maxQueueDepth) {
      return {
        kind: "queue_full",
        message: `queue '${q}' holds ${depth} waiting sessions; adding ${adding} would exceed the limit of ${LIMITS.maxQueueDepth} (LIMITS.maxQueueDepth)`,
        retryAfterSeconds: 30,
      };
    }
  }
  return null;
}
