/**
 * Trainer routes under `/v1/batches`: create (idempotent by `batch_id`), list, status, results
 * (cursor pages with `wait=` long-poll, or SSE resumable with `Last-Event-ID`), cancel a batch or
 * one task.
 *
 * @module
 */
import { Hono } from "hono";
import { streamSSE } from "hono/streaming";
import { z } from "zod";
import {
  BatchCreated,
  BatchRequest,
  BatchStatusBody,
  describeIssues,
  ErrorBody,
  fieldIssues,
  Identifier,
  LIMITS,
  ResultsPage,
  SessionStatus,
} from "../../protocol";
import { sequencedResults } from "../artifacts";
import { requireReadWrite } from "../auth";
import { harnessOf } from "../batch/summary";
import { callbackUrlProblem, privateCallbacksAllowed } from "../callback-url";
import { ApiError } from "../errors";
import { newBatchId } from "../ids";
import { type ApiDescription, idParam, json } from "../openapi-registry";
import { BatchListFilters, BatchListItemSchema } from "../openapi-state";
import { type BatchCursor, type BatchListFilter, REGISTRY_NAME } from "../registry/registry-do";
import { canonicalHash, readJsonBody, utf8Length } from "../request-body";
import type { RawResultsPage } from "../shared/ledger-rpc";
import { identifierParam, integerParam } from "./params";

/**
 * The batches sub-app (mounted at `/v1/batches`): the trainer token creates and cancels, the
 * viewer (or trainer) token reads.
 *
 * @example
 * ```ts
 * app.route("/v1/batches", batchRoutes);
 * ```
 */
export const batchRoutes = new Hono<{ Bindings: Env }>();

// Reads are for dashboards too (viewer); creating and cancelling stay the trainer's.
batchRoutes.use("*", requireReadWrite("viewer", "trainer"));

/**
 * Parses a batch request; 400 `validation_failed` naming every wrong field.
 *
 * @example
 * ```ts
 * const request = parseBatchRequest(await readJsonBody(c.req.raw, LIMITS.maxBodyBytes));
 * ```
 */
export function parseBatchRequest(raw: unknown): BatchRequest {
  const parsed = BatchRequest.safeParse(raw);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error);
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}

/**
 * Parses and checks a batch request, then creates it on its ledger and records it in the registry.
 *
 * @example
 * ```ts
 * const { status, body } = await createBatch(env, raw);
 * ```
 */
export async function createBatch(env: Env, raw: unknown) {
  const parsed = parseBatchRequest(raw);
  const request = { ...parsed, batch_id: parsed.batch_id ?? newBatchId() };
  const allowPrivate = privateCallbacksAllowed(env);
  const urls: [string, string | undefined][] = [
    ["callback_url", request.callback_url],
    ...request.tasks.map((t, i): [string, string | undefined] => [
      `tasks[${i}].callback_url`,
      t.callback_url,
    ]),
  ];
  for (const [field, url] of urls) {
    const problem = url === undefined ? null : callbackUrlProblem(url, allowPrivate);
    if (problem) {
      throw ApiError.badRequest("validation_failed", `${field}: ${problem}`, [{ field, message: problem }]);
    }
  }
  request.tasks.forEach((task, i) => {
    const bytes = utf8Length(JSON.stringify(task));
    if (bytes > LIMITS.maxTaskSpecBytes) {
      throw ApiError.tooLarge(
        `tasks[${i}]: task is ${bytes} bytes as JSON; the limit is ${LIMITS.maxTaskSpecBytes} (LIMITS.maxTaskSpecBytes)`,
      );
    }
  });
  const hash = await canonicalHash(request);
  const outcome = await env.BATCH.getByName(request.batch_id).create(request, hash);
  if (outcome.kind === "conflict") throw ApiError.conflict(outcome.message);
  if (outcome.kind === "queue_full") {
    throw new ApiError(429, "queue_full", outcome.message, undefined, {
      "Retry-After": String(outcome.retryAfterSeconds),
    });
  }
  // Recorded for both outcomes: a replay repairs a registry write that failed the first time.
  await env.REGISTRY.getByName(REGISTRY_NAME).recordBatch({
    batch_id: outcome.body.batch_id,
    queue: outcome.body.queue,
    tasks: outcome.body.tasks,
    sessions: outcome.body.sessions,
    created_at: Date.now(),
    harnesses: request.tasks.map(harnessOf),
  });
  return { status: outcome.kind === "created" ? (201 as const) : (200 as const), body: outcome.body };
}

batchRoutes.post("/", async (c) => {
  const { status, body } = await createBatch(c.env, await readJsonBody(c.req.raw, LIMITS.maxBodyBytes));
  return c.json(body, status);
});

/**
 * The `before` cursor of `GET /v1/batches`: `<created_at>:<batch_id>` as given in `next_before`
 * (the batch id may itself contain `:`), or a bare `<created_at>` (every batch strictly older, the
 * earlier form of the cursor). 400 naming `before` otherwise.
 *
 * @example
 * ```ts
 * batchCursorParam("1767225600000:b_1"); // { created_at: 1767225600000, batch_id: "b_1" }
 * ```
 */
