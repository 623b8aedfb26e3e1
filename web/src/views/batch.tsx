/**
 * A batch: status, progress, counts and errors by kind; per task its progress, mean reward and
 * reward histogram; its finished sessions as they arrive; cancel the batch or a task; compare
 * two of its tasks side by side.
 *
 * @module
 */
import { useState } from "preact/hooks";
import { type Api, seg } from "../api";
import { type StreamedResult, useBatch } from "../batch-data";
import { BarChart } from "../chart";
import { useResource } from "../hooks";
import { hrefOf } from "../routes";
import { errorsByKind, fmtReward, meanReward, rewardHistogram } from "../stats";
import { Counts, ErrorNote, LiveBadge, Progress, Section, Status } from "../ui";
import type { BatchStatus } from "./batches";

const TERMINAL = ["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"];

/**
 * Reward histogram, mean reward and errors of a set of results (a task, or a whole batch).
 *
 * @example
 * ```tsx
 * <ResultSummary title="task t1" results={results} />
 * ```
 */
export function ResultSummary({ title, results }: { title: string; results: StreamedResult[] }) {
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

/** Done sessions of a task or batch from its counts. */
export function doneOf(counts: Record<string, number>): number {
  return TERMINAL.reduce((n, s) => n + (counts[s] ?? 0), 0);
}

/**
 * The batch view.
 *
 * @example
 * ```tsx
 * <Batch api={api} batchId="b1" />
 * ```
 */
export function Batch({ api, batchId }: { api: Api; batchId: string }) {
  const { status, results, resultsLive, eventsLive } = useBatch(api, batchId);
  const [note, setNote] = useState<string | null>(null);
  const [compare, setCompare] = useState<string[]>([]);
  const cancel = async (taskId: string | null) => {
    const what = taskId ? `Cancel task ${taskId}` : `Cancel batch ${batchId}`;
    if (!confirm(`${what}?`)) return;
    const path = taskId ? `/v1/batches/${seg(batchId)}/tasks/${seg(taskId)}` : `/v1/batches/${seg(batchId)}`;
    try {
      const r = await api.request<{ cancelled_sessions: number }>(path, { method: "DELETE" });
      setNote(`${what}: ${r.cancelled_sessions} sessions cancelled`);
    } catch (e) {
      setNote(`${what}: ${(e as Error).message}`);
    }
    status.reload();
  };
  // Pass rate and tokens come from the control plane's aggregate, read again as results arrive.
  const summary = useResource(
    () =>
      api.get<{ pass_rate: number | null; tokens: { prompt: number; response: number } }>(
        `/v1/batches/${seg(batchId)}/summary`,
      ),
    [batchId, results.length],
  );
  const s: BatchStatus | undefined = status.data;
  const byTask = (taskId: string) => results.filter((r) => r.task_id === taskId);
  return (
    <div class="view" data-view="batch">
      <h1>
        Batch {batchId} <LiveBadge state={resultsLive} what="results stream" />{" "}
        <LiveBadge state={eventsLive} what="session events" />
      </h1>
      {note ? (
        <p class="note" data-note>
          {note}
        </p>
      ) : null}
      {status.error ? <ErrorNote error={status.error} what="batch" /> : null}
      {s ? (
        <>
          <Section title="Status">
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
            {summary.data ? (
              <p data-batch-summary>
                pass rate{" "}
                {summary.data.pass_rate === null ? "–" : `${Math.round(100 * summary.data.pass_rate)} %`},
                tokens {summary.data.tokens.prompt} prompt + {summary.data.tokens.response} response
              </p>
            ) : summary.error ? (
              <ErrorNote error={summary.error} what="pass rate and tokens" />
            ) : null}
            {s.status === "running" && !s.cancelled_at ? (
              <button type="button" class="danger" onClick={() => cancel(null)}>
                Cancel batch
              </button>
            ) : null}
          </Section>
          <Section title="Tasks">
            <table>
              <thead>
                <tr>
                  <th />
                  <th>task</th>
                  <th>progress</th>
                  <th>sessions</th>
                  <th>mean reward</th>
                  <th>errors</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {s.tasks.map((t) => (
                  <tr key={t.task_id} data-task={t.task_id}>
                    <td>
                      <input
                        type="checkbox"
                        aria-label={`compare ${t.task_id}`}
                        checked={compare.includes(t.task_id)}
                        onChange={(e) =>
                          setCompare((p) =>
                            e.currentTarget.checked
                              ? [...p, t.task_id].slice(-2)
                              : p.filter((x) => x !== t.task_id),
                          )
                        }
                      />
                    </td>
                    <td>
                      <a href={hrefOf({ view: "task", batchId, taskId: t.task_id })}>{t.task_id}</a>
                    </td>
                    <td>
                      <Progress done={doneOf(t.counts)} total={t.num_samples} />
                    </td>
                    <td>
                      <Counts counts={t.counts} />
                    </td>
                    <td>{fmtReward(meanReward(byTask(t.task_id).map((r) => r.reward)))}</td>
                    <td>
                      <Counts counts={errorsByKind(byTask(t.task_id))} />
                    </td>
                    <td>
                      {!t.done && !s.cancelled_at ? (
                        <button type="button" onClick={() => cancel(t.task_id)}>
                          Cancel task
                        </button>
                      ) : null}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
            <div class={compare.length === 2 ? "side-by-side" : "grid"}>
              {(compare.length === 2 ? compare : s.tasks.map((t) => t.task_id)).map((id) => (
                <ResultSummary key={id} title={`task ${id}`} results={byTask(id)} />
              ))}
            </div>
          </Section>
          <Section title={`Finished sessions (${results.length})`}>
            <SessionRows results={results} />
          </Section>
        </>
      ) : null}
    </div>
  );
}

/**
 * Rows of finished sessions with a link to each.
 *
 * @example
 * ```tsx
 * <SessionRows results={results} />
 * ```
 */
export function SessionRows({ results }: { results: StreamedResult[] }) {
  return (
    <table class="sessions">
      <thead>
        <tr>
          <th>session</th>
          <th>task</th>
          <th>status</th>
          <th>node</th>
          <th>attempt</th>
          <th>reward</th>
          <th>error</th>
        </tr>
      </thead>
      <tbody>
        {results.map((r) => (
          <tr key={r.session_id} data-session={r.session_id} data-status={r.status}>
            <td>
              <a href={hrefOf({ view: "session", sessionId: r.session_id })}>{r.session_id}</a>
            </td>
            <td>{r.task_id}</td>
            <td>
              <Status status={r.status} />
            </td>
            <td>{r.node_id ?? "–"}</td>
            <td>{r.attempt}</td>
            <td>{fmtReward(r.reward)}</td>
            <td>{r.error ? `${r.error.kind}: ${r.error.message}` : ""}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
