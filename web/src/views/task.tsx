/**
 * A task's sessions: status, node, attempt, reward, error, and the stage timings of each as a
 * stacked timeline. Sessions come from `GET /v1/batches/:id/sessions?task_id=` (all of them,
 * running ones too) where the control plane has it, else from the batch's results (finished
 * ones), and live session states from the event stream.
 *
 * @module
 */
import { type Api, ApiMissing, seg } from "../api";
import { useBatch } from "../batch-data";
import { BarChart } from "../chart";
import { useResource } from "../hooks";
import { hrefOf } from "../routes";
import { fmtReward, stageDatasets } from "../stats";
import { ErrorNote, LiveBadge, Section, Status } from "../ui";
import { ResultSummary } from "./batch";

interface SessionRow {
  session_id: string;
  task_id: string;
  status: string;
  stage: string | null;
  node_id: string | null;
  attempt: number;
  reward: number | null;
  error_kind: string | null;
  error_message: string | null;
  stage_timings: { init_ms: number; ready_wait_ms: number; run_ms: number; post_run_ms: number } | null;
}

/**
 * The task view.
 *
 * @example
 * ```tsx
 * <Task api={api} batchId="b1" taskId="t1" />
 * ```
 */
export function Task({ api, batchId, taskId }: { api: Api; batchId: string; taskId: string }) {
  const batch = useBatch(api, batchId);
  const listed = useResource(
    () =>
      api.get<{ sessions: SessionRow[] }>(
        `/v1/batches/${seg(batchId)}/sessions?task_id=${seg(taskId)}&limit=500`,
      ),
    // Read again as results arrive, so statuses and timings stay current.
    [batchId, taskId, batch.results.length],
  );
  const results = batch.results.filter((r) => r.task_id === taskId);
  const fromApi = listed.data?.sessions;
  const rows: Array<{
    session_id: string;
    status: string;
    node_id: string | null;
    attempt: number | null;
    reward: number | null;
    error: string;
    timing: Record<string, number> | null;
  }> = fromApi
    ? fromApi.map((s) => ({
        session_id: s.session_id,
        status: batch.sessions[s.session_id]?.status ?? s.status,
        node_id: s.node_id,
        attempt: s.attempt,
        reward: s.reward,
        error: s.error_kind ? `${s.error_kind}: ${s.error_message ?? ""}` : "",
        timing: s.stage_timings
          ? {
              init_ms: s.stage_timings.init_ms,
              ready_ms: s.stage_timings.ready_wait_ms,
              run_ms: s.stage_timings.run_ms,
              postrun_ms: s.stage_timings.post_run_ms,
            }
          : null,
      }))
    : results.map((r) => ({
        session_id: r.session_id,
        status: r.status,
        node_id: r.node_id,
        attempt: r.attempt,
        reward: r.reward,
        error: r.error ? `${r.error.kind}: ${r.error.message}` : "",
        timing: (r.timing as Record<string, number> | undefined) ?? null,
      }));
  const timed = rows.filter((r) => r.timing);
  return (
    <div class="view" data-view="task">
      <h1>
        Task {taskId} <LiveBadge state={batch.resultsLive} what="results stream" />
      </h1>
      <p>
        in batch <a href={hrefOf({ view: "batch", batchId })}>{batchId}</a>
      </p>
      {listed.error instanceof ApiMissing ? (
        <p class="missing">
          Listing every session (queued and running too) needs GET /v1/batches/:id/sessions, which this
          control plane does not have: showing the finished sessions from the results stream.
        </p>
      ) : listed.error ? (
        <ErrorNote error={listed.error} what="sessions" />
      ) : null}
      <Section title={`Sessions (${rows.length})`}>
        <table class="sessions">
          <thead>
            <tr>
              <th>session</th>
              <th>status</th>
              <th>node</th>
              <th>attempt</th>
              <th>reward</th>
              <th>error</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.session_id} data-session={r.session_id} data-status={r.status}>
                <td>
                  <a href={hrefOf({ view: "session", sessionId: r.session_id })}>{r.session_id}</a>
                </td>
                <td>
                  <Status status={r.status} />
                </td>
                <td>{r.node_id ?? "–"}</td>
                <td>{r.attempt ?? "–"}</td>
                <td>{fmtReward(r.reward)}</td>
                <td>{r.error}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </Section>
      <Section title="Stage timeline (seconds)">
        {timed.length ? (
          <BarChart
            label={`stage timeline of task ${taskId}`}
            labels={timed.map((r) => r.session_id)}
            datasets={stageDatasets(timed)}
            horizontal
            stacked
            unit="seconds"
            height={60 + 28 * timed.length}
          />
        ) : (
          <p class="muted">No session has stage timings yet.</p>
        )}
      </Section>
      <Section title="Rewards">
        <ResultSummary title={`task ${taskId}`} results={results} />
      </Section>
    </div>
  );
}
