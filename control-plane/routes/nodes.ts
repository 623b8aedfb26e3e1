/**
 * Upstream's weight-update fence discovery on the upstream-compatible surface
 * (docs/upstream-compat.md, "Weight-update fencing"): the slime bridge's `pause_for_weight_update`
 * lists `GET <rollout_url>/nodes`, then calls `POST <gateway_url>/admin/inference/pause` on every
 * row (and `/resume` after the update). The rows' URLs lead here, and each call changes the
 * queue's durable fence (`fenceQueue`, the `/v1/queues/:queue/inference/*` state):
 *
 * - `GET /nodes` → `[GatewayNodeInfo]` of the scope (`control-plane/upstream/nodes.ts`)
 * - `POST /queues/:queue/gateways/:node_id/admin/inference/pause?timeout_seconds=T` and `/resume`:
 *   the queue's fence, answered with that gateway's drain; `GET …/admin/inference/status`
 * - `POST /queues/:queue/admin/inference/pause|resume`, `GET …/status`: the queue's fence,
 *   answered with every gateway of the queue (the row of a queue without a listed gateway)
 *
 * A path credential may fence only its own queue (403 otherwise).
 *
 * @module
 */
import { type Context, Hono } from "hono";
import { z } from "zod";
import { DEFAULT_FENCE_TIMEOUT_SECONDS, ErrorBody, MAX_FENCE_TIMEOUT_SECONDS } from "../../protocol";
import { ApiError } from "../errors";
import { type ApiDescription, json } from "../openapi-registry";
import type { FenceChange } from "../queue/fence";
import { shardsOf } from "../queue/shards";
import { requireUpstreamAuth, scopeOf, type UpstreamEnv, type UpstreamScope } from "../upstream/credentials";
import {
  fenceAnswer,
  fenceUrl,
  GatewayNodeInfo,
  GenerationStatus,
  nodeList,
  scopeFleet,
  upstreamBase,
} from "../upstream/nodes";
import { identifierParam } from "./params";
import { fenceQueue, fenceStatus } from "./queues";

/**
 * Upstream's `timeout_seconds` query parameter of a pause (a float, default 300 as upstream's
 * gateway and bridge); 400 naming it unless a number in [0, {@link MAX_FENCE_TIMEOUT_SECONDS}].
 *
 * @example
 * ```ts
 * timeoutQuery("300.0"); // 300
 * ```
 */
export function timeoutQuery(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_FENCE_TIMEOUT_SECONDS;
  const value = raw.trim() === "" ? Number.NaN : Number(raw);
  if (!Number.isFinite(value) || value < 0 || value > MAX_FENCE_TIMEOUT_SECONDS)
    throw ApiError.badRequest(
      "validation_failed",
      `timeout_seconds: must be a number of seconds between 0 and ${MAX_FENCE_TIMEOUT_SECONDS}, got '${raw}'`,
      [{ field: "timeout_seconds", message: `must be a number between 0 and ${MAX_FENCE_TIMEOUT_SECONDS}` }],
    );
  return value;
}

/** The queue of a fence URL, which the scope must cover (403 for a path credential's other queue). */
function scopedQueue(scope: UpstreamScope, raw: string | undefined): string {
  const queue = identifierParam("queue", raw);
  if (scope.queue !== null && scope.queue !== queue)
    throw ApiError.forbidden(
      `queue: this credential ('${scope.credential}') may fence only queue '${scope.queue}', not '${queue}'`,
    );
  return queue;
}

/** The node of a gateway fence URL: it must have connected to the queue (404 otherwise). */
async function knownNode(env: Env, queue: string, raw: string | undefined): Promise<string> {
  const nodeId = identifierParam("node_id", raw);
  const stats = await Promise.all(
    shardsOf(queue, env.POLAR_QUEUE_SHARDS).map((s) => env.QUEUE.getByName(s).stats()),
  );
  if (!stats.some((s) => s.gateways.some((g) => g.node_id === nodeId)))
    throw ApiError.notFound(`gateway '${nodeId}' has not connected to queue '${queue}'`);
  return nodeId;
}

/** The change a fence URL's action asks for: upstream's bridge drains (no abort mode here). */
function changeOf(action: "pause" | "resume"): FenceChange {
  return action === "pause" ? { kind: "pause", mode: "drain" } : { kind: "resume" };
}

/**
 * The upstream fence routes (mounted with the upstream surface at `/` and `/u/:credential`).
 *
 * @example
 * ```ts
 * upstreamSurface.route("/", nodeRoutes);
 * ```
 */
export const nodeRoutes = new Hono<UpstreamEnv>();

nodeRoutes.get("/nodes", requireUpstreamAuth, async (c) => {
  const fleet = await scopeFleet(c.env, scopeOf(c));
  return c.json(nodeList(fleet, upstreamBase(c.req.url), Date.now()));
});

