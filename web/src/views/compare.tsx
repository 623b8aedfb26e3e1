/**
 * Two batches side by side: status, progress, mean reward, reward histogram and errors of each.
 *
 * @module
 */
import type { Api } from "../api";
import { useBatch } from "../batch-data";
import { hrefOf } from "../routes";
import { doneOf } from "../stats";
import { Counts, ErrorNote, Progress } from "../ui";
import { ResultSummary } from "./result-summary";

function Column({ api, batchId }: { api: Api; batchId: string }) {
  const { status, results } = useBatch(api, batchId);
  const s = status.data;
  return (
    <div class="card" data-compare={batchId}>
      <h2>
        <a href={hrefOf({ view: "batch", batchId })}>{batchId}</a>
      </h2>
      {status.error ? <ErrorNote error={status.error} what="batch" /> : null}
      {s ? (
        <p>
          <Progress done={doneOf(s.counts)} total={s.sessions} /> <Counts counts={s.counts} />
        </p>
      ) : null}
      <ResultSummary title={`batch ${batchId}`} results={results} />
    </div>
  );
}

/**
 * The compare view.
 *
 * @example
 * ```tsx
 * <Compare api={api} a="b1" b="b2" />
 * ```
 */
export function Compare({ api, a, b }: { api: Api; a: string; b: string }) {
  if (!a || !b) return <p class="error">Compare needs two batches: #/compare?a=BATCH&amp;b=BATCH</p>;
  return (
    <div class="view" data-view="compare">
      <h1>Compare</h1>
      <div class="side-by-side">
        <Column api={api} batchId={a} />
        <Column api={api} batchId={b} />
      </div>
    </div>
  );
}
