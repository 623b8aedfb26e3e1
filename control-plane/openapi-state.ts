/**
 * OpenAPI entries of the state queries and the state-event stream (`GET /v1/events`,
 * `GET /v1/batches/:id/sessions`, `GET /v1/batches/:id/summary`), served by `routes/events.ts`
 * and `routes/batches.ts` and kept together here, in the document's order, with the shapes they
 * answer (mirrors of `events/kinds.ts` and `batch/summary.ts`, which have no zod schema of their
 * own).
 *
 * @module
 */
import { z } from "zod";
import { ErrorBody, SessionStatus } from "../protocol";
import { EVENT_KINDS, MAX_EVENTS_PER_PAGE } from "./events/kinds";
import { type ApiDescription, json } from "./openapi-registry";

const counts = z.record(z.string(), z.number()).describe("Sessions per status (statuses with none left out)");
const tokens = z.object({ prompt: z.number(), response: z.number() });

/** A batch item of `GET /v1/batches`. */
export const BatchListItemSchema = z.object({
  batch_id: z.string(),
  queue: z.string(),
  tasks: z.number(),
  sessions: z.number(),
  created_at: z.number(),
  status: z.enum(["running", "completed", "cancelled"]),
  harnesses: z.array(z.string()),
});

/** The filters of `GET /v1/batches`, besides `limit` and `before`. */
export const BatchListFilters = {
  status: z.enum(["running", "completed", "cancelled"]).optional(),
  queue: z.string().optional(),
  harness: z
    .string()
    .optional()
    .describe("Batches with a task of this harness ('import_path' for import paths)"),
  since: z.string().optional().describe("Batches created at or after this time (ms since the epoch)"),
};

const SessionListItem = z.object({
  session_id: z.string(),
  task_id: z.string(),
  status: SessionStatus,
  stage: z.string().nullable().describe("The status while a gateway holds the session, else null"),
  node_id: z.string().nullable(),
  attempt: z.number(),
  reward: z.number().nullable(),
  error_kind: z.string().nullable(),
  error_message: z.string().nullable(),
  created_at: z.number(),
  started_at: z.number().nullable(),
  finished_at: z.number().nullable(),
  stage_timings: z
    .object({ init_ms: z.number(), ready_wait_ms: z.number(), run_ms: z.number(), post_run_ms: z.number() })
    .nullable(),
  has_logs: z.boolean(),
  has_tokens: z.boolean(),
  has_completions: z.boolean(),
});

const aggregates = {
  total: z.number(),
  counts_by_status: counts,
  mean_reward: z.number().nullable(),
  pass_rate: z.number().nullable().describe("Share of rewarded sessions with reward >= 1"),
  errors_by_kind: z.record(z.string(), z.number()),
  tokens,
};

const BatchSummarySchema = z.object({
  batch_id: z.string(),
  status: z.enum(["running", "completed", "cancelled"]),
  ...aggregates,
  tasks: z.array(
    z.object({
      task_id: z.string(),
      harness: z.string(),
      ...aggregates,
      reward_histogram: z
        .array(z.object({ lo: z.number(), hi: z.number(), count: z.number() }))
        .describe("10 bins over [0, 1]; rewards outside are clamped"),
    }),
  ),
});

const EventsPage = z.object({
  events: z.array(
    z.object({
      seq: z.number(),
      kind: z.enum(EVENT_KINDS),
      at: z.number(),
      data: z.record(z.string(), z.unknown()).describe("The kind's data (docs/control-plane.md)"),
    }),
  ),
  next: z.number().describe("Cursor to continue from (the log's head after a short page)"),
  head: z.number().describe("Newest seq in the log"),
});

/**
 * Registers the entries.
 *
 * @example
 * ```ts
 * describeStateRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeStateRoutes(api: ApiDescription): void {
  api.path(
    "get",
    "/v1/events",
    "listEvents",
    "State events (batch, session, gateway, fence): a JSON page, or SSE with Accept: text/event-stream or stream=1 (id = seq, resumable with Last-Event-ID; heartbeat comment every 15 s)",
    {
      200: json(EventsPage, "A page of events (SSE: text/event-stream)"),
      410: json(
        ErrorBody,
        "events_expired: the cursor is older than the bounded log; reload and resume at details.next",
      ),
    },
    {
      query: z.object({
        after: z.string().optional().describe("Events after this seq (default: the oldest kept)"),
        limit: z.string().optional().describe(`At most this many (1..${MAX_EVENTS_PER_PAGE}, default 100)`),
        batch_id: z.string().optional(),
        kinds: z
          .string()
          .optional()
          .describe(`Comma-separated: ${EVENT_KINDS.join(",")}`),
        stream: z.string().optional().describe("1: SSE without an Accept header"),
      }),
    },
  );
  api.path(
    "get",
    "/v1/batches/{id}/sessions",
    "listBatchSessions",
    "Sessions of a batch in task, then sample order, filtered and paged (viewer)",
    {
      200: json(
        z.object({ sessions: z.array(SessionListItem), next: z.string().nullable() }),
        "A page of sessions",
      ),
    },
    {
      params: z.object({ id: z.string() }),
      query: z.object({
        task_id: z.string().optional(),
        status: SessionStatus.optional(),
        node_id: z.string().optional(),
        limit: z.string().optional().describe("1..1000, default 100"),
        after: z.string().optional().describe("The next of the previous page (a session_id)"),
      }),
    },
  );
  api.path(
    "get",
    "/v1/batches/{id}/summary",
    "getBatchSummary",
    "Aggregates of a batch and of each task: counts, mean reward, pass rate, reward histogram, errors, tokens (viewer)",
    { 200: json(BatchSummarySchema, "Summary") },
    { params: z.object({ id: z.string() }) },
  );
}