export function batchCursorParam(raw: string | undefined): BatchCursor | null {
  if (raw === undefined) return null;
  const match = /^(\d{1,16})(?::(.*))?$/.exec(raw);
  const createdAt = match ? Number(match[1]) : Number.NaN;
  const batchId = match?.[2];
  if (
    !match ||
    !Number.isSafeInteger(createdAt) ||
    (batchId !== undefined && !Identifier.safeParse(batchId).success)
  ) {
    const message =
      "must be the next_before of the previous page ('<created_at>:<batch_id>') or a created_at";
    throw ApiError.badRequest("validation_failed", `before: ${message}, got '${raw}'`, [
      { field: "before", message },
    ]);
  }
  return { created_at: createdAt, batch_id: batchId ?? null };
}

/**
 * The cursor that continues after `batch`.
 *
 * @example
 * ```ts
 * nextBefore({ created_at: 1767225600000, batch_id: "b_1" }); // "1767225600000:b_1"
 * ```
 */
export function nextBefore(batch: { created_at: number; batch_id: string }): string {
  return `${batch.created_at}:${batch.batch_id}`;
}

/** Most sessions in one page of `GET /v1/batches/:id/sessions`. */
export const MAX_SESSIONS_PER_PAGE = 1_000;

/** Values of the `status` filter of `GET /v1/batches`. */
const BATCH_STATUSES = ["running", "completed", "cancelled"];

/**
 * The filters of `GET /v1/batches` (`status`, `queue`, `harness`, `since`); 400 naming the bad one.
 *
 * @example
 * ```ts
 * batchFilterParams({ status: "running" }); // { status: "running", queue: null, harness: null, since: null }
 * ```
 */
export function batchFilterParams(query: Record<string, string | undefined>): BatchListFilter {
  const status = query.status ?? null;
  if (status !== null && !BATCH_STATUSES.includes(status)) {
    const message = `must be one of ${BATCH_STATUSES.join(", ")}`;
    throw ApiError.badRequest("validation_failed", `status: ${message}, got '${status}'`, [
      { field: "status", message },
    ]);
  }
  return {
    status,
    queue: query.queue === undefined ? null : identifierParam("queue", query.queue),
    harness: query.harness === undefined ? null : identifierParam("harness", query.harness),
    since:
      query.since === undefined ? null : integerParam("since", query.since, 0, 0, Number.MAX_SAFE_INTEGER),
  };
}

batchRoutes.get("/", async (c) => {
  const limit = integerParam("limit", c.req.query("limit"), 50, 1, LIMITS.maxBatchesPerPage);
  const cursor = batchCursorParam(c.req.query("before"));
  const filter = batchFilterParams(c.req.query());
  const batches = await c.env.REGISTRY.getByName(REGISTRY_NAME).listBatches(limit, cursor, filter);
  const last = batches[batches.length - 1];
  return c.json({ batches, next_before: batches.length === limit && last ? nextBefore(last) : null });
});

batchRoutes.get("/:id", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const status = await c.env.BATCH.getByName(batchId).status();
  if (!status) throw ApiError.notFound(`batch '${batchId}' does not exist`);
  return c.json(status);
});

batchRoutes.delete("/:id", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const outcome = await c.env.BATCH.getByName(batchId).cancel(batchId, null);
  if (outcome.kind === "not_found") throw ApiError.notFound(outcome.message);
  const ended = outcome.kind === "cancelled" ? outcome.ended : 0;
  return c.json({ batch_id: batchId, status: "cancelled", cancelled_sessions: ended });
});

batchRoutes.delete("/:id/tasks/:task_id", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const taskId = identifierParam("task_id", c.req.param("task_id"));
  const outcome = await c.env.BATCH.getByName(batchId).cancel(batchId, taskId);
  if (outcome.kind === "not_found") throw ApiError.notFound(outcome.message);
  return c.json({
    batch_id: batchId,
    task_id: taskId,
    status: "cancelled",
    cancelled_sessions: outcome.kind === "cancelled" ? outcome.ended : 0,
  });
});

batchRoutes.get("/:id/sessions", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const status = c.req.query("status") ?? null;
  if (status !== null && !SessionStatus.safeParse(status).success) {
    const message = `must be one of ${SessionStatus.options.join(", ")}`;
    throw ApiError.badRequest("validation_failed", `status: ${message}, got '${status}'`, [
      { field: "status", message },
    ]);
  }
  const optional = (name: string) => {
    const raw = c.req.query(name);
    return raw === undefined ? null : identifierParam(name, raw);
  };
  const after = c.req.query("after");
  const page = await c.env.BATCH.getByName(batchId).sessions({
    task_id: optional("task_id"),
    status,
    node_id: optional("node_id"),
    after: after === undefined ? null : identifierParam("after", after),
    limit: integerParam("limit", c.req.query("limit"), 100, 1, MAX_SESSIONS_PER_PAGE),
  });
  if (!page) throw ApiError.notFound(`batch '${batchId}' does not exist`);
  return c.json(page);
});

