/**
 * The OpenAPI document of the control plane (`GET /openapi.json`), generated from the same zod
 * schemas the handlers validate with (`protocol/`), through @hono/zod-openapi's registry. The
 * routes themselves stay plain Hono handlers, so their own checks (byte limits before parsing,
 * errors naming the field) are unchanged; this module only describes them.
 *
 * @module
 */
import { OpenAPIHono } from "@hono/zod-openapi";
import { z } from "zod";
import {
  ArtifactKind,
  ArtifactRef,
  BatchCreated,
  BatchRequest,
  BatchStatusBody,
  ErrorBody,
  FenceChangeResponse,
  FenceStatusResponse,
  LIMITS,
  MAX_FENCE_TIMEOUT_SECONDS,
  ResultsPage,
  SessionLogs,
  SessionResult,
  SessionTokens,
  TaskSpec,
  Trajectory,
} from "../protocol";
import { BatchListFilters, BatchListItemSchema, registerStatePaths } from "./openapi-state";
import {
  AdminFanoutResponse,
  GatewayTokenBody,
  PathTokenBody,
  PauseBody,
  PolicyVersionBody,
  ResumeBody,
} from "./routes/admin";
import { GatewayNodeInfo, GenerationStatus } from "./upstream/nodes";

type Method = "get" | "post" | "put" | "delete";

const json = (schema: z.ZodType, description: string) => ({
  description,
  content: { "application/json": { schema } },
});
const errors = {
  400: json(ErrorBody, "Invalid input; the message names the field"),
  401: json(ErrorBody, "Missing or wrong bearer token"),
  403: json(ErrorBody, "Token of another role (e.g. the read-only viewer token on a write)"),
  404: json(ErrorBody, "Not found"),
};
const idParam = (name: string) => z.object({ [name]: z.string() });

