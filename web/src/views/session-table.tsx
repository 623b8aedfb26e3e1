/**
 * A table of sessions, each linked to its page: a batch's finished sessions, or all of a task's.
 *
 * @module
 */
import { hrefOf } from "../routes";
import type { SessionLine } from "../session-line";
import { fmtReward } from "../stats";
import { Status, TableHead } from "../ui";

function SessionTableRow({ line: r, withTask }: { line: SessionLine; withTask: boolean }) {
  return (
    <tr data-session={r.session_id} data-status={r.status}>
      <td>
        <a href={hrefOf({ view: "session", sessionId: r.session_id })}>{r.session_id}</a>
      </td>
      {withTask ? <td>{r.task_id}</td> : null}
      <td>
        <Status status={r.status} />
      </td>
      <td>{r.node_id ?? "–"}</td>
      <td>{r.attempt ?? "–"}</td>
      <td>{fmtReward(r.reward)}</td>
      <td>{r.error}</td>
    </tr>
  );
}

/**
 * Sessions with a link to each; `withTask` adds the task column (a batch's sessions).
 *
 * @example
 * ```tsx
 * <SessionTable lines={results.map(lineOfResult)} withTask />
 * ```
 */
export function SessionTable({ lines, withTask = false }: { lines: SessionLine[]; withTask?: boolean }) {
  const columns = ["session", ...(withTask ? ["task"] : []), "status", "node", "attempt", "reward", "error"];
  return (
    <table class="sessions">
      <TableHead columns={columns} />
      <tbody>
        {lines.map((r) => (
          <SessionTableRow key={r.session_id} line={r} withTask={withTask} />
        ))}
      </tbody>
    </table>
  );
}
