/**
 * Reward histogram, mean reward and errors of a set of results (a task, or a whole batch).
 *
 * @module
 */
import { BarChart } from "../chart";
import { errorsByKind, fmtReward, meanReward, type ResultLike, rewardHistogram } from "../stats";
import { Counts } from "../ui";

/**
 * The summary of `results` under `title`.
 *
 * @example
 * ```tsx
 * <ResultSummary title="task t1" results={results} />
 * ```
 */
export function ResultSummary({ title, results }: { title: string; results: ResultLike[] }) {
  const rewards = results.map((r) => r.reward);
  const hist = rewardHistogram(rewards);
  const mean = meanReward(rewards);
  return (
    <div class="summary" data-summary={title}>
      <h3>{title}</h3>
      <p>
        results <b data-results>{results.length}</b>, mean reward <b data-mean-reward>{fmtReward(mean)}</b>
      </p>
      <p>
        errors: <Counts counts={errorsByKind(results)} />
      </p>
      <BarChart
        label={`reward histogram of ${title}`}
        labels={hist.map((b) => `${b.lo.toFixed(1)}–${b.hi.toFixed(1)}`)}
        datasets={[{ label: "sessions", data: hist.map((b) => b.count), color: "#82b366" }]}
        unit="sessions"
        height={140}
      />
    </div>
  );
}
