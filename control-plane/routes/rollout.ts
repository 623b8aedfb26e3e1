/**
 * Upstream-compatible routes (`/rollout/*`), so an upstream task file and trainer bridge work
 * unchanged: one upstream task = one batch of one task, stored under batch id
 * `rollout:<task_id>`. Differences from upstream, on purpose: resubmitting a finished task id
 * with the same body is an idempotent replay (upstream overwrote it), with another body a 409.
 *
 * @module
 */
import { Hono } from "hono";
import { type BatchStatusBody, LIMITS, type SessionResult } from "../../protocol";
import { sequencedResults } from "../artifacts";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import { dispatchersOf } from "../queue/shards";
import { REGISTRY_NAME } from "../registry/registry-do";
import { readJsonBody } from "../request-body";
import { createBatch } from "./batches";
import { identifierParam } from "./params";

/** Batch ids of upstream tasks start with this. */
export const ROLLOUT_PREFIX = "rollout:";

/**
 * The batch id of upstream task `taskId`.
 *
 * @example
 * ```ts
 * rolloutBatchId("t1"); // "rollout:t1"
 * ```
 */
export function rolloutBatchId(taskId: string): string {
  const id = `${ROLLOUT_PREFIX}${taskId}`;
  if (id.length > LIMITS.maxBatchIdChars) {
    throw ApiError.badRequest(
      "validation_failed",
      `task_id: at most ${LIMITS.maxBatchIdChars - ROLLOUT_PREFIX.length} characters on /rollout routes`,
      [{ field: "task_id", message: "too long" }],
    );
  }
  return id;
}

/**
 * The upstream routes (mounted at `/rollout`, trainer token).
 *
 * @example
 * ```ts
 * app.route("/rollout", rolloutRoutes);
 * ```
 */
export const rolloutRoutes = new Hono<{ Bindings: Env }>();
rolloutRoutes.use("*", requireRole("trainer"));

rolloutRoutes.post("/task/submit", async (c) => {
  const raw = await readJsonBody(c.req.raw, LIMITS.maxBodyBytes);
  const taskId = identifierParam("task_id", (raw as { task_id?: string } | null)?.task_id);
  const { queue, ...task } = raw as Record<string, unknown>;
  await createBatch(c.env, {
    batch_id: rolloutBatchId(taskId),
    ...(queue === undefined ? {} : { queue }),
    tasks: [task],
  });
  return c.json({ task_id: taskId, status: "running" });
});

/**
 * Upstream's task state of a batch: `cancelled`, `running`, `completed`, or `failed` when it
 * finished and any session ended with a `configuration` error (upstream's `failed` means the task
 * itself could not run; such a group is also not a full group to train on).
 *
 * @example
 * ```ts
 * rolloutState(await stub.status()); // "completed"
 * ```
 */
export function rolloutState(status: BatchStatusBody): "cancelled" | "running" | "completed" | "failed" {
  if (status.cancelled_at) return "cancelled";
  if (status.status !== "completed") return "running";
  return status.errors.configuration > 0 ? "failed" : "completed";
}

/** Upstream `TaskStatus` of one task. */
async function taskStatus(env: Env, taskId: string) {
  const batchId = rolloutBatchId(taskId);
  const stub = env.BATCH.getByName(batchId);
  const status = await stub.status();
  if (!status || status.tasks.length === 0) throw ApiError.notFound(`task '${taskId}' does not exist`);
  const results: string[] = [];
  let after = 0;
  for (;;) {
    const page = await stub.results(after, LIMITS.maxResultsPerPage);
    if (!page || page.results.length === 0) break;
    for (const item of await sequencedResults(env.TRAJECTORIES, page.results)) results.push(item);
    after = page.next;
  }
  const state = rolloutState(status);
  const parsed = results.map((r) => (JSON.parse(r) as { result: SessionResult }).result);
  return {
    task_id: taskId,
    status: state,
    total_sessions: status.sessions,
    completed_sessions: status.completed_sessions,
    results: parsed,
    result_paths: [] as string[],
  };
}

rolloutRoutes.get("/task/:id", async (c) =>
  c.json(await taskStatus(c.env, identifierParam("task_id", c.req.param("id")))),
);

rolloutRoutes.delete("/task/:id", async (c) => {
  const taskId = identifierParam("task_id", c.req.param("id"));
  const batchId = rolloutBatchId(taskId);
  await c.env.BATCH.getByName(batchId).cancel(batchId, null);
  const status = await c.env.BATCH.getByName(batchId).status();
  if (!status || status.tasks.length === 0) {
    // Upstream's `register_if_missing`: a tombstone now refuses a later submit of this id.
    return c.json({
      task_id: taskId,
      status: "cancelled",
      total_sessions: 0,
      completed_sessions: 0,
      results: [],
      result_paths: [],
    });
  }
  return c.json(await taskStatus(c.env, taskId));
});

rolloutRoutes.get("/status", async (c) => {
  const registry = c.env.REGISTRY.getByName(REGISTRY_NAME);
  const batches = (await registry.listBatches(LIMITS.maxBatchesPerPage, null)).filter((b) =>
    b.batch_id.startsWith(ROLLOUT_PREFIX),
  );
  const tasks: Record<string, string> = {};
  await Promise.all(
    batches.map(async (b) => {
      const s = await c.env.BATCH.getByName(b.batch_id).status();
      if (s) tasks[b.batch_id.slice(ROLLOUT_PREFIX.length)] = rolloutState(s);
    }),
  );
  const queues = dispatchersOf(await registry.listQueues(), c.env.POLAR_QUEUE_SHARDS);
  const stats = await Promise.all(queues.map((q) => c.env.QUEUE.getByName(q).stats()));
  const nodes = stats.flatMap((s) =>
    s.gateways.map((g) => ({
      node_id: g.node_id,
      max_init_workers: g.capacity.max_init,
      max_run_workers: g.capacity.max_run,
      max_postrun_workers: g.capacity.max_postrun,
      metrics: g.metrics,
      healthy: g.connected,
      draining: g.draining,
      last_heartbeat: g.last_seen_at,
    })),
  );
  return c.json({
    tasks,
    pipeline: { pending_sessions: stats.reduce((sum, s) => sum + s.pending, 0) },
    nodes: { nodes },
  });
});
