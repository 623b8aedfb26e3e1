/**
 * Batches: the list, filterable by status, queue, harness and time, with each batch's progress;
 * pick two to compare. New batches and progress arrive from the state-event stream.
 *
 * @module
 */
import type { Api } from "../api";
import { type BatchUpdate, type ListedBatch, useBatchList } from "../batch-list-data";
import { type PickTwo, usePickTwo } from "../hooks";
import { hrefOf } from "../routes";
import { doneOf } from "../stats";
import { Counts, ErrorNote, LiveBadge, PickBox, Progress, Section, TableHead } from "../ui";
import { BatchFilters } from "./batch-filters";

/** One batch of the list: its latest event's status and counts over those it was listed with. */
function BatchListRow({
  batch: b,
  update: u,
  pick,
}: {
  batch: ListedBatch;
  update: BatchUpdate | undefined;
  pick: PickTwo;
}) {
  const counts = u?.counts ?? b.status?.counts ?? {};
  return (
    <tr data-batch={b.batch_id}>
      <td>
        <PickBox id={b.batch_id} picked={pick.picked} toggle={pick.toggle} />
      </td>
      <td>
        <a href={hrefOf({ view: "batch", batchId: b.batch_id })}>{b.batch_id}</a>
      </td>
      <td>{b.queue}</td>
      <td>{new Date(b.created_at).toLocaleString()}</td>
      <td>{u?.status ?? b.status?.status ?? "?"}</td>
      <td>
        <Progress done={doneOf(counts)} total={b.sessions} />
      </td>
      <td>
        <Counts counts={counts} />
      </td>
      <td>
        <Counts counts={b.status?.errors ?? {}} />
      </td>
    </tr>
  );
}

/**
 * The batches view.
 *
 * @example
 * ```tsx
 * <Batches api={api} filters={{ status: "running" }} />
 * ```
 */
export function Batches({ api, filters }: { api: Api; filters: Record<string, string> }) {
  const { list, live, updates, rows } = useBatchList(api, filters);
  const pick = usePickTwo();
  return (
    <div class="view" data-view="batches">
      <h1>
        Batches <LiveBadge state={live} what="batch events" />
      </h1>
      <BatchFilters filters={filters} picked={pick.picked} />
      {list.error ? <ErrorNote error={list.error} what="batches" /> : null}
      <Section title={`${rows.length} batches`}>
        <table>
          <TableHead
            columns={["", "batch", "queue", "created", "status", "progress", "sessions", "errors"]}
          />
          <tbody>
            {rows.map((b) => (
              <BatchListRow key={b.batch_id} batch={b} update={updates[b.batch_id]} pick={pick} />
            ))}
          </tbody>
        </table>
      </Section>
    </div>
  );
}
