/**
 * Admin routes: the inference fence of every queue the registry knows (the same durable state as
 * the trainer's `/v1/queues/:queue/…` routes, one queue after another in parallel), per-gateway
 * token registration, and path credentials of upstream-compatible base URLs (`/u/<credential>`,
 * docs/upstream-compat.md).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import {
  describeIssues,
  FenceNode,
  FenceState,
  fieldIssues,
  Identifier,
  PauseRequest,
  PolicyVersionRequest,
  ResumeRequest,
} from "../../protocol";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import { type ApiDescription, idParam, json } from "../openapi-registry";
import type { FenceChange } from "../queue/fence";
import { parseShardName } from "../queue/shards";
import { REGISTRY_NAME } from "../registry/registry-do";
import { readJsonBody } from "../request-body";
import { fenceQueue, fenceStoreErrors, parseFenceBody } from "./queues";

/** Body of `POST /v1/admin/inference/pause` (the trainer route's). */
export const PauseBody = PauseRequest;
/** Body of `POST /v1/admin/inference/resume` (optional). */
export const ResumeBody = ResumeRequest;
/** Body of `POST /v1/admin/policy_version`. */
export const PolicyVersionBody = PolicyVersionRequest;
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
/** Response of the admin fence routes: every queue's new fence and every gateway's answer. */
export const AdminFanoutResponse = z.strictObject({
  ok: z.boolean(),
  queues: z.array(z.strictObject({ queue: z.string(), fence: FenceState })),
  nodes: z.array(FenceNode.extend({ queue: z.string() })),
});
export type AdminFanoutResponse = z.infer<typeof AdminFanoutResponse>;

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

async function parse<T extends z.ZodType>(request: Request, schema: T): Promise<z.infer<T>> {
  const parsed = schema.safeParse(await readJsonBody(request, 64 * 1024));
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error);
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}

/** Every queue name the registry has seen (a gateway connected, or a fence was set). */
async function knownQueues(env: Env): Promise<string[]> {
  const recorded = await env.REGISTRY.getByName(REGISTRY_NAME).listQueues();
  return [...new Set(recorded.map((name) => parseShardName(name).queue))].sort();
}

async function fenceAll(env: Env, change: FenceChange, timeoutSeconds: number): Promise<Response> {
  const answers = await Promise.all(
    (await knownQueues(env)).map((queue) => fenceQueue(env, queue, change, timeoutSeconds)),
  );
  const nodes = answers.flatMap((a) => a.nodes.map((n) => ({ ...n, queue: a.queue })));
  const body: AdminFanoutResponse = {
    ok: nodes.every((n) => n.ok),
    queues: answers.map((a) => ({ queue: a.queue, fence: a.fence })),
    nodes,
  };
  // As upstream's fork: 502 when every gateway failed (the fence is stored either way).
  const status = nodes.length > 0 && nodes.every((n) => !n.ok) ? 502 : 200;
  return Response.json(body, { status });
}

adminRoutes.post("/inference/pause", async (c) => {
  const body = await parseFenceBody(c.req.raw, PauseBody);
  return fenceAll(c.env, { kind: "pause", mode: body.mode }, body.timeout_seconds);
});

adminRoutes.post("/inference/resume", async (c) => {
  const body = await parseFenceBody(c.req.raw, ResumeBody);
  return fenceAll(
    c.env,
    body.policy_version === undefined
      ? { kind: "resume" }
      : { kind: "resume", policy_version: body.policy_version },
    0,
  );
});

adminRoutes.post("/policy_version", async (c) => {
  const body = await parseFenceBody(c.req.raw, PolicyVersionBody);
  return fenceAll(c.env, { kind: "policy_version", policy_version: body.policy_version }, 0);
});

adminRoutes.post("/gateway_tokens", async (c) => {
  const body = await parse(c.req.raw, GatewayTokenBody);
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
  const body = await parse(c.req.raw, PathTokenBody);
  await c.env.REGISTRY.getByName(REGISTRY_NAME).addPathToken(body.name, body.sha256, body.queue);
  return c.json({ name: body.name, queue: body.queue, registered: true }, 201);
});

adminRoutes.delete("/path_tokens/:name", async (c) => {
  const parsed = Identifier.safeParse(c.req.param("name"));
  if (!parsed.success) throw ApiError.badRequest("validation_failed", "name: not a valid identifier");
  const revoked = await c.env.REGISTRY.getByName(REGISTRY_NAME).revokePathTokens(parsed.data);
  return c.json({ name: parsed.data, revoked });
});

/** The answers of an admin fence change, which is stored in every known queue before the fan-out. */
const ADMIN_FENCE_RESPONSES = {
  200: json(AdminFanoutResponse, "Stored in every known queue; per-node acks"),
  502: json(AdminFanoutResponse, "Stored, but every gateway failed"),
  ...fenceStoreErrors,
};

/**
 * The OpenAPI entries of the routes above.
 *
 * @example
 * ```ts
 * describeAdminRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeAdminRoutes(api: ApiDescription): void {
  api.path(
    "post",
    "/v1/admin/inference/pause",
    "pauseAllInference",
    "Pause inference on every known queue, durably (admin)",
    ADMIN_FENCE_RESPONSES,
    { body: PauseBody },
  );
  api.path(
    "post",
    "/v1/admin/inference/resume",
    "resumeAllInference",
    "Resume inference on every known queue, durably (admin)",
    ADMIN_FENCE_RESPONSES,
    { body: ResumeBody },
  );
  api.path(
    "post",
    "/v1/admin/policy_version",
    "setAllPolicyVersion",
    "Set the policy version of every known queue, durably (admin)",
    ADMIN_FENCE_RESPONSES,
    { body: PolicyVersionBody },
  );
  api.path(
    "post",
    "/v1/admin/gateway_tokens",
    "registerGatewayToken",
    "Register a per-gateway token by its SHA-256 (admin)",
    { 201: json(z.object({ node_id: z.string(), registered: z.boolean() }), "Registered") },
    { body: GatewayTokenBody },
  );
  api.path(
    "delete",
    "/v1/admin/gateway_tokens/{node_id}",
    "revokeGatewayTokens",
    "Revoke a node's gateway tokens (admin)",
    { 200: json(z.object({ node_id: z.string(), revoked: z.number() }), "Revoked") },
    { params: idParam("node_id") },
  );
  api.path(
    "post",
    "/v1/admin/path_tokens",
    "registerPathToken",
    "Register a path credential (upstream base URL /u/<credential>) by its SHA-256 (admin)",
    { 201: json(z.object({ name: z.string(), queue: z.string(), registered: z.boolean() }), "Registered") },
    { body: PathTokenBody },
  );
  api.path(
    "delete",
    "/v1/admin/path_tokens/{name}",
    "revokePathTokens",
    "Revoke every path credential of a name (admin)",
    { 200: json(z.object({ name: z.string(), revoked: z.number() }), "Revoked") },
    { params: idParam("name") },
  );
}
