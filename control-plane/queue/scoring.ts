/**
 * Choosing the gateway for the next session, by upstream Polar's rule (`balancer.py`): the
 * minimum of the tuple (run pressure, post-run pressure, init pressure, −READY gap, total
 * pressure, node id). Pressures come from the stage metrics the gateway last sent (on `credit`
 * and `progress`) plus the assignments made since then (upstream's `dispatch_reservations`),
 * so a burst of assignments spreads over gateways before their next metrics arrive.
 *
 * @module
 */
import type { GatewayCapacity, StageMetrics } from "../../protocol";

/** What the scorer needs to know about one gateway. */
export interface GatewayLoad {
  nodeId: string;
  capacity: GatewayCapacity;
  /** Last metrics, or null before the first ones arrive. */
  metrics: StageMetrics | null;
  /** Assignments since the last metrics. */
  reservations: number;
  /** Leases held (used as INIT load while no metrics have arrived). */
  leases: number;
}

/**
 * The score tuple of one gateway; lower is better, compared element by element.
 *
 * @example
 * ```ts
 * scoreOf({ nodeId: "a", capacity, metrics: null, reservations: 0, leases: 0 }); // [0, 0, 0, -cap, 0, "a"]
 * ```
 */
export function scoreOf(g: GatewayLoad): [number, number, number, number, number, string] {
  const m = g.metrics;
  const run = m ? m.run_inflight / g.capacity.max_run : 0;
  const postrun = m ? (m.postrun_inflight + m.postrun_queue_depth) / g.capacity.max_postrun : 0;
  const initLoad = m ? m.init_inflight + m.init_queue_depth + g.reservations : g.leases;
  const init = initLoad / g.capacity.max_init;
  // READY gap: how far the warm-runtime buffer is below max_run (larger gap = preferred).
  const ready = m ? m.ready_depth : 0;
  const gap = Math.max(0, g.capacity.max_run - ready - (m ? 0 : g.leases));
  const total = run + postrun + init;
  return [run, postrun, init, -gap, total, g.nodeId];
}

function compare(a: ReturnType<typeof scoreOf>, b: ReturnType<typeof scoreOf>): number {
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x < y) return -1;
    if (x > y) return 1;
  }
  return 0;
}

/**
 * The best gateway of `candidates` (all already eligible: connected, credit, not draining).
 *
 * @example
 * ```ts
 * const best = pickBest(loads); // undefined when the list is empty
 * ```
 */
export function pickBest(candidates: GatewayLoad[]): GatewayLoad | undefined {
  let best: GatewayLoad | undefined;
  let bestScore: ReturnType<typeof scoreOf> | undefined;
  for (const c of candidates) {
    const score = scoreOf(c);
    if (!bestScore || compare(score, bestScore) < 0) {
      best = c;
      bestScore = score;
    }
  }
  return best;
}
