/**
 * Leases whose grace ran out (their gateway left and did not come back): each goes back to its
 * ledger, which requeues the session or ends it as an infrastructure failure.
 *
 * @module
 */
import { DISPATCH_RETRY_MS } from "./settings";
import type { Shard } from "./shard";
import * as store from "./store";

/**
 * Hands every lease past its grace back to its BatchDO; a refused one is retried after
 * DISPATCH_RETRY_MS. Never throws.
 *
 * @example
 * ```ts
 * await processLostLeases(shard); // in the alarm and after a hello
 * ```
 */
export async function processLostLeases(shard: Shard): Promise<void> {
  for (const lease of store.dueLostLeases(shard.db, Date.now())) {
    try {
      const outcome = await shard.env.BATCH.getByName(lease.batchId).leaseLost(
        lease.sessionId,
        lease.leaseId,
        `gateway ${lease.nodeId} lost the session`,
      );
      // Re-read after the await: a reconnect may have reclaimed it meanwhile.
      const current = store.findLease(shard.db, lease.leaseId);
      if (current && (current.lostAt === null || outcome !== "stale" || current.lostAt <= Date.now())) {
        store.deleteLease(shard.db, lease.leaseId);
        if (outcome === "requeued") store.bumpCounter(shard.db, "requeued_leases");
      }
    } catch (error) {
      console.warn(`QueueDO ${shard.shardName}: ledger refused lost lease ${lease.leaseId}:`, error);
      store.setLeaseLostAt(shard.db, lease.leaseId, Date.now() + DISPATCH_RETRY_MS);
    }
  }
}
