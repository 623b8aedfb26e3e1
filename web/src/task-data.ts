/**
 * A task's sessions as its view sees them: every session of the task from `GET
 * /v1/batches/:id/sessions?task_id=` (queued and running ones too) with its live state from the
 * batch's event stream, or, from a control plane without that route, the finished ones from the
 * batch's results stream. Read again as results arrive, so statuses and timings stay current.
 *
 * @module
 */
import type { Api } from "./api";
import type { BatchSession, SessionResult } from "./api-types";
import { type BatchData, type LiveSession, useBatch } from "./batch-data";
import { type Resource, useResource } from "./hooks";
import { listTaskSessions } from "./requests";
import { lineOfResult, type SessionLine } from "./session-line";
import type { ResultLike } from "./stats";

/** A session of the task with its stage timings (ms by `ResultLike` timing field), when known. */
export type TaskSessionLine = SessionLine & { timing: ResultLike["timing"] | null };

/** What {@link useTaskSessions} returns. */
export interface TaskSessions {
  batch: BatchData;
  listed: Resource<{ sessions: BatchSession[] }>;
  /** The task's results so far. */
  results: SessionResult[];
  /** Every listed session, else every finished one. */
  lines: TaskSessionLine[];
}

/** A listed session's row, its status the live one when an event has brought it. */
function lineOfListed(s: BatchSession, live: LiveSession | undefined): TaskSessionLine {
  const t = s.stage_timings;
  return {
    session_id: s.session_id,
    task_id: s.task_id,
    status: live?.status ?? s.status,
    node_id: s.node_id,
    attempt: s.attempt,
    reward: s.reward,
    error: s.error_kind ? `${s.error_kind}: ${s.error_message ?? ""}` : "",
    // The listing names two stages differently from a result's timing.
    timing: t
      ? { init_ms: t.init_ms, ready_ms: t.ready_wait_ms, run_ms: t.run_ms, postrun_ms: t.post_run_ms }
      : null,
  };
}

/**
 * Loads a task's sessions and follows its batch.
 *
 * @example
 * ```ts
 * const { lines, listed } = useTaskSessions(api, "b1", "t1");
 * ```
 */
export function useTaskSessions(api: Api, batchId: string, taskId: string): TaskSessions {
  const batch = useBatch(api, batchId);
  const listed = useResource(
    () => listTaskSessions(api, batchId, taskId),
    [batchId, taskId, batch.results.length],
  );
  const results = batch.results.filter((r) => r.task_id === taskId);
  const lines = listed.data
    ? listed.data.sessions.map((s) => lineOfListed(s, batch.sessions[s.session_id]))
    : results.map((r) => ({ ...lineOfResult(r), timing: r.timing ?? null }));
  return { batch, listed, results, lines };
}
