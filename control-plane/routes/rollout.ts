/**
 * The upstream-compatible surface: `/health` and `/rollout/*` as upstream Polar's slime bridge and
 * `polar` CLI call them, at the root (header credentials) and under a credential-in-path base URL
 * `/u/<credential>` (docs/upstream-compat.md). One upstream task = one batch of one task per run
 * (`control-plane/upstream/runs.ts`); answers and callbacks take upstream's shapes
 * (`control-plane/upstream/render.ts`).
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import { LIMITS, SessionResult, TaskSpec } from "../../protocol";
import { sequencedResults } from "../artifacts";
import { callbackUrlProblem, privateCallbacksAllowed } from "../callback-url";
import { ApiError } from "../errors";
import { type ApiDescription, idParam, json } from "../openapi-registry";
import { REGISTRY_NAME } from "../registry/registry-do";
import { readJsonBody } from "../request-body";
import {
  optionalScope,
  requireUpstreamAuth,
  scopeOf,
  type UpstreamEnv,
  type UpstreamScope,
} from "../upstream/credentials";
import { fenceUrl, GatewayNodeInfo, nodeInfo, scopeFleet, upstreamBase } from "../upstream/nodes";
import { isRolloutBatch, rolloutState, upstreamTaskStatus } from "../upstream/render";
import { batchForSubmit, currentRun, isTombstone, parseRolloutBatchId } from "../upstream/runs";
import { createBatch, parseBatchRequest } from "./batches";
import { nodeRoutes } from "./nodes";
import { identifierParam } from "./params";

/**
 * The `/rollout` routes (trainer or admin token in a header, or a path credential).
 *
 * @example
 * ```ts
 * upstreamSurface.route("/rollout", rolloutRoutes);
 * ```
 */
export const rolloutRoutes = new Hono<UpstreamEnv>();
rolloutRoutes.use("*", requireUpstreamAuth);

/**
 * A request value as an error message shows it: a string quoted, anything else as (at most 100
 * characters of) its JSON. Never `String(value)`, which throws for an object such as
 * `{"toString": 1}` and would turn a bad request into a 500.
 */
function shownValue(value: unknown): string {
  const text = typeof value === "string" ? `'${value}'` : (JSON.stringify(value) ?? String(value));
  return text.length > 100 ? `${text.slice(0, 100)}…` : text;
}

/**
 * The queue a submit runs on: a path credential's own (403 when the task names another), else the
 * task's.
 */
function submitQueue(scope: UpstreamScope, queue: unknown): unknown {
  if (scope.queue === null) return queue;
  if (queue !== undefined && queue !== scope.queue) {
    throw ApiError.forbidden(
      `queue: this credential ('${scope.credential}') is scoped to queue '${scope.queue}', not ${shownValue(queue)}`,
    );
  }
  return scope.queue;
}

rolloutRoutes.post("/task/submit", async (c) => {
  const raw = await readJsonBody(c.req.raw, LIMITS.maxBodyBytes);
  const body = (typeof raw === "object" && raw !== null ? raw : {}) as Record<string, unknown>;
  const taskId = identifierParam("task_id", body.task_id as string | undefined);
  const { queue, ...task } = body;
  const warnings: string[] = [];
  // The bridge always sends a callback on the trainer host and polls anyway: a callback that may
  // not be used is dropped with a warning, never a failed submit.
  if (task.callback_url !== undefined && task.callback_url !== null) {
    const problem =
      typeof task.callback_url === "string"
        ? callbackUrlProblem(task.callback_url, privateCallbacksAllowed(c.env))
        : "is not a string";
    if (problem) {
      warnings.push(`callback_url ${problem}: no callback will be sent; poll GET /rollout/task/${taskId}`);
      delete task.callback_url;
    }
  } else delete task.callback_url;
  const runQueue = submitQueue(scopeOf(c), queue);
  const request = { ...(runQueue === undefined ? {} : { queue: runQueue }), tasks: [task] };
  // Checked before a run is claimed, so a bad body never moves the task id to a new run.
  parseBatchRequest(request);
  const batchId = await batchForSubmit(c.env, taskId, Date.now());
  try {
    await createBatch(c.env, { batch_id: batchId, ...request });
  } catch (error) {
    if (error instanceof ApiError && error.status === 409)
      throw ApiError.conflict(`task '${taskId}' is already running with another body`);
    throw error;
  }
  return c.json({ task_id: taskId, status: "running", ...(warnings.length ? { warnings } : {}) });
});

