/**
 * Trainer-facing fence routes (`/v1/queues/:queue/…`, trainer or admin token): a training loop
 * fences the queues it uses without the admin token. Each change is stored in every shard of the
 * queue before any gateway hears of it, then fanned out to the gateways of every shard.
 *
 * - `POST /v1/queues/:queue/inference/pause` `{mode?, timeout_seconds?}`
 * - `POST /v1/queues/:queue/inference/resume` `{policy_version?}`
 * - `POST /v1/queues/:queue/policy_version` `{policy_version}`
 * - `GET /v1/queues/:queue/inference`
 *
 * @module
 */
import { Hono } from "hono";
import type { z } from "zod";
import {
  describeIssues,
  ErrorBody,
  FenceChangeResponse,
  FenceStatusResponse,
  fieldIssues,
  PauseRequest,
  PolicyVersionRequest,
  ResumeRequest,
} from "../../protocol";
import { requireReadWrite } from "../auth";
import { ApiError } from "../errors";
import { type ApiDescription, idParam, json } from "../openapi-registry";
import type { FenceChange } from "../queue/fence";
import { shardsOf } from "../queue/shards";
import { REGISTRY_NAME } from "../registry/registry-do";
import { readBodyText } from "../request-body";
import { identifierParam } from "./params";

/** Largest body of a fence route. */
const MAX_FENCE_BODY_BYTES = 64 * 1024;

/**
 * Parses a route body with `schema`; an empty body is `{}` (every fence body has defaults or is
 * optional except `policy_version`'s). 400 naming the field otherwise.
 *
 * @example
 * ```ts
 * const body = await parseFenceBody(c.req.raw, PauseRequest); // { mode: "drain", timeout_seconds: 300 }
 * ```
 */
export async function parseFenceBody<T extends z.ZodType>(request: Request, schema: T): Promise<z.infer<T>> {
  const empty = request.headers.get("Content-Length") === "0" || request.body === null;
  const raw = empty ? "" : await readBodyText(request, MAX_FENCE_BODY_BYTES);
  let value: unknown = {};
  if (raw.trim() !== "") {
    try {
      value = JSON.parse(raw);
    } catch (error) {
      throw ApiError.badRequest(
        "invalid_json",
        `request body is not valid JSON: ${(error as Error).message}`,
      );
    }
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error);
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}

/**
 * Changes the fence of `queue` in every one of its shards and collects every gateway's answer.
 * `ok` is true when every connected gateway acknowledged (vacuously with none). The queue is
 * recorded in the registry, so the admin routes (all queues) reach it even before a gateway came.
 * With `forNode`, a shard whose fence is already where `change` asks fences only that gateway
 * again (`QueueDO.ensureFence`): what the upstream per-gateway routes need.
 *
 * @example
 * ```ts
 * const out = await fenceQueue(env, "default", { kind: "pause", mode: "drain" }, 300);
 * out.fence.paused; // true, whatever the gateways answered
 * ```
 */
export async function fenceQueue(
  env: Env,
  queue: string,
  change: FenceChange,
  timeoutSeconds: number,
  forNode?: string,
): Promise<FenceChangeResponse> {
  const shards = shardsOf(queue, env.POLAR_QUEUE_SHARDS);
  try {
    // A dispatcher name, as gateways are recorded: listings expand it to every shard.
    await env.REGISTRY.getByName(REGISTRY_NAME).recordQueue(shards[0]!);
  } catch (error) {
    // Only the admin routes' list of queues depends on it; the fence itself is in the shards.
    console.warn(`fence: registry did not record queue ${queue}:`, error);
  }
  const answers = await Promise.all(
    shards.map((shard) =>
      (forNode === undefined
        ? env.QUEUE.getByName(shard).changeFence(change, timeoutSeconds)
        : env.QUEUE.getByName(shard).ensureFence(change, timeoutSeconds, forNode)
      ).catch((error: unknown) => {
        throw new ApiError(
          503,
          "unavailable",
          `shard '${shard}' of queue '${queue}' did not store the change (${error instanceof Error ? error.message : String(error)}); send it again`,
          undefined,
          { "Retry-After": "1" },
        );
      }),
    ),
  );
  const nodes = answers.flatMap((a) => a.nodes);
  return { queue, fence: answers[0]!.fence, ok: nodes.every((n) => n.ok), nodes };
}

