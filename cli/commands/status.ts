/**
 * `polar status [BATCH_ID] [--json]`: with an id, a batch's progress (per-task counts, errors by
 * kind); without one, the whole fleet (`./fleet.ts`).
 *
 * @module
 */
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";
import { runFleetStatus } from "./fleet";

export type StatusOptions = ConnectionOptions;

/** Prints a batch's per-task counts, or the fleet when no batch id is given. */
export async function runStatus(batchId: string | undefined, opts: StatusOptions): Promise<void> {
  if (batchId === undefined) return runFleetStatus(opts);
  const status = await connect(opts, "read").status(batchId);
  if (opts.json) return printJson(status);
  console.log(
    `batch ${status.batch_id} (${status.queue}): ${status.status}, ${status.completed_sessions}/${status.sessions} sessions done`,
  );
  const errors = Object.entries(status.errors ?? {}).filter(([, n]) => n > 0);
  if (errors.length) console.log(`errors by kind: ${errors.map(([k, n]) => `${k}=${n}`).join(" ")}`);
  if ((status.errors?.configuration ?? 0) > 0)
    console.log(
      "configuration errors are problems in the task (see each result's error.message); retrying will not help",
    );
  console.log(
    table(
      ["task", "samples", "counts"],
      status.tasks.map((t) => [
        t.task_id,
        t.num_samples,
        Object.entries(t.counts)
          .filter(([, n]) => n > 0)
          .map(([s, n]) => `${s}=${n}`)
          .join(" "),
      ]),
    ),
  );
}