/** Every accepted result of a batch (trajectories spliced). */
async function allResults(env: Env, batchId: string): Promise<SessionResult[]> {
  const stub = env.BATCH.getByName(batchId);
  const out: SessionResult[] = [];
  let after = 0;
  for (;;) {
    const page = await stub.results(after, LIMITS.maxResultsPerPage);
    if (!page || page.results.length === 0) break;
    for (const item of await sequencedResults(env.TRAJECTORIES, page.results))
      out.push((JSON.parse(item) as { result: SessionResult }).result);
    after = page.next;
  }
  return out;
}

/**
 * The current run of a task as the scope sees it: `absent` (never submitted), `tombstone`
 * (cancelled before submission), `hidden` (a run on a queue the credential may not see: answered
 * as absent, without side effects) or `visible`.
 */
async function visibleRun(env: Env, scope: UpstreamScope, taskId: string) {
  const run = await currentRun(env, taskId);
  const { status } = run;
  if (!status) return { ...run, kind: "absent" as const };
  if (isTombstone(status)) return { ...run, kind: "tombstone" as const };
  if (scope.queue !== null && status.queue !== scope.queue) return { ...run, kind: "hidden" as const };
  return { ...run, status, kind: "visible" as const };
}

rolloutRoutes.get("/task/:id", async (c) => {
  const taskId = identifierParam("task_id", c.req.param("id"));
  const run = await visibleRun(c.env, scopeOf(c), taskId);
  if (run.kind !== "visible") throw ApiError.notFound(`task '${taskId}' does not exist`);
  return c.json(upstreamTaskStatus(taskId, run.status, await allResults(c.env, run.batchId)));
});

/** Upstream's boolean query values (FastAPI's): true/1/yes/on, false/0/no/off. */
function booleanQuery(name: string, raw: string | undefined): boolean {
  if (raw === undefined) return false;
  const v = raw.toLowerCase();
  if (["true", "1", "yes", "on"].includes(v)) return true;
  if (["false", "0", "no", "off"].includes(v)) return false;
  throw ApiError.badRequest("validation_failed", `${name}: must be true or false, got '${raw}'`, [
    { field: name, message: "must be true or false" },
  ]);
}

rolloutRoutes.delete("/task/:id", async (c) => {
  const taskId = identifierParam("task_id", c.req.param("id"));
  const registerIfMissing = booleanQuery("register_if_missing", c.req.query("register_if_missing"));
  const run = await visibleRun(c.env, scopeOf(c), taskId);
  const stub = c.env.BATCH.getByName(run.batchId);
  if (run.kind !== "visible") {
    // As upstream: an unknown id is 404, unless the caller asks for a tombstone that refuses a
    // submit of this id still in flight (`runs.ts`, TOMBSTONE_SECONDS).
    if (!registerIfMissing || run.kind === "hidden")
      throw ApiError.notFound(`task '${taskId}' does not exist`);
    if (run.kind === "absent") await stub.cancel(run.batchId, null);
    return c.json({
      task_id: taskId,
      status: "cancelled",
      total_sessions: 0,
      completed_sessions: 0,
      results: [],
      result_paths: [],
    });
  }
  // A finished task is left as it is (upstream answers its status unchanged).
  await stub.cancel(run.batchId, null, { onlyIfOpen: true });
  const status = (await stub.status()) ?? run.status;
  return c.json(upstreamTaskStatus(taskId, status, await allResults(c.env, run.batchId)));
});

