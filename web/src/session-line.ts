/**
 * A session as the session tables show it, whichever source it comes from: a result (the batch's
 * results stream) or a row of the session listing.
 *
 * @module
 */
import type { ResultLike } from "./stats";

/** A session as a row of the table, from a result or from the session listing. */
export interface SessionLine {
  session_id: string;
  task_id: string;
  status: string;
  node_id: string | null;
  attempt: number | null;
  reward: number | null;
  /** `kind: message`, empty without an error. */
  error: string;
}

/**
 * A session's row from its result.
 *
 * @example
 * ```ts
 * lineOfResult(result).error; // "agent: exit 1"
 * ```
 */
export function lineOfResult(r: ResultLike): SessionLine {
  return {
    session_id: r.session_id,
    task_id: r.task_id,
    status: r.status,
    node_id: r.node_id,
    attempt: r.attempt,
    reward: r.reward,
    error: r.error ? `${r.error.kind}: ${r.error.message}` : "",
  };
}
