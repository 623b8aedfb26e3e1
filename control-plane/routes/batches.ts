/**
 * Trainer routes: `POST /v1/batches`, `GET /v1/batches/:id`, `GET /v1/batches/:id/results`.
 *
 * @module
 */
import { Hono } from "hono";
import { BatchRequest, describeIssues, fieldIssues, Identifier, LIMITS } from "../../protocol";
import { requireRole } from "../auth";
import { ApiError } from "../errors";
import { newBatchId } from "../ids";
import { canonicalHash, readJsonBody, utf8Length } from "../request-body";

/** Parses an optional non-negative integer query parameter, naming it on failure. */
function integerParam(
  name: string,
  raw: string | undefined,
  fallback: number,
  min: number,
  max: number,
): number {
  if (raw === undefined) return fallback;
  const value = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
  if (!Number.isSafeInteger(value) || value < min || value > max) {
    throw ApiError.badRequest(
      "validation_failed",
      `${name}: must be an integer between ${min} and ${max}, got '${raw}'`,
      [{ field: name, message: `must be an integer between ${min} and ${max}` }],
    );
  }
  return value;
}

function batchIdParam(raw: string): string {
  const parsed = Identifier.safeParse(raw);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error).map((i) => ({ ...i, field: "batch_id" }));
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  return parsed.data;
}

/**
 * The batches sub-app (mounted at `/v1/batches`, trainer token required).
 *
 * @example
 * ```ts
 * app.route("/v1/batches", batchRoutes);
 * ```
 */
export const batchRoutes = new Hono<{ Bindings: Env }>();

batchRoutes.use("*", requireRole("trainer"));

batchRoutes.post("/", async (c) => {
  const raw = await readJsonBody(c.req.raw, LIMITS.maxBodyBytes);
  const parsed = BatchRequest.safeParse(raw);
  if (!parsed.success) {
    const issues = fieldIssues(parsed.error);
    throw ApiError.badRequest("validation_failed", describeIssues(issues), issues);
  }
  const request = { ...parsed.data, batch_id: parsed.data.batch_id ?? newBatchId() };
  request.tasks.forEach((task, i) => {
    const bytes = utf8Length(JSON.stringify(task));
    if (bytes > LIMITS.maxTaskSpecBytes) {
      throw ApiError.tooLarge(
        `tasks[${i}]: task is ${bytes} bytes as JSON; the limit is ${LIMITS.maxTaskSpecBytes}`,
      );
    }
  });
  const hash = await canonicalHash(request);
  const outcome = await c.env.BATCH.getByName(request.batch_id).create(request, hash);
  if (outcome.kind === "conflict") throw ApiError.conflict(outcome.message);
  return c.json(outcome.body, outcome.kind === "created" ? 201 : 200);
});

batchRoutes.get("/:id", async (c) => {
  const batchId = batchIdParam(c.req.param("id"));
  const status = await c.env.BATCH.getByName(batchId).status();
  if (!status) throw ApiError.notFound(`batch '${batchId}' does not exist`);
  return c.json(status);
});

batchRoutes.get("/:id/results", async (c) => {
  const batchId = batchIdParam(c.req.param("id"));
  const after = integerParam("after", c.req.query("after"), 0, 0, Number.MAX_SAFE_INTEGER);
  const limit = integerParam(
    "limit",
    c.req.query("limit"),
    LIMITS.maxResultsPerPage,
    1,
    LIMITS.maxResultsPerPage,
  );
  const page = await c.env.BATCH.getByName(batchId).results(after, limit);
  if (!page) throw ApiError.notFound(`batch '${batchId}' does not exist`);
  // The results are stored as JSON text; splice them in instead of parsing and re-serializing.
  const results = page.results.map((r) => `{"seq":${r.seq},"result":${r.json}}`).join(",");
  const body = `{"batch_id":${JSON.stringify(batchId)},"results":[${results}],"next":${page.next},"done":${page.done}}`;
  return c.body(body, 200, { "Content-Type": "application/json; charset=UTF-8" });
});
