/**
 * Gateway routes: `GET /v1/gateways/connect?queue=NAME[&node_id=ID]` (the WebSocket a gateway
 * dials out on; the token is checked here, before the upgrade reaches and bills the QueueDO; a
 * sharded queue is entered at the shard of the node id), `GET /v1/gateways`
 * (listing across queues) and `POST /v1/gateways/:id/drain` (admin).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import { ErrorBody } from "../../protocol";
import { authorize } from "../auth";
import { ApiError } from "../errors";
import { type ApiDescription, idParam, json } from "../openapi-registry";
import { dispatchersOf, gatewayShard } from "../queue/shards";
import { NODE_HEADER, NODE_HINT_HEADER, QUEUE_HEADER } from "../queue/sockets";
import { REGISTRY_NAME } from "../registry/registry-do";
import { identifierParam } from "./params";

/** Prefix of headers only the Worker may set; client copies are dropped. */
const INTERNAL_HEADER_PREFIX = "x-polar-";

/**
 * The gateways sub-app (mounted at `/v1/gateways`).
 *
 * @example
 * ```ts
 * app.route("/v1/gateways", gatewayRoutes);
 * ```
 */
export const gatewayRoutes = new Hono<{ Bindings: Env }>();

gatewayRoutes.get("/connect", async (c) => {
  const principal = await authorize("gateway", c.req.header("Authorization"), c.env);
  if (c.req.header("Upgrade")?.toLowerCase() !== "websocket") {
    throw ApiError.upgradeRequired("GET /v1/gateways/connect needs 'Upgrade: websocket'");
  }
  const queue = identifierParam("queue", c.req.query("queue") ?? "default");
  const hint = c.req.query("node_id");
  const hintNode = hint === undefined ? null : identifierParam("node_id", hint);
  const headers = new Headers();
  for (const [name, value] of c.req.raw.headers) {
    const lower = name.toLowerCase();
    if (lower.startsWith(INTERNAL_HEADER_PREFIX) || lower === "authorization") continue;
    headers.set(name, value);
  }
  headers.set(QUEUE_HEADER, queue);
  if (principal.nodeId) headers.set(NODE_HEADER, principal.nodeId);
  if (hintNode) headers.set(NODE_HINT_HEADER, hintNode);
  // The node id picks the shard, so a reconnect finds the dispatcher holding its leases; without
  // one (shared token, no ?node_id=) every connection goes to shard 0 and steals from the others.
  const shard = gatewayShard(queue, principal.nodeId ?? hintNode, c.env.POLAR_QUEUE_SHARDS);
  return c.env.QUEUE.getByName(shard).fetch(new Request(c.req.raw, { headers }));
});

gatewayRoutes.get("/", async (c) => {
  await authorize("viewer", c.req.header("Authorization"), c.env);
  const recorded = await c.env.REGISTRY.getByName(REGISTRY_NAME).listQueues();
  const dispatchers = dispatchersOf(recorded, c.env.POLAR_QUEUE_SHARDS);
  const stats = await Promise.all(dispatchers.map((q) => c.env.QUEUE.getByName(q).stats()));
  return c.json({
    gateways: stats.flatMap((s) => s.gateways),
    queues: stats.map((s) => ({
      queue: s.queue,
      shard: s.shard,
      pending: s.pending,
      leases: s.leases,
      counters: s.counters,
    })),
  });
});

gatewayRoutes.post("/:id/drain", async (c) => {
  await authorize("admin", c.req.header("Authorization"), c.env);
  const nodeId = identifierParam("node_id", c.req.param("id"));
  const queue = await c.env.REGISTRY.getByName(REGISTRY_NAME).queueOfNode(nodeId);
  const result = queue === null ? null : await c.env.QUEUE.getByName(queue).drain(nodeId);
  if (!result) throw ApiError.notFound(`gateway '${nodeId}' never connected`);
  return c.json({ node_id: nodeId, queue, draining: true, ack: result });
});

/**
 * A gateway of `GET /v1/gateways` (`queue/stats.ts`'s `GatewayView`): an open object, so fields
 * added there do not break clients generated from an older document.
 */
const GatewayViewSchema = z
  .object({
    node_id: z.string(),
    queue: z.string(),
    shard: z.string().describe("The dispatcher holding the gateway: the queue, or queue#i when sharded"),
    credit: z.number(),
    connected: z.boolean(),
    draining: z.boolean(),
    leases: z.number(),
    reservations: z.number(),
    capacity: z.object({ max_init: z.number(), max_run: z.number(), max_postrun: z.number() }),
    metrics: z.record(z.string(), z.number()).nullable().describe("Stage depths and in-flight counts"),
    connected_at: z.number(),
    disconnected_at: z.number().nullable(),
    last_seen_at: z.number().nullable(),
  })
  .passthrough();

/** A dispatcher shard of `GET /v1/gateways` (`queue/stats.ts`'s `ShardStats`), open as the gateway. */
const QueueShardSchema = z
  .object({
    queue: z.string(),
    shard: z.string(),
    pending: z.number(),
    leases: z.number(),
    counters: z.record(z.string(), z.number()),
  })
  .passthrough();

/**
 * The OpenAPI entry of `GET /v1/gateways`. It is apart from {@link describeGatewayRoutes}
 * because the document lists `GET /metrics` between them, and generated clients keep that order.
 *
 * @example
 * ```ts
 * describeGatewayListing(api);
 * describeMetricsRoutes(api);
 * describeGatewayRoutes(api);
 * ```
 */
export function describeGatewayListing(api: ApiDescription): void {
  api.path("get", "/v1/gateways", "listGateways", "Gateways of every queue, with stage metrics", {
    200: json(
      z.object({ gateways: z.array(GatewayViewSchema), queues: z.array(QueueShardSchema) }),
      "Gateways",
    ),
  });
}

/**
 * The OpenAPI entries of the gateway's WebSocket and of its drain.
 *
 * @example
 * ```ts
 * describeGatewayRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeGatewayRoutes(api: ApiDescription): void {
  api.path(
    "get",
    "/v1/gateways/connect",
    "connectGateway",
    "Gateway WebSocket (Upgrade: websocket; protocol/wire.ts)",
    { 426: json(ErrorBody, "Not a WebSocket upgrade") },
    { query: z.object({ queue: z.string().optional(), node_id: z.string().optional() }) },
  );
  api.path(
    "post",
    "/v1/gateways/{id}/drain",
    "drainGateway",
    "Drain a gateway (admin)",
    { 200: json(z.object({ node_id: z.string(), draining: z.boolean() }).passthrough(), "Draining") },
    { params: idParam("id") },
  );
}
