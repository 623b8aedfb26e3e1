/**
 * The fleet as its view sees it: the gateways and queue shards (`GET /v1/gateways`) with each
 * queue's fence (`GET /v1/queues/:queue/inference`), read again when the state-event stream
 * reports a gateway or fence change (a burst coalesced into one read per 300 ms).
 *
 * @module
 */
import type { Api } from "./api";
import type { FenceNode, FenceStatus, GatewayList } from "./api-types";
import { type Resource, useCoalesced, useResource, useStream } from "./hooks";
import type { LiveState } from "./live";
import { getFence, listGateways } from "./requests";
import { eventsPath } from "./streams";

/** A queue's fence, or the error that kept it from being read. */
export interface QueueFence {
  queue: string;
  fence: FenceStatus | undefined;
  error: Error | undefined;
}

/** The gateways and queues with each queue's fence. */
export type Fleet = GatewayList & { fences: QueueFence[] };

/** What {@link useFleet} returns. */
export interface FleetData {
  fleet: Resource<Fleet>;
  live: LiveState;
}

/** Reads every queue's fence; one that fails is kept as its error, not the whole view's. */
async function readFleet(api: Api): Promise<Fleet> {
  const g = await listGateways(api);
  const queues = [...new Set(g.queues.map((q) => q.queue))];
  const fences = await Promise.all(
    queues.map((q) =>
      getFence(api, q).then(
        (f): QueueFence => ({ queue: q, fence: f, error: undefined }),
        (e: Error): QueueFence => ({ queue: q, fence: undefined, error: e }),
      ),
    ),
  );
  return { ...g, fences };
}

/**
 * Loads the fleet and follows its gateway and fence events.
 *
 * @example
 * ```ts
 * const { fleet, live } = useFleet(api);
 * ```
 */
export function useFleet(api: Api): FleetData {
  const fleet = useResource(() => readFleet(api), []);
  const reload = useCoalesced(fleet.reload, 300);
  const live = useStream(
    { path: eventsPath({ kinds: "gateway,fence" }), fromHead: true, token: api.token, onEvent: reload },
    [api.token],
  );
  return { fleet, live };
}

/**
 * A gateway's gate as its queue's fence reports it (paused, policy version), if any fence does.
 *
 * @example
 * ```ts
 * gateOf(fleet.fences, "node-0")?.paused;
 * ```
 */
export function gateOf(fences: QueueFence[], nodeId: string): FenceNode | undefined {
  return fences.flatMap((f) => f.fence?.nodes ?? []).find((n) => n.node_id === nodeId);
}
