/**
 * `polar results BATCH_ID [--follow] [--after SEQ]`: the batch's results as JSON Lines on stdout,
 * one `{seq, result}` per line in sequence order — the stored ones, or with `--follow` every one
 * until the batch is done (long-polling, so each line is printed as its session finishes). Pipe it
 * to a file or `jq`; `--after` resumes after the last `seq` read.
 *
 * @module
 */
import { type ConnectionOptions, connect } from "./connection";

export interface ResultsOptions extends ConnectionOptions {
  follow: boolean;
  after?: number;
}

/** Writes one line of JSON per result; resolves when the stored results (or all, with follow) are out. */
export async function runResults(batchId: string, opts: ResultsOptions): Promise<void> {
  const client = connect(opts, "read");
  const stream = client.streamResults(batchId, {
    follow: opts.follow,
    ...(opts.after === undefined ? {} : { after: opts.after }),
  });
  for await (const r of stream) {
    // Backpressure: a slow reader (a pipe to a busy process) holds the next page back.
    if (!process.stdout.write(`${JSON.stringify(r)}\n`))
      await new Promise((resolve) => process.stdout.once("drain", resolve));
  }
}
