/**
 * The batch list as its view sees it: the newest batches matching the filters (`GET /v1/batches`)
 * with each one's status (`GET /v1/batches/:id`), and the status and counts that `batch` state
 * events bring after that. A batch event of a batch not in the list reads the list again.
 *
 * @module
 */
import { useState } from "preact/hooks";
import type { Api } from "./api";
import type { BatchItem, BatchListQuery, BatchStatus } from "./api-types";
import { type Resource, useResource, useStream } from "./hooks";
import type { LiveState } from "./live";
import { getBatch, listBatches } from "./requests";
import { batchEventOf, eventsPath } from "./streams";

/**
 * A listed batch with its whole status (null when it could not be read) in place of the list's
 * status word.
 */
export type ListedBatch = Omit<BatchItem, "status"> & { status: BatchStatus | null };
/** A batch's status and counts from its latest event. */
export type BatchUpdate = { status: string; counts: Record<string, number | undefined> };

/** What {@link useBatchList} returns. */
export interface BatchListData {
  list: Resource<ListedBatch[]>;
  live: LiveState;
  /** The latest event's status and counts, by batch id. */
  updates: Record<string, BatchUpdate>;
  /** The listed batches that match the filters. */
  rows: ListedBatch[];
}

const FILTERS = ["status", "queue", "harness", "since"] as const;

/** The list's query: the filters the server applies (`since`, given in hours, as ms since the epoch). */
function listQuery(filters: Record<string, string>): BatchListQuery {
  const q: Record<string, string> = {};
  for (const f of FILTERS) {
    const v = filters[f];
    if (!v) continue;
    q[f] = f === "since" ? String(Date.now() - Number(v) * 3_600_000) : v;
  }
  // The server answers 400 for a status it does not know: the value is passed on as given.
  return q as BatchListQuery;
}

async function readList(api: Api, filters: Record<string, string>): Promise<ListedBatch[]> {
  const { batches } = await listBatches(api, listQuery(filters));
  const statuses = await Promise.all(batches.map((b) => getBatch(api, b.batch_id).catch(() => null)));
  return batches.map((b, i) => ({ ...b, status: statuses[i] ?? null }));
}

/**
 * Loads the batches matching `filters` and follows their batch events.
 *
 * @example
 * ```ts
 * const { rows, updates, live } = useBatchList(api, { status: "running" });
 * ```
 */
export function useBatchList(api: Api, filters: Record<string, string>): BatchListData {
  const key = JSON.stringify(filters);
  const list = useResource(() => readList(api, filters), [key]);
  const [updates, setUpdates] = useState<Record<string, BatchUpdate>>({});
  const live = useStream(
    {
      path: eventsPath({ kinds: "batch" }),
      fromHead: true,
      token: api.token,
      onEvent: (e) => {
        const data = batchEventOf(e);
        if (!list.data?.some((b) => b.batch_id === data.batch_id)) list.reload();
        setUpdates((u) => ({ ...u, [data.batch_id]: { status: data.status, counts: data.counts } }));
      },
    },
    [api.token, key],
  );
  // The list from the server, narrowed again here by what each batch's own status says, so a
  // control plane that ignores a filter still shows only matching batches.
  const rows = (list.data ?? []).filter(
    (b) =>
      (!filters.queue || b.queue === filters.queue) &&
      (!filters.status || (updates[b.batch_id]?.status ?? b.status?.status) === filters.status),
  );
  return { list, live, updates, rows };
}
