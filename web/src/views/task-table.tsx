/**
 * A batch's tasks: each one's progress, counts, mean reward and errors from the results so far,
 * the checkbox that picks it for the side-by-side summaries, and the button that cancels it.
 *
 * @module
 */
import type { BatchTask, SessionResult } from "../api-types";
import type { PickTwo } from "../hooks";
import { hrefOf } from "../routes";
import { doneOf, errorsByKind, fmtReward, meanReward } from "../stats";
import { Counts, PickBox, Progress, TableHead } from "../ui";

/** Props of {@link TaskTable}. */
export interface TaskTableProps {
  batchId: string;
  tasks: BatchTask[];
  /** The batch's results so far, of every task. */
  results: SessionResult[];
  /** A cancelled batch's tasks have no cancel button. */
  cancelled: boolean;
  pick: PickTwo;
  onCancel: (taskId: string) => void;
}

function TaskRow({ task: t, props: p }: { task: BatchTask; props: TaskTableProps }) {
  const results = p.results.filter((r) => r.task_id === t.task_id);
  return (
    <tr data-task={t.task_id}>
      <td>
        <PickBox id={t.task_id} picked={p.pick.picked} toggle={p.pick.toggle} />
      </td>
      <td>
        <a href={hrefOf({ view: "task", batchId: p.batchId, taskId: t.task_id })}>{t.task_id}</a>
      </td>
      <td>
        <Progress done={doneOf(t.counts)} total={t.num_samples} />
      </td>
      <td>
        <Counts counts={t.counts} />
      </td>
      <td>{fmtReward(meanReward(results.map((r) => r.reward)))}</td>
      <td>
        <Counts counts={errorsByKind(results)} />
      </td>
      <td>
        {!t.done && !p.cancelled ? (
          <button type="button" onClick={() => p.onCancel(t.task_id)}>
            Cancel task
          </button>
        ) : null}
      </td>
    </tr>
  );
}

/**
 * The tasks table of a batch.
 *
 * @example
 * ```tsx
 * <TaskTable batchId="b1" tasks={s.tasks} results={results} cancelled={false} pick={pick} onCancel={cancel} />
 * ```
 */
export function TaskTable(props: TaskTableProps) {
  return (
    <table>
      <TableHead columns={["", "task", "progress", "sessions", "mean reward", "errors", ""]} />
      <tbody>
        {props.tasks.map((t) => (
          <TaskRow key={t.task_id} task={t} props={props} />
        ))}
      </tbody>
    </table>
  );
}