async function gatewayFence(c: Context<UpstreamEnv>, action: "pause" | "resume"): Promise<Response> {
  const queue = scopedQueue(scopeOf(c), c.req.param("queue"));
  const nodeId = await knownNode(c.env, queue, c.req.param("node_id"));
  const timeout = action === "pause" ? timeoutQuery(c.req.query("timeout_seconds")) : 0;
  const out = await fenceQueue(c.env, queue, changeOf(action), timeout, nodeId);
  const mine = out.nodes.filter((n) => n.node_id === nodeId);
  // A gateway that is not connected cannot confirm a drain: its sessions may still be calling
  // the engine. The fence is stored all the same, and it comes up paused when it reconnects; a
  // resume is stored for it the same way, so only the pause fails.
  if (action === "pause" && mine.length === 0)
    throw new ApiError(
      503,
      "gateway_unavailable",
      `gateway '${nodeId}' of queue '${queue}' is not connected, so its drain cannot be confirmed (the pause is stored: it comes up paused when it reconnects)`,
      undefined,
      { "Retry-After": "5" },
    );
  const url = fenceUrl(upstreamBase(c.req.url), queue, nodeId);
  return c.json(fenceAnswer(action, out.fence, mine, url));
}

async function queueFence(c: Context<UpstreamEnv>, action: "pause" | "resume"): Promise<Response> {
  const queue = scopedQueue(scopeOf(c), c.req.param("queue"));
  const timeout = action === "pause" ? timeoutQuery(c.req.query("timeout_seconds")) : 0;
  const out = await fenceQueue(c.env, queue, changeOf(action), timeout);
  return c.json(fenceAnswer(action, out.fence, out.nodes, fenceUrl(upstreamBase(c.req.url), queue)));
}

const GATEWAY = "/queues/:queue/gateways/:node_id/admin/inference";
const QUEUE = "/queues/:queue/admin/inference";

nodeRoutes.post(`${GATEWAY}/pause`, requireUpstreamAuth, (c) => gatewayFence(c, "pause"));
nodeRoutes.post(`${GATEWAY}/resume`, requireUpstreamAuth, (c) => gatewayFence(c, "resume"));
nodeRoutes.post(`${QUEUE}/pause`, requireUpstreamAuth, (c) => queueFence(c, "pause"));
nodeRoutes.post(`${QUEUE}/resume`, requireUpstreamAuth, (c) => queueFence(c, "resume"));

nodeRoutes.get(`${GATEWAY}/status`, requireUpstreamAuth, async (c) => {
  const queue = scopedQueue(scopeOf(c), c.req.param("queue"));
  const nodeId = await knownNode(c.env, queue, c.req.param("node_id"));
  const status = await fenceStatus(c.env, queue);
  const mine = status.nodes.filter((n) => n.node_id === nodeId);
  if (mine.length === 0)
    throw new ApiError(
      503,
      "gateway_unavailable",
      `gateway '${nodeId}' of queue '${queue}' is not connected`,
    );
  return c.json(fenceAnswer("status", status.fence, mine, fenceUrl(upstreamBase(c.req.url), queue, nodeId)));
});

nodeRoutes.get(`${QUEUE}/status`, requireUpstreamAuth, async (c) => {
  const queue = scopedQueue(scopeOf(c), c.req.param("queue"));
  const status = await fenceStatus(c.env, queue);
  return c.json(fenceAnswer("status", status.fence, status.nodes, fenceUrl(upstreamBase(c.req.url), queue)));
});

/**
 * The OpenAPI entries of the routes above: `/nodes`, then each fence URL's pause, resume and
 * status, the gateway's before the queue's.
 *
 * @example
 * ```ts
 * describeNodeRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeNodeRoutes(api: ApiDescription): void {
  api.path(
    "get",
    "/nodes",
    "upstreamListNodes",
    "Upstream-compatible gateway fleet: one row per gateway (and per queue without one), gateway_url a fence URL",
    { 200: json(z.array(GatewayNodeInfo), "Nodes") },
  );
  for (const [route, what, scope] of [
    [
      "/queues/{queue}/gateways/{node_id}/admin/inference",
      "one gateway (the queue's durable fence)",
      "Gateway",
    ],
    ["/queues/{queue}/admin/inference", "a queue's durable fence", "Queue"],
  ] as const) {
    const params = route.includes("{node_id}")
      ? z.object({ queue: z.string(), node_id: z.string() })
      : z.object({ queue: z.string() });
    api.path(
      "post",
      `${route}/pause`,
      `upstreamPause${scope}`,
      `Upstream-compatible pause of ${what}; drains`,
      {
        200: json(GenerationStatus, "Paused (timed_out: calls still in flight)"),
        502: json(ErrorBody, "A gateway did not acknowledge"),
        503: json(ErrorBody, "The gateway is not connected: its drain cannot be confirmed"),
      },
      {
        params,
        query: z.object({ timeout_seconds: z.number().min(0).max(MAX_FENCE_TIMEOUT_SECONDS).optional() }),
      },
    );
    api.path(
      "post",
      `${route}/resume`,
      `upstreamResume${scope}`,
      `Upstream-compatible resume of ${what}`,
      {
        200: json(GenerationStatus, "Resumed"),
      },
      { params },
    );
    api.path(
      "get",
      `${route}/status`,
      `upstream${scope}FenceStatus`,
      `Upstream-compatible fence status of ${what}`,
      { 200: json(GenerationStatus, "Status") },
      { params },
    );
  }
}
