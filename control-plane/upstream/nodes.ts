/**
 * Upstream's gateway fleet as an upstream bridge sees it: `GET /nodes` (and `/rollout/status`'s
 * `nodes.nodes`, `/health`'s `nodes` count) in the shape of upstream's `GatewayNodeInfo`, and the
 * answers of the per-gateway fence routes in the shape of upstream's gateway
 * `/admin/inference/pause|resume|status` (docs/upstream-compat.md, "Weight-update fencing").
 *
 * Gateways here dial out and have no reachable URL, so each row's `gateway_url` is a control-plane
 * URL on the caller's own base (`<base>/queues/<queue>/gateways/<node_id>`): the bridge's
 * follow-up `POST <gateway_url>/admin/inference/pause` then fences that gateway through the
 * queue's durable fence, with the same credential.
 *
 * @module
 */
import { z } from "zod";
import { type FenceNode, type FenceState, StageMetrics, ZERO_STAGE_METRICS } from "../../protocol";
import { ApiError } from "../errors";
import { PING_INTERVAL_SECONDS } from "../queue/settings";
import { dispatchersOf, parseShardName } from "../queue/shards";
import type { GatewayView } from "../queue/stats";
import { REGISTRY_NAME } from "../registry/registry-do";
import { PATH_PREFIX, type UpstreamScope } from "./credentials";

/**
 * Upstream's `NodeStageMetrics`: the same six fields as the wire's `StageMetrics`, which was
 * modelled on it.
 *
 * @example
 * ```ts
 * NodeStageMetrics.parse({ ...ZERO_STAGE_METRICS, run_inflight: 2 });
 * ```
 */
export const NodeStageMetrics = StageMetrics;
export type NodeStageMetrics = StageMetrics;

/**
 * Upstream's `GatewayNodeInfo` (`src/polar/rollout/models.py`), field for field; `last_heartbeat`
 * in ISO 8601, as pydantic dumps a `datetime`.
 *
 * @example
 * ```ts
 * const rows = z.array(GatewayNodeInfo).parse(await (await fetch(`${base}/nodes`)).json());
 * ```
 */
export const GatewayNodeInfo = z.strictObject({
  node_id: z.string(),
  gateway_url: z.string(),
  max_init_workers: z.number().int(),
  max_run_workers: z.number().int(),
  max_postrun_workers: z.number().int(),
  metrics: NodeStageMetrics,
  dispatch_reservations: z.number().int().min(0),
  healthy: z.boolean(),
  draining: z.boolean(),
  heartbeat_interval_seconds: z.number().int(),
  last_heartbeat: z.string(),
});
export type GatewayNodeInfo = z.infer<typeof GatewayNodeInfo>;

/**
 * Upstream's gateway `generation_status()` as the fence routes answer it. `timed_out` and
 * `wait_for_drain` only on a pause. `base_url` is the URL that was fenced and `engine` is
 * `polar-ts`: the control plane does not know the gateways' engine URLs.
 *
 * @example
 * ```ts
 * const { paused, inflight } = GenerationStatus.parse(await res.json());
 * ```
 */
export const GenerationStatus = z.strictObject({
  paused: z.boolean(),
  drained: z.boolean(),
  inflight: z.number().int().min(0),
  base_url: z.string(),
  engine: z.string(),
  timed_out: z.boolean().optional(),
  wait_for_drain: z.boolean().optional(),
});
export type GenerationStatus = z.infer<typeof GenerationStatus>;

/** `engine` of every fence answer: the fence is Polar-TS's, not one engine's. */
export const FENCE_ENGINE = "polar-ts";

/** Node id of a queue's own row (a queue without a listed gateway), as `/nodes` lists it. */
export const QUEUE_NODE_PREFIX = "queue:";

