/**
 * `polar gateways [--json]`: every gateway of every queue (connected or not, draining, credit,
 * leases, capacity and the sessions in each stage), from `GET /v1/gateways`.
 *
 * @module
 */
import type { GatewayList } from "../client";
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";

/** How long ago `at` (epoch ms) was, as "12s", or "-" when never. */
function ago(at: number | null, now: number): string {
  return at === null ? "-" : `${Math.max(0, Math.round((now - at) / 1000))}s`;
}

/**
 * The gateways as a text table: one row per gateway, stages as `init/ready/run/postrun` counts.
 *
 * @example
 * ```ts
 * console.log(gatewayTable(await client.gateways(), Date.now()));
 * ```
 */
export function gatewayTable(list: GatewayList, now: number): string {
  if (list.gateways.length === 0) return "no gateways have connected";
  return table(
    ["node", "queue", "state", "credit", "leases", "capacity", "stages i/r/run/p", "last seen"],
    list.gateways.map((g) => {
      const m = g.metrics;
      const stages = m
        ? `${m.init_inflight ?? 0}/${m.ready_depth ?? 0}/${m.run_inflight ?? 0}/${m.postrun_inflight ?? 0}`
        : "-";
      const state = !g.connected ? "down" : g.draining ? "draining" : "up";
      const capacity = `${g.capacity.max_init}/${g.capacity.max_run}/${g.capacity.max_postrun}`;
      return [g.node_id, g.queue, state, g.credit, g.leases, capacity, stages, ago(g.last_seen_at, now)];
    }),
  );
}

/** Prints the gateway listing. */
export async function runGateways(opts: ConnectionOptions): Promise<void> {
  const list = await connect(opts, "read").gateways();
  if (opts.json) return printJson(list);
  console.log(gatewayTable(list, Date.now()));
}
