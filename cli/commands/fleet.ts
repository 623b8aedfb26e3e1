/**
 * `polar status` without a batch id: the whole fleet at a glance — each queue shard's depth and
 * leases, the queue's fence (paused, mode, policy version), and every gateway.
 *
 * @module
 */
import type { FenceStatusResponse } from "../../protocol";
import type { ControlPlaneClient, GatewayList } from "../client";
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";
import { gatewayTable } from "./gateways";

/** The fleet: the gateway listing and the fence of each queue it names. */
export interface Fleet extends GatewayList {
  fences: FenceStatusResponse[];
}

/**
 * Reads the gateway listing and the fence of every queue in it (one request per queue, together).
 *
 * @example
 * ```ts
 * const { gateways, queues, fences } = await readFleet(client);
 * ```
 */
export async function readFleet(client: ControlPlaneClient): Promise<Fleet> {
  const list = await client.gateways();
  const queues = [...new Set([...list.queues.map((q) => q.queue), ...list.gateways.map((g) => g.queue)])];
  const fences = await Promise.all(queues.sort().map((q) => client.fence(q)));
  return { ...list, fences };
}

/** The fleet as text: queues (depth, leases, fence), then gateways. */
export function fleetText(fleet: Fleet, now: number): string {
  const fenceOf = new Map(fleet.fences.map((f) => [f.queue, f.fence]));
  const queues = table(
    ["queue", "shard", "pending", "leases", "fence", "policy_version"],
    fleet.queues.map((q) => {
      const f = fenceOf.get(q.queue);
      const fence = !f ? "-" : f.paused ? `paused (${f.mode ?? "drain"})` : "open";
      return [q.queue, q.shard, q.pending, q.leases, fence, f?.policy_version ?? "-"];
    }),
  );
  const connected = fleet.gateways.filter((g) => g.connected).length;
  return [
    fleet.queues.length ? queues : "no queues yet",
    "",
    `gateways: ${connected} connected of ${fleet.gateways.length}`,
    gatewayTable(fleet, now),
  ].join("\n");
}

/** Prints the fleet. */
export async function runFleetStatus(opts: ConnectionOptions): Promise<void> {
  const fleet = await readFleet(connect(opts, "read"));
  if (opts.json) return printJson(fleet);
  console.log(fleetText(fleet, Date.now()));
}
