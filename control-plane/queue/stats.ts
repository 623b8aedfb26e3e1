/**
 * What one shard reports about itself: its gateways as the dispatcher sees them, its sizes and
 * counters (tests, listings, the upstream `/nodes` routes), and gateway presence (the ledger's
 * no-gateway deadline).
 *
 * @module
 */
import type { QueueCounters } from "./counter-store";
import { checkLiveness } from "./liveness";
import type { Shard } from "./shard";
import * as store from "./store";

/**
 * One gateway as the dispatcher sees it (`QueueDO.stats()`); the gateway's own view of itself is
 * `GatewayStats` of the gateway agent.
 *
 * @example
 * ```ts
 * const idle = (await stub.stats()).gateways.filter((g: GatewayView) => g.leases === 0);
 * ```
 */
export interface GatewayView {
  node_id: string;
  /** The queue name gateways and trainers use. */
  queue: string;
  /** The dispatcher holding this gateway: the queue name, or `queue#i` for a sharded queue. */
  shard: string;
  credit: number;
  connected: boolean;
  draining: boolean;
  leases: number;
  /** Sessions assigned since the gateway's last metrics (upstream's `dispatch_reservations`). */
  reservations: number;
  capacity: { max_init: number; max_run: number; max_postrun: number };
  metrics: {
    init_queue_depth: number;
    init_inflight: number;
    ready_depth: number;
    run_inflight: number;
    postrun_queue_depth: number;
    postrun_inflight: number;
  } | null;
  connected_at: number;
  disconnected_at: number | null;
  last_seen_at: number | null;
}

/**
 * Whether this dispatcher has a gateway connected, and when it last had one (null: never). The
 * ledger uses it to end sessions of a queue that has had no gateway for a long time.
 *
 * @example
 * ```ts
 * const presence: GatewayPresence = { connected: false, last_connected_at: null };
 * ```
 */
export interface GatewayPresence {
  connected: boolean;
  last_connected_at: number | null;
}

/**
 * Snapshot of one dispatcher shard (tests and observability).
 *
 * @example
 * ```ts
 * const { pending, leases } = await env.QUEUE.getByName("default").stats();
 * ```
 */
export interface ShardStats {
  queue: string;
  /** This dispatcher's name (`queue` or `queue#i`). */
  shard: string;
  pending: number;
  leases: number;
  gateways: GatewayView[];
  counters: QueueCounters;
}

/**
 * Pending, leases, gateways and counters of the shard.
 *
 * @example
 * ```ts
 * shardStats(shard).gateways.length;
 * ```
 */
export function shardStats(shard: Shard): ShardStats {
  const { db, queue, shardName } = shard;
  const gateways: GatewayView[] = store.listGateways(db).map((g) => ({
    node_id: g.nodeId,
    queue,
    shard: shardName,
    credit: g.credit,
    connected: g.connected,
    draining: g.draining,
    leases: store.leasesOfNode(db, g.nodeId).length,
    reservations: g.reservations,
    capacity: JSON.parse(g.capacity) as GatewayView["capacity"],
    metrics: g.metrics ? (JSON.parse(g.metrics) as GatewayView["metrics"]) : null,
    connected_at: g.connectedAt,
    disconnected_at: g.disconnectedAt,
    last_seen_at: g.lastSeenAt,
  }));
  return { queue, shard: shardName, ...store.sizes(db), gateways, counters: store.readCounters(db) };
}

/**
 * Whether a gateway is connected here (after closing silent ones), else when the last one left.
 * A draining gateway counts as connected: an operator chose to hold it.
 *
 * @example
 * ```ts
 * gatewayPresence(shard, Date.now()).connected;
 * ```
 */
export function gatewayPresence(shard: Shard, now: number): GatewayPresence {
  checkLiveness(shard, now);
  let connected = false;
  let last: number | null = null;
  for (const gw of store.listGateways(shard.db)) {
    connected ||= gw.connected;
    const seen = gw.connected ? now : (gw.disconnectedAt ?? gw.connectedAt);
    last = last === null ? seen : Math.max(last, seen);
  }
  return { connected, last_connected_at: last };
}