/**
 * The fence of `queue` (as its first shard stores it) and every connected gateway's gate.
 *
 * @example
 * ```ts
 * (await fenceStatus(env, "default")).fence.policy_version; // "3"
 * ```
 */
export async function fenceStatus(env: Env, queue: string): Promise<FenceStatusResponse> {
  const shards = shardsOf(queue, env.POLAR_QUEUE_SHARDS);
  const answers = await Promise.all(shards.map((shard) => env.QUEUE.getByName(shard).fenceStatus()));
  return { queue, fence: answers[0]!.fence, nodes: answers.flatMap((a) => a.nodes) };
}

/**
 * The queues sub-app (mounted at `/v1/queues`): fence changes need the trainer token (the admin
 * token may act as trainer); reading the fence state needs only `viewer`.
 *
 * @example
 * ```ts
 * app.route("/v1/queues", queueRoutes);
 * ```
 */
export const queueRoutes = new Hono<{ Bindings: Env }>();
queueRoutes.use("*", requireReadWrite("viewer", "trainer"));

queueRoutes.post("/:queue/inference/pause", async (c) => {
  const queue = identifierParam("queue", c.req.param("queue"));
  const body = await parseFenceBody(c.req.raw, PauseRequest);
  return c.json(await fenceQueue(c.env, queue, { kind: "pause", mode: body.mode }, body.timeout_seconds));
});

queueRoutes.post("/:queue/inference/resume", async (c) => {
  const queue = identifierParam("queue", c.req.param("queue"));
  const body = await parseFenceBody(c.req.raw, ResumeRequest);
  const change: FenceChange =
    body.policy_version === undefined
      ? { kind: "resume" }
      : { kind: "resume", policy_version: body.policy_version };
  return c.json(await fenceQueue(c.env, queue, change, 0));
});

queueRoutes.post("/:queue/policy_version", async (c) => {
  const queue = identifierParam("queue", c.req.param("queue"));
  const body = await parseFenceBody(c.req.raw, PolicyVersionRequest);
  return c.json(
    await fenceQueue(c.env, queue, { kind: "policy_version", policy_version: body.policy_version }, 0),
  );
});

queueRoutes.get("/:queue/inference", async (c) => {
  const queue = identifierParam("queue", c.req.param("queue"));
  return c.json(await fenceStatus(c.env, queue));
});

/**
 * The answer of a fence change none of whose shards could be reached to store it (each fence
 * route of this module and of `admin.ts` may answer it).
 *
 * @example
 * ```ts
 * api.path("post", route, operationId, summary, { 200: json(FenceChangeResponse, "Stored"), ...fenceStoreErrors });
 * ```
 */
export const fenceStoreErrors = {
  503: json(ErrorBody, "A shard of the queue did not store the change; send it again"),
};

/**
 * The OpenAPI entries of the routes above.
 *
 * @example
 * ```ts
 * describeQueueRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeQueueRoutes(api: ApiDescription): void {
  const queueParam = idParam("queue");
  api.path(
    "post",
    "/v1/queues/{queue}/inference/pause",
    "pauseQueueInference",
    "Pause inference on the queue's gateways, durably (trainer); mode drain or abort, one timeout",
    {
      200: json(FenceChangeResponse, "Stored; ok when every connected gateway acked paused with 0 in flight"),
      ...fenceStoreErrors,
    },
    { params: queueParam, body: PauseRequest },
  );
  api.path(
    "post",
    "/v1/queues/{queue}/inference/resume",
    "resumeQueueInference",
    "Set the policy version (if given) and resume inference on the queue, durably (trainer)",
    { 200: json(FenceChangeResponse, "Stored; each gateway's ack"), ...fenceStoreErrors },
    { params: queueParam, body: ResumeRequest },
  );
  api.path(
    "post",
    "/v1/queues/{queue}/policy_version",
    "setQueuePolicyVersion",
    "Set the policy version stamped on the queue's completions, durably (trainer)",
    { 200: json(FenceChangeResponse, "Stored; each gateway's ack"), ...fenceStoreErrors },
    { params: queueParam, body: PolicyVersionRequest },
  );
  api.path(
    "get",
    "/v1/queues/{queue}/inference",
    "getQueueInference",
    "The queue's fence and each connected gateway's gate (trainer; no side effect)",
    { 200: json(FenceStatusResponse, "Fence and gates") },
    { params: queueParam },
  );
}