batchRoutes.get("/:id/summary", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const summary = await c.env.BATCH.getByName(batchId).summary();
  if (!summary) throw ApiError.notFound(`batch '${batchId}' does not exist`);
  return c.json(summary);
});

/** Calls the ledger until it has results, the batch is done, or `waitMs` passed. */
async function pageWithin(
  env: Env,
  batchId: string,
  after: number,
  limit: number,
  waitMs: number,
): Promise<NonNullable<RawResultsPage>> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    const remaining = Math.max(0, deadline - Date.now());
    // A fresh stub per call: a stub that has thrown may be broken.
    const page = await env.BATCH.getByName(batchId).results(after, limit, remaining);
    if (!page) throw ApiError.notFound(`batch '${batchId}' does not exist`);
    if (page.results.length > 0 || page.done || Date.now() >= deadline) return page;
  }
}

batchRoutes.get("/:id/results", async (c) => {
  const batchId = identifierParam("batch_id", c.req.param("id"));
  const lastEventId = c.req.header("Last-Event-ID");
  const after = integerParam(
    lastEventId === undefined ? "after" : "Last-Event-ID",
    lastEventId ?? c.req.query("after"),
    0,
    0,
    Number.MAX_SAFE_INTEGER,
  );
  const limit = integerParam(
    "limit",
    c.req.query("limit"),
    LIMITS.maxResultsPerPage,
    1,
    LIMITS.maxResultsPerPage,
  );
  const wait = integerParam("wait", c.req.query("wait"), 0, 0, LIMITS.maxResultsWaitSeconds);
  const sse = (c.req.header("Accept") ?? "").includes("text/event-stream");
  // Fail before the stream starts when the batch does not exist.
  const first = await pageWithin(c.env, batchId, after, limit, sse ? 0 : wait * 1000);
  if (!sse) {
    const results = await sequencedResults(c.env.TRAJECTORIES, first.results);
    const body = `{"batch_id":${JSON.stringify(batchId)},"results":[${results.join(",")}],"next":${first.next},"done":${first.done}}`;
    return c.body(body, 200, { "Content-Type": "application/json; charset=UTF-8" });
  }
  return streamSSE(c, async (stream) => {
    let aborted = false;
    stream.onAbort(() => {
      aborted = true;
    });
    let page = first;
    for (;;) {
      const items = await sequencedResults(c.env.TRAJECTORIES, page.results);
      for (let i = 0; i < items.length; i++) {
        const seq = page.results[i]!.seq;
        await stream.writeSSE({ id: String(seq), event: "result", data: items[i]! });
      }
      if (page.done && page.results.length === 0) {
        await stream.writeSSE({
          event: "done",
          data: JSON.stringify({ batch_id: batchId, next: page.next }),
        });
        return;
      }
      if (aborted) return;
      if (page.results.length === 0) await stream.write(": keep-alive\n\n");
      page = await pageWithin(c.env, batchId, page.next, limit, 25_000);
    }
  });
});

/** `GET /v1/batches`'s page: newest first, with the cursor of the next. */
const BatchListPage = z.object({
  batches: z.array(BatchListItemSchema),
  next_before: z
    .string()
    .nullable()
    .describe("Cursor of the next page ('<created_at>:<batch_id>'); null on the last page"),
});

/** The query of `GET /v1/batches`. */
const BatchListQuery = z.object({
  limit: z.string().optional(),
  before: z
    .string()
    .optional()
    .describe("next_before of the previous page; a bare created_at lists batches strictly older"),
  ...BatchListFilters,
});

/**
 * The OpenAPI entries of the routes above; the sessions and summary of a batch are described with
 * the other state queries (`openapi-state.ts`).
 *
 * @example
 * ```ts
 * describeBatchRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeBatchRoutes(api: ApiDescription): void {
  const batchId = idParam("id");
  api.path(
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
  api.path(
    "get",
    "/v1/batches",
    "listBatches",
    "List batches, newest first",
    { 200: json(BatchListPage, "Batches") },
    { query: BatchListQuery },
  );
  api.path(
    "get",
    "/v1/batches/{id}",
    "getBatch",
    "Batch status with per-task counts",
    { 200: json(BatchStatusBody, "Status") },
    { params: batchId },
  );
  api.path(
    "get",
    "/v1/batches/{id}/results",
    "getBatchResults",
    "Results after a cursor; long-poll with wait=, or SSE (Accept: text/event-stream; id = seq, resumable with Last-Event-ID)",
    { 200: json(ResultsPage, "A page of results") },
    {
      params: batchId,
      query: z.object({
        after: z.string().optional(),
        wait: z.string().optional(),
        limit: z.string().optional(),
      }),
    },
  );
  api.path(
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
  api.path(
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
}
