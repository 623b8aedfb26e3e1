/**
 * `polar status BATCH_ID [--json]`.
 *
 * @module
 */
import { ControlPlaneClient } from "../client";
import { table } from "../report";
import { trainerToken } from "./submit";

export interface StatusOptions {
  url: string;
  json: boolean;
}

/** Prints a batch's per-task counts. */
export async function runStatus(batchId: string, opts: StatusOptions): Promise<void> {
  const status = await new ControlPlaneClient(opts.url, trainerToken()).status(batchId);
  if (opts.json) {
    console.log(JSON.stringify(status));
    return;
  }
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
