/**
 * `polar cancel BATCH_ID [--task TASK_ID] [--json]`: cancels a batch, or one task of it. Idempotent:
 * cancelling again reports 0 sessions; a cancelled batch id cannot be submitted again.
 *
 * @module
 */
import { type ConnectionOptions, connect, printJson } from "./connection";

export interface CancelOptions extends ConnectionOptions {
  task?: string;
}

/** Cancels and prints how many sessions were ended. */
export async function runCancel(batchId: string, opts: CancelOptions): Promise<void> {
  const answer = await connect(opts, "trainer").cancel(batchId, opts.task);
  if (opts.json) return printJson(answer);
  const what = opts.task === undefined ? `batch ${batchId}` : `task ${opts.task} of batch ${batchId}`;
  console.log(`${what}: cancelled, ${answer.cancelled_sessions} sessions ended`);
}
