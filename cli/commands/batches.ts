/**
 * `polar batches [--limit N] [--before CURSOR] [--json]`: the batches the control plane knows,
 * newest first, one page at a time.
 *
 * @module
 */
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";

export interface BatchesOptions extends ConnectionOptions {
  limit?: number;
  before?: string;
}

/** Prints a page of `GET /v1/batches`; the next page's cursor, when there is one. */
export async function runBatches(opts: BatchesOptions): Promise<void> {
  const page = await connect(opts, "read").listBatches({
    ...(opts.limit === undefined ? {} : { limit: opts.limit }),
    ...(opts.before === undefined ? {} : { before: opts.before }),
  });
  if (opts.json) return printJson(page);
  if (page.batches.length === 0) {
    console.log("no batches");
    return;
  }
  console.log(
    table(
      ["batch", "queue", "tasks", "sessions", "created"],
      page.batches.map((b) => [
        b.batch_id,
        b.queue,
        b.tasks,
        b.sessions,
        new Date(b.created_at).toISOString(),
      ]),
    ),
  );
  if (page.next_before) console.log(`more: polar batches --before ${page.next_before}`);
}
