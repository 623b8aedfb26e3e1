/**
 * `polar status [BATCH_ID] [--json]`: with an id, a batch's progress — sessions done, mean reward,
 * pass rate, tokens, errors by kind, and the same per task (the batch status and its summary);
 * without one, the whole fleet (`./fleet.ts`).
 *
 * @module
 */
import type { BatchStatusBody } from "../../protocol";
import type { BatchSummary } from "../client";
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";
import { runFleetStatus } from "./fleet";

export type StatusOptions = ConnectionOptions;

const share = (x: number | null) => (x === null ? "-" : x.toFixed(2));
const counts = (c: Record<string, number>) =>
  Object.entries(c)
    .filter(([, n]) => n > 0)
    .map(([s, n]) => `${s}=${n}`)
    .join(" ");

/**
 * A batch's status and summary as text.
 *
 * @example
 * ```ts
 * console.log(batchText(await cp.status(id), await cp.summary(id)));
 * ```
 */
export function batchText(status: BatchStatusBody, summary: BatchSummary): string {
  const out = [
    `batch ${status.batch_id} (${status.queue}): ${summary.status}, ${status.completed_sessions}/${status.sessions} sessions done`,
    `mean reward ${share(summary.mean_reward)}, pass rate ${share(summary.pass_rate)}, tokens ${summary.tokens.prompt} prompt / ${summary.tokens.response} response`,
  ];
  const errors = Object.entries(summary.errors_by_kind).filter(([, n]) => n > 0);
  if (errors.length) out.push(`errors by kind: ${errors.map(([k, n]) => `${k}=${n}`).join(" ")}`);
  if ((summary.errors_by_kind.configuration ?? 0) > 0)
    out.push(
      "configuration errors are problems in the task (see each result's error.message); retrying will not help",
    );
  out.push(
    table(
      ["task", "harness", "samples", "mean reward", "pass rate", "counts"],
      summary.tasks.map((t) => [
        t.task_id,
        t.harness,
        t.total,
        share(t.mean_reward),
        share(t.pass_rate),
        counts(t.counts_by_status),
      ]),
    ),
  );
  return out.join("\n");
}

/** Prints a batch's progress, or the fleet when no batch id is given. */
export async function runStatus(batchId: string | undefined, opts: StatusOptions): Promise<void> {
  if (batchId === undefined) return runFleetStatus(opts);
  const client = connect(opts, "read");
  const [status, summary] = await Promise.all([client.status(batchId), client.summary(batchId)]);
  if (opts.json) return printJson({ ...status, summary });
  console.log(batchText(status, summary));
}