/**
 * Whether a gateway is part of the fleet: connected, or gone but still holding leases (sessions
 * that may still be calling the engine until their grace ends). A gateway gone with nothing in
 * its hands is no longer listed, so the fleet does not grow with every gateway ever seen.
 *
 * @example
 * ```ts
 * isListed({ ...stats, connected: false, leases: 0 }); // false
 * ```
 */
export function isListed(g: Pick<GatewayView, "connected" | "leases">): boolean {
  return g.connected || g.leases > 0;
}

/**
 * The base URL a request came in on: the origin, plus `/u/<credential>` when it carries one.
 *
 * @example
 * ```ts
 * upstreamBase("https://cp.example.com/u/pt_run.AbC/nodes"); // "https://cp.example.com/u/pt_run.AbC"
 * upstreamBase("https://cp.example.com/nodes"); // "https://cp.example.com"
 * ```
 */
export function upstreamBase(requestUrl: string): string {
  const url = new URL(requestUrl);
  const prefix = new RegExp(`^${PATH_PREFIX}/[^/]+`).exec(url.pathname);
  return `${url.origin}${prefix ? prefix[0] : ""}`;
}

/**
 * The `gateway_url` of a queue (fences all of it) or of one of its gateways.
 *
 * @example
 * ```ts
 * fenceUrl("https://cp.example.com", "default", "gpu-0"); // ".../queues/default/gateways/gpu-0"
 * fenceUrl("https://cp.example.com", "default"); // ".../queues/default"
 * ```
 */
export function fenceUrl(base: string, queue: string, nodeId?: string): string {
  const q = `${base}/queues/${encodeURIComponent(queue)}`;
  return nodeId === undefined ? q : `${q}/gateways/${encodeURIComponent(nodeId)}`;
}

/**
 * One gateway as upstream's `GatewayNodeInfo`: capacity from its hello, its last stage metrics
 * (zeros before the first), `healthy` = connected, `last_heartbeat` = its last frame.
 *
 * @example
 * ```ts
 * nodeInfo(stats, fenceUrl(base, stats.queue, stats.node_id)).gateway_url;
 * ```
 */
export function nodeInfo(g: GatewayView, gatewayUrl: string): GatewayNodeInfo {
  return {
    node_id: g.node_id,
    gateway_url: gatewayUrl,
    max_init_workers: g.capacity.max_init,
    max_run_workers: g.capacity.max_run,
    max_postrun_workers: g.capacity.max_postrun,
    metrics: { ...ZERO_STAGE_METRICS, ...(g.metrics ?? {}) },
    dispatch_reservations: g.reservations,
    healthy: g.connected,
    draining: g.draining,
    heartbeat_interval_seconds: PING_INTERVAL_SECONDS,
    last_heartbeat: new Date(g.last_seen_at ?? g.connected_at).toISOString(),
  };
}

/**
 * The row of a queue that has no listed gateway: fencing it sets the queue's durable fence (a
 * gateway that connects later comes up paused), so a bridge can fence a queue whose gateways are
 * all away instead of failing on an empty fleet. No capacity, not healthy: it is not a gateway.
 *
 * @example
 * ```ts
 * queueInfo("default", fenceUrl(base, "default"), Date.now()).node_id; // "queue:default"
 * ```
 */
export function queueInfo(queue: string, gatewayUrl: string, now: number): GatewayNodeInfo {
  return {
    node_id: `${QUEUE_NODE_PREFIX}${queue}`,
    gateway_url: gatewayUrl,
    max_init_workers: 0,
    max_run_workers: 0,
    max_postrun_workers: 0,
    metrics: { ...ZERO_STAGE_METRICS },
    dispatch_reservations: 0,
    healthy: false,
    draining: false,
    heartbeat_interval_seconds: PING_INTERVAL_SECONDS,
    last_heartbeat: new Date(now).toISOString(),
  };
}

/** The queues and listed gateways a scope sees, and the sessions its queues hold undispatched. */
export interface ScopeFleet {
  queues: string[];
  gateways: GatewayView[];
  pending: number;
}

