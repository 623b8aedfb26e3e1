/**
 * `polar submit FILE [--wait] [--json]`.
 *
 * @module
 */
import type { SessionResult } from "../../protocol";
import { ControlPlaneClient } from "../client";
import { sessionTable, summarize } from "../report";
import { loadTaskFile } from "../task-file";
import { UsageError } from "../usage-error";

export interface SubmitOptions {
  url: string;
  batchId?: string;
  queue?: string;
  wait: boolean;
  json: boolean;
}

/** Trainer token from the environment, or a usage error saying what to set. */
export function trainerToken(): string {
  const token = process.env.POLAR_TRAINER_TOKEN;
  if (!token) throw new UsageError("POLAR_TRAINER_TOKEN is not set (the trainer's bearer token)");
  return token;
}

/** Submits the file; with `--wait`, prints every session's result as it arrives. */
export async function runSubmit(file: string, opts: SubmitOptions): Promise<void> {
  const batch = loadTaskFile(file, { batchId: opts.batchId, queue: opts.queue });
  const client = new ControlPlaneClient(opts.url, trainerToken());
  const created = await client.submit(batch);
  if (!opts.wait) {
    console.log(
      opts.json ? JSON.stringify(created) : `batch ${created.batch_id}: ${created.sessions} sessions queued`,
    );
    return;
  }
  if (!opts.json) console.log(`batch ${created.batch_id}: ${created.sessions} sessions queued; waiting…`);
  const results: SessionResult[] = [];
  for await (const { result } of client.streamResults(created.batch_id)) results.push(result);
  if (opts.json) console.log(JSON.stringify({ ...created, results }));
  else console.log(sessionTable(results.map(summarize)));
}
