/**
 * A task's sessions: status, node, attempt, reward, error, and the stage timings of each as a
 * stacked timeline. Sessions come from `GET /v1/batches/:id/sessions?task_id=` (all of them,
 * running ones too) where the control plane has it, else from the batch's results (finished
 * ones), and live session states from the event stream.
 *
 * @module
 */
import { type Api, ApiMissing } from "../api";
import { BarChart } from "../chart";
import { hrefOf } from "../routes";
import { stageDatasets } from "../stats";
import { type TaskSessionLine, useTaskSessions } from "../task-data";
import { ErrorNote, LiveBadge, Section } from "../ui";
import { ResultSummary } from "./result-summary";
import { SessionTable } from "./session-table";

/** Why the sessions shown may be only the finished ones, or could not be listed. */
function ListingNote({ error }: { error: Error | undefined }) {
  if (error instanceof ApiMissing)
    return (
      <p class="missing">
        Listing every session (queued and running too) needs GET /v1/batches/:id/sessions, which this control
        plane does not have: showing the finished sessions from the results stream.
      </p>
    );
  return error ? <ErrorNote error={error} what="sessions" /> : null;
}

/** Every timed session's stages as one stacked bar each. */
function StageTimeline({ taskId, lines }: { taskId: string; lines: TaskSessionLine[] }) {
  const timed = lines.filter((r) => r.timing);
  if (!timed.length) return <p class="muted">No session has stage timings yet.</p>;
  return (
    <BarChart
      label={`stage timeline of task ${taskId}`}
      labels={timed.map((r) => r.session_id)}
      datasets={stageDatasets(timed)}
      horizontal
      stacked
      unit="seconds"
      height={60 + 28 * timed.length}
    />
  );
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
  const { batch, listed, results, lines } = useTaskSessions(api, batchId, taskId);
  return (
    <div class="view" data-view="task">
      <h1>
        Task {taskId} <LiveBadge state={batch.resultsLive} what="results stream" />
      </h1>
      <p>
        in batch <a href={hrefOf({ view: "batch", batchId })}>{batchId}</a>
      </p>
      <ListingNote error={listed.error} />
      <Section title={`Sessions (${lines.length})`}>
        <SessionTable lines={lines} />
      </Section>
      <Section title="Stage timeline (seconds)">
        <StageTimeline taskId={taskId} lines={lines} />
      </Section>
      <Section title="Rewards">
        <ResultSummary title={`task ${taskId}`} results={results} />
      </Section>
    </div>
  );
}
