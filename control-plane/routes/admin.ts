/**
 * Admin routes: inference pause/resume and policy version fanned out to every connected gateway
 * (each QueueDO sends `admin` and collects `admin_ack`), per-gateway token registration, and path
 * credentials of upstream-compatible base URLs (`/u/<credential>`, docs/upstream-compat.md).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import { describeIssues, fieldIssues, Identifier } from "../../protocol";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import type { AdminNodeResult } from "../queue/admin-fanout";
import { dispatchersOf } from "../queue/shards";
import { REGISTRY_NAME } from "../registry/registry-do";
import { readJsonBody } from "../request-body";

/** Body of `POST /v1/admin/inference/pause`. */
export const PauseBody = z.strictObject({ timeout_seconds: z.number().positive().max(3600).optional() });
/** Body of `POST /v1/admin/policy_version`. */
export const PolicyVersionBody = z.strictObject({ policy_version: z.string().min(1).max(256) });
/** Body of `POST /v1/admin/gateway_tokens`: the SHA-256 (hex) of a `gw_<node>.<secret>` token. */
export const GatewayTokenBody = z.strictObject({
  node_id: Identifier,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
});
/** Body of `POST /v1/admin/path_tokens`: the SHA-256 (hex) of a `pt_<name>.<secret>` credential. */
export const PathTokenBody = z.strictObject({
  name: Identifier,
  sha256: z.string().regex(/^[0-9a-f]{64}$/),
  queue: Identifier.default("default"),
});
/** Response of the admin fan-out routes. */
export const AdminFanoutResponse = z.object({
  nodes: z.array(
    z.object({
      node_id: z.string(),
      ok: z.boolean(),
      paused: z.boolean(),
      inflight: z.number(),
      policy_version: z.string().nullable(),
      error: z.string().optional(),
    }),
  ),
});

/**
 * The admin sub-app (mounted at `/v1/admin`, admin token required).
 *
 * @example
 * ```ts
 * app.route("/v1/admin", adminRoutes);
 * ```
 */
export const adminRoutes = new Hono<{ Bindings: Env }>();
adminRoutes.use("*", requireRole("admin"));

async function parse<T extends z.ZodType>(
  request: Request,
  schema: T,
  allowEmpty: boolean,
): Promise<z.infer<T>> {
  const empty = request.headers.get("Content-Length") === "0" || request.body === null;
  const raw = empty && allowEmpty ? {} : await readJsonBody(request, 64 * 1024);
  const parsed = schema.safeParse(raw);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error);
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}

async function fanout(env: Env, run: (queue: string) => Promise<AdminNodeResult[]>): Promise<Response> {
  // Every shard of every queue: each dispatcher reaches only the gateways connected to it.
  const queues = dispatchersOf(
    await env.REGISTRY.getByName(REGISTRY_NAME).listQueues(),
    env.POLAR_QUEUE_SHARDS,
  );
  const nodes = (await Promise.all(queues.map(run))).flat();
  // As upstream's fork: 502 when every gateway failed.
  const status = nodes.length > 0 && nodes.every((n) => !n.ok) ? 502 : 200;
  return Response.json({ nodes }, { status });
}

adminRoutes.post("/inference/pause", async (c) => {
  const body = await parse(c.req.raw, PauseBody, true);
  return fanout(c.env, (q) =>
    c.env.QUEUE.getByName(q).admin(
      "pause",
      body.timeout_seconds === undefined ? {} : { timeout_seconds: body.timeout_seconds },
    ),
  );
});

adminRoutes.post("/inference/resume", async (c) =>
  fanout(c.env, (q) => c.env.QUEUE.getByName(q).admin("resume")),
);

adminRoutes.post("/policy_version", async (c) => {
  const body = await parse(c.req.raw, PolicyVersionBody, false);
  return fanout(c.env, (q) =>
    c.env.QUEUE.getByName(q).admin("policy_version", { policy_version: body.policy_version }),
  );
});

adminRoutes.post("/gateway_tokens", async (c) => {
  const body = await parse(c.req.raw, GatewayTokenBody, false);
  await c.env.REGISTRY.getByName(REGISTRY_NAME).addGatewayToken(body.node_id, body.sha256);
  return c.json({ node_id: body.node_id, registered: true }, 201);
});

adminRoutes.delete("/gateway_tokens/:node_id", async (c) => {
  const parsed = Identifier.safeParse(c.req.param("node_id"));
  if (!parsed.success) throw ApiError.badRequest("validation_failed", "node_id: not a valid identifier");
  const revoked = await c.env.REGISTRY.getByName(REGISTRY_NAME).revokeGatewayTokens(parsed.data);
  return c.json({ node_id: parsed.data, revoked });
});

adminRoutes.post("/path_tokens", async (c) => {
  const body = await parse(c.req.raw, PathTokenBody, false);
  await c.env.REGISTRY.getByName(REGISTRY_NAME).addPathToken(body.name, body.sha256, body.queue);
  return c.json({ name: body.name, queue: body.queue, registered: true }, 201);
});

adminRoutes.delete("/path_tokens/:name", async (c) => {
  const parsed = Identifier.safeParse(c.req.param("name"));
  if (!parsed.success) throw ApiError.badRequest("validation_failed", "name: not a valid identifier");
  const revoked = await c.env.REGISTRY.getByName(REGISTRY_NAME).revokePathTokens(parsed.data);
  return c.json({ name: parsed.data, revoked });
});