/**
 * The fleet of a scope: a path credential's one queue, or every queue the registry knows (a
 * gateway connected or a fence was set) for a role token; gateways sorted by queue and node id.
 *
 * @example
 * ```ts
 * const { gateways } = await scopeFleet(env, { credential: "run-1", queue: "default" });
 * ```
 */
export async function scopeFleet(env: Env, scope: UpstreamScope): Promise<ScopeFleet> {
  const recorded =
    scope.queue !== null ? [scope.queue] : await env.REGISTRY.getByName(REGISTRY_NAME).listQueues();
  const queues = [...new Set(recorded.map((name) => parseShardName(name).queue))].sort();
  const stats = await Promise.all(
    dispatchersOf(recorded, env.POLAR_QUEUE_SHARDS).map((q) => env.QUEUE.getByName(q).stats()),
  );
  const gateways = stats
    .flatMap((s) => s.gateways)
    .filter(isListed)
    .sort((a, b) => a.queue.localeCompare(b.queue) || a.node_id.localeCompare(b.node_id));
  return { queues, gateways, pending: stats.reduce((sum, s) => sum + s.pending, 0) };
}

/**
 * Upstream's `GET /nodes`: one row per listed gateway, and one per queue of the scope that has
 * none (see {@link queueInfo}); every `gateway_url` on `base`, unique.
 *
 * @example
 * ```ts
 * const rows = nodeList(await scopeFleet(env, scope), upstreamBase(c.req.url), Date.now());
 * ```
 */
export function nodeList(fleet: ScopeFleet, base: string, now: number): GatewayNodeInfo[] {
  const rows = fleet.gateways.map((g) => nodeInfo(g, fenceUrl(base, g.queue, g.node_id)));
  const covered = new Set(fleet.gateways.map((g) => g.queue));
  for (const queue of fleet.queues)
    if (!covered.has(queue)) rows.push(queueInfo(queue, fenceUrl(base, queue), now));
  return rows;
}

/** A pause that timed out in the drain: the gateway is paused, calls are still in flight. */
function drainTimedOut(n: FenceNode): boolean {
  return n.paused && n.inflight > 0;
}

/**
 * The answer of `POST <gateway_url>/admin/inference/pause|resume` (and `GET …/status`) from the
 * gateways' answers to the fence change or status query (`nodes`: the one gateway of a gateway
 * URL, every gateway of a queue URL).
 * As upstream's newer gateway, a drain that does not finish within `timeout_seconds` is not an
 * HTTP error: the answer says `timed_out: true` and the calls still in flight (`inflight > 0`),
 * the gateway stays paused, and the bridge rolls back. Any other failure (no answer, a gateway
 * that cannot fence) is a 502 naming the gateway.
 *
 * @example
 * ```ts
 * fenceAnswer("pause", out.fence, out.nodes, url); // { paused: true, drained: true, inflight: 0, … }
 * ```
 */
export function fenceAnswer(
  kind: "pause" | "resume" | "status",
  fence: FenceState,
  nodes: FenceNode[],
  url: string,
): GenerationStatus {
  const broken = nodes.filter((n) => !n.ok && !(kind === "pause" && drainTimedOut(n)));
  if (broken.length > 0)
    throw new ApiError(
      502,
      "gateway_error",
      broken
        .map((n) => `gateway '${n.node_id}' of queue '${fence.queue}': ${n.error ?? "did not acknowledge"}`)
        .join("; "),
    );
  const inflight = nodes.reduce((sum, n) => sum + n.inflight, 0);
  const base = {
    paused:
      kind === "pause"
        ? fence.paused && nodes.every((n) => n.paused)
        : fence.paused || nodes.some((n) => n.paused),
    drained: inflight === 0,
    inflight,
    base_url: url,
    engine: FENCE_ENGINE,
  };
  if (kind !== "pause") return base;
  return { ...base, timed_out: nodes.some(drainTimedOut), wait_for_drain: true };
}
