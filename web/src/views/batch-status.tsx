/**
 * A batch's status panel: status, queue, creation time, progress, counts, errors by kind, pass rate
 * and tokens (from the control plane's summary), and the button that cancels a running batch.
 *
 * @module
 */
import type { BatchStatus, BatchSummary } from "../api-types";
import type { Resource } from "../hooks";
import { doneOf } from "../stats";
import { Counts, ErrorNote, Progress, Status } from "../ui";

/** Pass rate and tokens, or why they could not be read. */
function PassRateAndTokens({ summary }: { summary: Resource<BatchSummary> }) {
  const d = summary.data;
  if (d)
    return (
      <p data-batch-summary>
        pass rate {d.pass_rate === null ? "–" : `${Math.round(100 * d.pass_rate)} %`}, tokens{" "}
        {d.tokens.prompt} prompt + {d.tokens.response} response
      </p>
    );
  return summary.error ? <ErrorNote error={summary.error} what="pass rate and tokens" /> : null;
}

/**
 * The status panel of a batch.
 *
 * @example
 * ```tsx
 * <BatchStatusPanel status={s} summary={summary} onCancel={() => cancel(null)} />
 * ```
 */
export function BatchStatusPanel({
  status: s,
  summary,
  onCancel,
}: {
  status: BatchStatus;
  summary: Resource<BatchSummary>;
  onCancel: () => void;
}) {
  return (
    <>
      <p>
        <Status status={s.cancelled_at ? "cancelled" : s.status} /> queue {s.queue}, created{" "}
        {new Date(s.created_at).toLocaleString()}
      </p>
      <p>
        <Progress done={doneOf(s.counts)} total={s.sessions} /> <Counts counts={s.counts} />
      </p>
      <p>
        errors by kind: <Counts counts={s.errors} />
      </p>
      <PassRateAndTokens summary={summary} />
      {s.status === "running" && !s.cancelled_at ? (
        <button type="button" class="danger" onClick={onCancel}>
          Cancel batch
        </button>
      ) : null}
    </>
  );
}
