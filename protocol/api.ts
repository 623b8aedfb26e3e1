/**
 * Bodies of the control plane's HTTP API (what trainers send and receive).
 *
 * @module
 */
import { z } from "zod";
import { EvaluationCounts } from "./evaluation";
import { ErrorKind, SessionResult, SessionStatus } from "./session";

/** Error body of every non-2xx response: `{error: {code, message, details?}}`. */
export const ErrorBody = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    details: z.unknown().optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

/** Response of `POST /v1/batches`. */
export const BatchCreated = z.strictObject({
  batch_id: z.string(),
  queue: z.string(),
  tasks: z.number().int(),
  sessions: z.number().int(),
  created: z.boolean(),
});
export type BatchCreated = z.infer<typeof BatchCreated>;

/** Per-task progress inside a batch status. */
export const TaskProgress = z.strictObject({
  task_id: z.string(),
  num_samples: z.number().int(),
  counts: z.record(SessionStatus, z.number().int()),
  done: z.boolean(),
  /** Evaluation verdicts of the task's accepted results (tampering attempts show here). */
  evaluation: EvaluationCounts.optional(),
});
export type TaskProgress = z.infer<typeof TaskProgress>;

/** Response of `GET /v1/batches/:id`. */
export const BatchStatusBody = z.strictObject({
  batch_id: z.string(),
  queue: z.string(),
  created_at: z.number(),
  status: z.enum(["running", "completed"]),
  sessions: z.number().int(),
  completed_sessions: z.number().int(),
  counts: z.record(SessionStatus, z.number().int()),
  /**
   * Accepted results per `error.kind` (`configuration` = the task names something no gateway could
   * load or run: fix the task; never retried, never scored).
   */
  errors: z.record(ErrorKind, z.number().int()),
  tasks: z.array(TaskProgress),
  /** The same counts over the whole batch. */
  evaluation: EvaluationCounts.optional(),
  /** When the batch was cancelled (`DELETE /v1/batches/:id`), else null. */
  cancelled_at: z.number().nullable().optional(),
});
export type BatchStatusBody = z.infer<typeof BatchStatusBody>;

/** A result with its position in the batch's results stream. */
export const SequencedResult = z.strictObject({
  seq: z.number().int(),
  result: SessionResult,
});

/** Response of `GET /v1/batches/:id/results?after=SEQ`: results after the cursor, and the next cursor. */
export const ResultsPage = z.strictObject({
  batch_id: z.string(),
  results: z.array(SequencedResult),
  next: z.number().int(),
  done: z.boolean(),
});
export type ResultsPage = z.infer<typeof ResultsPage>;
