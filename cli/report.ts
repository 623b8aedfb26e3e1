/**
 * Human-readable summaries of session results (CLI and demo output).
 *
 * @module
 */
import type { SessionResult } from "../protocol";

/** The numbers a person wants to see per session. */
export interface SessionSummary {
  session_id: string;
  task_id: string;
  status: string;
  reward: number | null;
  traces: number;
  prompt_tokens: number;
  response_tokens: number;
  attempt: number;
  node_id: string | null;
  error: string | null;
}

/**
 * Token counts and status of one result.
 *
 * @example
 * ```ts
 * const s = summarize(result); // { status: "COMPLETED", traces: 2, prompt_tokens: 91, ... }
 * ```
 */
export function summarize(result: SessionResult): SessionSummary {
  const traces = result.trajectory.traces;
  return {
    session_id: result.session_id,
    task_id: result.task_id,
    status: result.status,
    reward: result.reward,
    traces: traces.length,
    prompt_tokens: traces.reduce((n, t) => n + t.prompt_ids.length, 0),
    response_tokens: traces.reduce((n, t) => n + t.response_ids.length, 0),
    attempt: result.attempt,
    node_id: result.node_id,
    error: result.error ? `${result.error.kind}: ${result.error.message}` : null,
  };
}

/** Renders rows as an aligned text table. */
export function table(headers: string[], rows: Array<Array<string | number>>): string {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((r) => (r[i] ?? "").length)));
  const line = (r: string[]) =>
    r
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join("  ")
      .trimEnd();
  return [line(cells[0]!), line(widths.map((w) => "-".repeat(w))), ...cells.slice(1).map(line)].join("\n");
}

/** A table of session summaries. */
export function sessionTable(summaries: SessionSummary[]): string {
  return table(
    ["session", "status", "reward", "traces", "prompt_tokens", "response_tokens", "node", "error"],
    summaries.map((s) => [
      s.session_id,
      s.status,
      s.reward === null ? "-" : s.reward.toFixed(2),
      s.traces,
      s.prompt_tokens,
      s.response_tokens,
      s.node_id ?? "-",
      s.error ?? "",
    ]),
  );
}
