/**
 * `polar submit FILE [--wait] [--json]`: submits a task file; with `--wait`, follows the batch to
 * its end with a progress bar (plain lines when stdout is not a terminal) and prints the results.
 *
 * @module
 */
import type { SessionResult } from "../../protocol";
import { SubmitProgress } from "../progress";
import { sessionTable, summarize } from "../report";
import { loadTaskFile } from "../task-file";
import { type ConnectionOptions, connect, tokenFor } from "./connection";

export interface SubmitOptions extends ConnectionOptions {
  batchId?: string;
  queue?: string;
  wait: boolean;
}

/** Trainer token from the environment (`POLAR_TRAINER_TOKEN`, else the admin's), or a usage error. */
export function trainerToken(): string {
  return tokenFor("trainer");
}

/** Submits the file; with `--wait`, shows progress and then every session's result. */
export async function runSubmit(file: string, opts: SubmitOptions): Promise<void> {
  const batch = loadTaskFile(file, { batchId: opts.batchId, queue: opts.queue });
  const client = connect(opts, "trainer");
  const created = await client.submit(batch);
  if (!opts.wait) {
    console.log(
      opts.json ? JSON.stringify(created) : `batch ${created.batch_id}: ${created.sessions} sessions queued`,
    );
    return;
  }
  if (!opts.json) console.log(`batch ${created.batch_id}: ${created.sessions} sessions queued; waiting…`);
  // With --json stdout carries one JSON document only: no progress there.
  const progress = opts.json ? null : new SubmitProgress(created.sessions);
  const results: SessionResult[] = [];
  try {
    for await (const { result } of client.streamResults(created.batch_id)) {
      results.push(result);
      progress?.add(result);
    }
  } finally {
    progress?.stop();
  }
  if (opts.json) console.log(JSON.stringify({ ...created, results }));
  else console.log(sessionTable(results.map(summarize)));
}