function build(): OpenAPIHono {
  const doc = new OpenAPIHono();
  const registry = doc.openAPIRegistry;
  registry.registerComponent("securitySchemes", "bearer", { type: "http", scheme: "bearer" });
  // `operationId` is a required argument, not an option: generated clients name their methods
  // after it, so a route registered without one would have no stable name (checked unique below).
  const operationIds = new Set<string>();
  const path = (
    method: Method,
    route: string,
    operationId: string,
    summary: string,
    responses: Record<number, ReturnType<typeof json>>,
    request: { body?: z.ZodType; params?: z.ZodObject; query?: z.ZodObject } = {},
  ) => {
    if (!/^[a-z][A-Za-z0-9]*$/.test(operationId) || operationIds.has(operationId))
      throw new Error(`operationId '${operationId}' of ${method} ${route} is not a fresh camelCase name`);
    operationIds.add(operationId);
    registry.registerPath({
      method,
      path: route,
      operationId,
      summary,
      security: [{ bearer: [] }],
      request: {
        ...(request.body ? { body: { content: { "application/json": { schema: request.body } } } } : {}),
        ...(request.params ? { params: request.params } : {}),
        ...(request.query ? { query: request.query } : {}),
      },
      responses: { ...errors, ...responses },
    });
  };
  const batchId = idParam("id");
  path(
    "post",
    "/v1/batches",
    "createBatch",
    "Create a batch (idempotent by batch_id)",
    {
      200: json(BatchCreated, "Replay of the same body"),
      201: json(BatchCreated, "Created"),
      409: json(ErrorBody, "batch_id exists with another body, or was cancelled"),
      413: json(ErrorBody, `Body over ${LIMITS.maxBodyBytes} bytes or a task over the limit`),
      429: json(ErrorBody, "Queue full (LIMITS.maxQueueDepth); see Retry-After"),
    },
    { body: BatchRequest },
  );
  path(
    "get",
    "/v1/batches",
    "listBatches",
    "List batches, newest first",
    {
      200: json(
        z.object({
          batches: z.array(BatchListItemSchema),
          next_before: z
            .string()
            .nullable()
            .describe("Cursor of the next page ('<created_at>:<batch_id>'); null on the last page"),
        }),
        "Batches",
      ),
    },
    {
      query: z.object({
        limit: z.string().optional(),
        before: z
          .string()
          .optional()
          .describe("next_before of the previous page; a bare created_at lists batches strictly older"),
        ...BatchListFilters,
      }),
    },
  );
  path(
    "get",
    "/v1/batches/{id}",
    "getBatch",
    "Batch status with per-task counts",
    { 200: json(BatchStatusBody, "Status") },
    { params: batchId },
  );
  path(
    "get",
    "/v1/batches/{id}/results",
    "getBatchResults",
    "Results after a cursor; long-poll with wait=, or SSE (Accept: text/event-stream; id = seq, resumable with Last-Event-ID)",
    {
      200: json(ResultsPage, "A page of results"),
    },
    {
      params: batchId,
      query: z.object({
        after: z.string().optional(),
        wait: z.string().optional(),
        limit: z.string().optional(),
      }),
    },
  );
  path(
    "delete",
    "/v1/batches/{id}",
    "cancelBatch",
    "Cancel a batch (idempotent; the id cannot be resubmitted)",
    {
      200: json(
        z.object({ batch_id: z.string(), status: z.literal("cancelled"), cancelled_sessions: z.number() }),
        "Cancelled",
      ),
    },
    { params: batchId },
  );
  path(
    "delete",
    "/v1/batches/{id}/tasks/{task_id}",
    "cancelTask",
    "Cancel one task of a batch",
    {
      200: json(
        z.object({
          batch_id: z.string(),
          task_id: z.string(),
          status: z.literal("cancelled"),
          cancelled_sessions: z.number(),
        }),
        "Cancelled",
      ),
    },
    { params: z.object({ id: z.string(), task_id: z.string() }) },
  );
  registerStatePaths(path);
  const sessionId = idParam("id");
  path(
    "get",
    "/v1/sessions/{id}",
    "getSession",
    "Session state and its result (trajectory included)",
    {
      200: json(
        z
          .object({
            session_id: z.string(),
            status: z.string(),
            attempt: z.number(),
            result: SessionResult.nullable(),
          })
          .passthrough(),
        "Session",
      ),
    },
    { params: sessionId },
  );
  path(
    "get",
    "/v1/sessions/{id}/trajectory",
    "getSessionTrajectory",
    "The session's trajectory",
    { 200: json(Trajectory, "Trajectory") },
    { params: sessionId },
  );
  path(
    "get",
    "/v1/sessions/{id}/completions",
    "getSessionCompletions",
    "The session's uploaded completion records",
    { 200: json(z.array(z.record(z.string(), z.unknown())), "Completion records") },
    { params: sessionId },
  );
  path(
    "get",
    "/v1/sessions/{id}/logs",
    "getSessionLogs",
    "The session's logs: prepare, harness stdout/stderr, evaluator; each stream's tail, bounded",
    {
      200: json(SessionLogs, "Logs"),
      409: json(ErrorBody, "not_ready: the session has no accepted result yet"),
    },
    { params: sessionId },
  );
  path(
    "get",
    "/v1/sessions/{id}/tokens",
    "getSessionTokens",
    "Token mode: the text of each id of each trace's prompt_ids and response_ids, decoded one at a time",
    {
      200: json(SessionTokens, "Token text"),
      409: json(ErrorBody, "not_ready: the session has no accepted result yet"),
    },
    { params: sessionId },
  );
  path(
    "put",
    "/v1/sessions/{id}/artifacts/{kind}",
    "putSessionArtifact",
    "Gateway upload of a session artifact: trajectory, completion records, logs, token text (gateway token, ?lease_id=)",
    {
      201: json(ArtifactRef, "Stored in R2"),
      409: json(ErrorBody, "stale_lease: not the session's current lease"),
      413: json(ErrorBody, `Over ${LIMITS.maxArtifactBytes} bytes (LIMITS.maxArtifactBytes)`),
    },
    {
      params: z.object({ id: z.string(), kind: ArtifactKind }),
      query: z.object({ lease_id: z.string() }),
    },
  );
  // control-plane/queue/stats.ts (GatewayView, ShardStats); open objects, so fields added there
  // do not break clients generated from an older document.
  const gatewayView = z
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
  const queueShard = z
    .object({
      queue: z.string(),
      shard: z.string(),
      pending: z.number(),
      leases: z.number(),
      counters: z.record(z.string(), z.number()),
    })
    .passthrough();
  path("get", "/v1/gateways", "listGateways", "Gateways of every queue, with stage metrics", {
    200: json(z.object({ gateways: z.array(gatewayView), queues: z.array(queueShard) }), "Gateways"),
  });
  registry.registerPath({
    method: "get",
    path: "/metrics",
    operationId: "getMetrics",
    summary: "Prometheus metrics of every queue's shards: depth, leases, gateways, dispatch latency, results",
    security: [{ bearer: [] }],
    responses: {
      401: errors[401],
      200: {
        description: "Prometheus text exposition format 0.0.4 (families: docs/control-plane.md)",
        content: { "text/plain; version=0.0.4; charset=utf-8": { schema: z.string() } },
      },
    },
  });
  path(
    "get",
    "/v1/gateways/connect",
    "connectGateway",
    "Gateway WebSocket (Upgrade: websocket; protocol/wire.ts)",
    { 426: json(ErrorBody, "Not a WebSocket upgrade") },
    { query: z.object({ queue: z.string().optional(), node_id: z.string().optional() }) },
  );
  path(
    "post",
    "/v1/gateways/{id}/drain",
    "drainGateway",
    "Drain a gateway (admin)",
    { 200: json(z.object({ node_id: z.string(), draining: z.boolean() }).passthrough(), "Draining") },
    { params: idParam("id") },
  );
  const queueParam = idParam("queue");
  const fenceErrors = {
    503: json(ErrorBody, "A shard of the queue did not store the change; send it again"),
  };
  path(
    "post",
    "/v1/queues/{queue}/inference/pause",
    "pauseQueueInference",
    "Pause inference on the queue's gateways, durably (trainer); mode drain or abort, one timeout",
    {
      200: json(FenceChangeResponse, "Stored; ok when every connected gateway acked paused with 0 in flight"),
      ...fenceErrors,
    },
    { params: queueParam, body: PauseBody },
  );
  path(
    "post",
    "/v1/queues/{queue}/inference/resume",
    "resumeQueueInference",
    "Set the policy version (if given) and resume inference on the queue, durably (trainer)",
    { 200: json(FenceChangeResponse, "Stored; each gateway's ack"), ...fenceErrors },
    { params: queueParam, body: ResumeBody },
  );
  path(
    "post",
    "/v1/queues/{queue}/policy_version",
    "setQueuePolicyVersion",
    "Set the policy version stamped on the queue's completions, durably (trainer)",
    { 200: json(FenceChangeResponse, "Stored; each gateway's ack"), ...fenceErrors },
    { params: queueParam, body: PolicyVersionBody },
  );
  path(
    "get",
    "/v1/queues/{queue}/inference",
    "getQueueInference",
    "The queue's fence and each connected gateway's gate (trainer; no side effect)",
    { 200: json(FenceStatusResponse, "Fence and gates") },
    { params: queueParam },
  );
  const adminFence = {
    200: json(AdminFanoutResponse, "Stored in every known queue; per-node acks"),
    502: json(AdminFanoutResponse, "Stored, but every gateway failed"),
    ...fenceErrors,
  };
  path(
    "post",
    "/v1/admin/inference/pause",
    "pauseAllInference",
    "Pause inference on every known queue, durably (admin)",
    adminFence,
    { body: PauseBody },
  );
  path(
    "post",
    "/v1/admin/inference/resume",
    "resumeAllInference",
    "Resume inference on every known queue, durably (admin)",
    adminFence,
    {
      body: ResumeBody,
    },
  );
  path(
    "post",
    "/v1/admin/policy_version",
    "setAllPolicyVersion",
    "Set the policy version of every known queue, durably (admin)",
    adminFence,
    { body: PolicyVersionBody },
  );
  path(
    "post",
    "/v1/admin/gateway_tokens",
    "registerGatewayToken",
    "Register a per-gateway token by its SHA-256 (admin)",
    { 201: json(z.object({ node_id: z.string(), registered: z.boolean() }), "Registered") },
    { body: GatewayTokenBody },
  );
  path(
    "delete",
    "/v1/admin/gateway_tokens/{node_id}",
    "revokeGatewayTokens",
    "Revoke a node's gateway tokens (admin)",
    { 200: json(z.object({ node_id: z.string(), revoked: z.number() }), "Revoked") },
    { params: idParam("node_id") },
  );
  path(
    "post",
    "/v1/admin/path_tokens",
    "registerPathToken",
    "Register a path credential (upstream base URL /u/<credential>) by its SHA-256 (admin)",
    {
      201: json(z.object({ name: z.string(), queue: z.string(), registered: z.boolean() }), "Registered"),
    },
    { body: PathTokenBody },
  );
  path(
    "delete",
    "/v1/admin/path_tokens/{name}",
    "revokePathTokens",
    "Revoke every path credential of a name (admin)",
    { 200: json(z.object({ name: z.string(), revoked: z.number() }), "Revoked") },
    { params: idParam("name") },
  );
  path(
    "post",
    "/rollout/task/submit",
    "upstreamSubmitTask",
    "Upstream-compatible submit of one TaskRequest (also under /u/{credential})",
    {
      200: json(
        z.object({
          task_id: z.string(),
          status: z.literal("running"),
          warnings: z.array(z.string()).optional(),
        }),
        "Accepted",
      ),
    },
    { body: TaskSpec },
  );
  // Upstream's SessionResult as rendered on /rollout/* (control-plane/upstream/render.ts).
  const upstreamResult = SessionResult.extend({
    status: z.enum(["COMPLETED", "ERROR", "TIMEOUT"]),
    timing: z.object({
      register_to_init_queue_ms: z.number(),
      init_ms: z.number(),
      run_ms: z.number(),
      postrun_ms: z.number(),
    }),
    error: z.string().nullable(),
  });
  const taskStatus = z.object({
    task_id: z.string(),
    status: z.enum(["running", "completed", "failed", "cancelled"]),
    total_sessions: z.number(),
    completed_sessions: z.number(),
    results: z.array(upstreamResult),
    result_paths: z.array(z.string()),
  });
  path(
    "get",
    "/rollout/task/{id}",
    "upstreamGetTask",
    "Upstream-compatible TaskStatus",
    { 200: json(taskStatus, "Status") },
    { params: idParam("id") },
  );
  path(
    "delete",
    "/rollout/task/{id}",
    "upstreamCancelTask",
    "Upstream-compatible cancel (tombstone when unknown)",
    { 200: json(taskStatus, "Cancelled") },
    { params: idParam("id") },
  );
  path("get", "/rollout/status", "upstreamStatus", "Upstream-compatible service status", {
    200: json(
      z.object({
        tasks: z.record(z.string(), z.string()),
        pipeline: z.object({ pending_sessions: z.number() }),
        nodes: z.object({ nodes: z.array(GatewayNodeInfo) }),
      }),
      "Status",
    ),
  });
  path(
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
    path(
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
    path(
      "post",
      `${route}/resume`,
      `upstreamResume${scope}`,
      `Upstream-compatible resume of ${what}`,
      {
        200: json(GenerationStatus, "Resumed"),
      },
      { params },
    );
    path(
      "get",
      `${route}/status`,
      `upstream${scope}FenceStatus`,
      `Upstream-compatible fence status of ${what}`,
      {
        200: json(GenerationStatus, "Status"),
      },
      { params },
    );
  }
  return doc;
}

/**
 * Where the API is served: `polar dev`'s local Worker, and a deployed Worker on workers.dev (its
 * name and account subdomain are the variables; wrangler.toml names the Worker).
 */
export const SERVERS = [
  { url: "http://127.0.0.1:8787", description: "Local control plane (polar dev)" },
  {
    url: "https://{worker}.{subdomain}.workers.dev",
    description: "Deployed control plane (polar deploy)",
    variables: {
      worker: { default: "polar-ts", description: "The Worker's name (wrangler.toml)" },
      subdomain: { default: "example", description: "The account's workers.dev subdomain" },
    },
  },
];

let cached: unknown = null;

/**
 * The OpenAPI 3.1 document (built once per isolate).
 *
 * @example
 * ```ts
 * app.get("/openapi.json", (c) => c.json(openApiDocument()));
 * ```
 */
export function openApiDocument(): unknown {
  cached ??= build().getOpenAPI31Document({
    openapi: "3.1.0",
    info: {
      title: "Polar-TS control plane",
      version: "1",
      description:
        "Rollout service for agentic RL. Errors are {error:{code,message,details?}}. Limits: protocol/limits.ts.",
    },
    servers: SERVERS,
  });
  return cached;
}