rolloutRoutes.get("/status", async (c) => {
  const scope = scopeOf(c);
  const registry = c.env.REGISTRY.getByName(REGISTRY_NAME);
  const batches = (await registry.listBatches(LIMITS.maxBatchesPerPage, null)).filter(
    (b) => isRolloutBatch(b.batch_id) && (scope.queue === null || b.queue === scope.queue),
  );
  // Newest first: the first batch seen of a task id is its current run.
  const current = new Map<string, string>();
  for (const b of batches) {
    const parsed = parseRolloutBatchId(b.batch_id);
    if (parsed && !current.has(parsed.taskId)) current.set(parsed.taskId, b.batch_id);
  }
  const tasks: Record<string, string> = {};
  await Promise.all(
    [...current].map(async ([taskId, batchId]) => {
      const s = await c.env.BATCH.getByName(batchId).status();
      if (s && !isTombstone(s)) tasks[taskId] = rolloutState(s);
    }),
  );
  const fleet = await scopeFleet(c.env, scope);
  const base = upstreamBase(c.req.url);
  const nodes = fleet.gateways.map((g) => nodeInfo(g, fenceUrl(base, g.queue, g.node_id)));
  return c.json({ tasks, pipeline: { pending_sessions: fleet.pending }, nodes: { nodes } });
});

/**
 * The upstream-compatible surface: `/health` (with upstream's `nodes` count when the request
 * carries a valid credential; an anonymous liveness check gets `{status: "ok"}` only),
 * `/rollout/*`, and the weight-update fence's `/nodes` and `/queues/…/admin/inference/*`
 * (`./nodes.ts`). Mounted at the root and under `/u/:credential`.
 *
 * @example
 * ```ts
 * app.route("/", upstreamSurface);
 * ```
 */
export const upstreamSurface = new Hono<UpstreamEnv>();

upstreamSurface.get("/health", async (c) => {
  const scope = await optionalScope(c);
  if (!scope) return c.json({ status: "ok" });
  return c.json({ status: "ok", nodes: (await scopeFleet(c.env, scope)).gateways.length });
});
upstreamSurface.route("/rollout", rolloutRoutes);
upstreamSurface.route("/", nodeRoutes);

/** Upstream's SessionResult as rendered on `/rollout/*` (`control-plane/upstream/render.ts`). */
const UpstreamResultSchema = SessionResult.extend({
  status: z.enum(["COMPLETED", "ERROR", "TIMEOUT"]),
  timing: z.object({
    register_to_init_queue_ms: z.number(),
    init_ms: z.number(),
    run_ms: z.number(),
    postrun_ms: z.number(),
  }),
  error: z.string().nullable(),
});

/** Upstream's TaskStatus (`upstreamTaskStatus`). */
const TaskStatusSchema = z.object({
  task_id: z.string(),
  status: z.enum(["running", "completed", "failed", "cancelled"]),
  total_sessions: z.number(),
  completed_sessions: z.number(),
  results: z.array(UpstreamResultSchema),
  result_paths: z.array(z.string()),
});

/**
 * The OpenAPI entries of the `/rollout` routes (the fence discovery of `./nodes.ts` describes
 * itself).
 *
 * @example
 * ```ts
 * describeRolloutRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeRolloutRoutes(api: ApiDescription): void {
  api.path(
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
  api.path(
    "get",
    "/rollout/task/{id}",
    "upstreamGetTask",
    "Upstream-compatible TaskStatus",
    { 200: json(TaskStatusSchema, "Status") },
    { params: idParam("id") },
  );
  api.path(
    "delete",
    "/rollout/task/{id}",
    "upstreamCancelTask",
    "Upstream-compatible cancel (tombstone when unknown)",
    { 200: json(TaskStatusSchema, "Cancelled") },
    { params: idParam("id") },
  );
  api.path("get", "/rollout/status", "upstreamStatus", "Upstream-compatible service status", {
    200: json(
      z.object({
        tasks: z.record(z.string(), z.string()),
        pipeline: z.object({ pending_sessions: z.number() }),
        nodes: z.object({ nodes: z.array(GatewayNodeInfo) }),
      }),
      "Status",
    ),
  });
}
