/**
 * What one dispatcher shard contributes to the control plane's `GET /metrics`, read from its own
 * tables in one synchronous pass: sizes, gateways, the fence, the batches it holds work of, the
 * dispatch-latency histogram and accepted results (kept in the counter rows as sessions are leased
 * and results recorded), and the dispatcher's other counters.
 *
 * @module
 */
import { sql } from "drizzle-orm";
import type { FenceState } from "../../protocol";
import { type DispatchHistogram, type QueueCounters, readMetricCounters } from "./counter-store";
import { readFence } from "./fence";
import * as schema from "./schema";
import type { Shard } from "./shard";
import * as store from "./store";

/**
 * One shard's metrics snapshot (`QueueDO.metrics()`).
 *
 * @example
 * ```ts
 * const m: ShardMetrics = await env.QUEUE.getByName("default").metrics();
 * m.dispatch.count; // sessions leased here so far
 * ```
 */
export interface ShardMetrics {
  queue: string;
  shard: string;
  pending: number;
  leases: number;
  /** Distinct batches with a session pending or leased here. */
  active_batches: number;
  gateways: { node_id: string; connected: boolean; draining: boolean; credit: number; leases: number }[];
  fence: Pick<FenceState, "paused" | "policy_version" | "fence_seq">;
  dispatch: DispatchHistogram;
  /** Results the ledger accepted through this shard, by session status. */
  results: Record<string, number>;
  counters: QueueCounters;
}

/**
 * Reads the snapshot (no await: one consistent view of the shard's tables).
 *
 * @example
 * ```ts
 * shardMetrics(shard).pending;
 * ```
 */
export function shardMetrics(shard: Shard): ShardMetrics {
  const { db, queue, shardName } = shard;
  const leasesByNode = new Map<string, number>();
  for (const row of db
    .select({ node: schema.leases.nodeId, n: sql<number>`count(*)` })
    .from(schema.leases)
    .groupBy(schema.leases.nodeId)
    .all())
    leasesByNode.set(row.node, row.n);
  const active =
    db
      .select({
        n: sql<number>`count(*)`,
      })
      .from(
        sql`(select ${schema.pending.batchId} as b from ${schema.pending} union select ${schema.leases.batchId} from ${schema.leases})`,
      )
      .get()?.n ?? 0;
  const fence = readFence(db, queue);
  return {
    queue,
    shard: shardName,
    ...store.sizes(db),
    active_batches: active,
    gateways: store.listGateways(db).map((g) => ({
      node_id: g.nodeId,
      connected: g.connected,
      draining: g.draining,
      credit: g.credit,
      leases: leasesByNode.get(g.nodeId) ?? 0,
    })),
    fence: { paused: fence.paused, policy_version: fence.policy_version, fence_seq: fence.fence_seq },
    ...readMetricCounters(db),
    counters: store.readCounters(db),
  };
}
