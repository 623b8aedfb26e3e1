/**
 * Batches: the list, filterable by status, queue, harness and time, with each batch's progress;
 * pick two to compare. New batches and progress arrive from the state-event stream.
 *
 * @module
 */
import { useState } from "preact/hooks";
import { type Api, seg } from "../api";
import { useResource, useStream } from "../hooks";
import { hrefOf } from "../routes";
import { Counts, ErrorNote, LiveBadge, Progress, Section } from "../ui";

interface BatchItem {
  batch_id: string;
  queue: string;
  tasks: number;
  sessions: number;
  created_at: number;
}
/** The parts of `GET /v1/batches/:id` the list shows. */
export interface BatchStatus {
  batch_id: string;
  queue: string;
  status: string;
  sessions: number;
  completed_sessions: number;
  counts: Record<string, number>;
  errors: Record<string, number>;
  created_at: number;
  cancelled_at?: number | null;
  tasks: Array<{ task_id: string; num_samples: number; counts: Record<string, number>; done: boolean }>;
}

const FILTERS = ["status", "queue", "harness", "since"] as const;

/** The list's query string: the filters the server applies (`since` as ms since the epoch). */
function listQuery(filters: Record<string, string>): string {
  const q = new URLSearchParams({ limit: "50" });
  for (const f of FILTERS) {
    const v = filters[f];
    if (!v) continue;
    q.set(f, f === "since" ? String(Date.now() - Number(v) * 3_600_000) : v);
  }
  return q.toString();
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
  const key = JSON.stringify(filters);
  const list = useResource(async () => {
    const { batches } = await api.get<{ batches: BatchItem[] }>(`/v1/batches?${listQuery(filters)}`);
    const statuses = await Promise.all(
      batches.map((b) => api.get<BatchStatus>(`/v1/batches/${seg(b.batch_id)}`).catch(() => null)),
    );
    return batches.map((b, i) => ({ ...b, status: statuses[i] ?? null }));
  }, [key]);
  const [updates, setUpdates] = useState<Record<string, { status: string; counts: Record<string, number> }>>(
    {},
  );
  const live = useStream(
    {
      path: "/v1/events?kinds=batch",
      fromHead: true,
      token: api.token,
      onEvent: (e) => {
        const data = JSON.parse(e.data) as {
          batch_id: string;
          status: string;
          counts: Record<string, number>;
        };
        if (!list.data?.some((b) => b.batch_id === data.batch_id)) list.reload();
        setUpdates((u) => ({ ...u, [data.batch_id]: { status: data.status, counts: data.counts } }));
      },
    },
    [api.token, key],
  );
  const [picked, setPicked] = useState<string[]>([]);
  const setFilter = (name: string, value: string) => {
    const next = { ...filters, [name]: value };
    if (!value) delete next[name];
    location.hash = hrefOf({ view: "batches", filters: next });
  };
  // The list from the server, narrowed again here by what each batch's own status says, so a
  // control plane that ignores a filter still shows only matching batches.
  const rows = (list.data ?? []).filter(
    (b) =>
      (!filters.queue || b.queue === filters.queue) &&
      (!filters.status || (updates[b.batch_id]?.status ?? b.status?.status) === filters.status),
  );
  return (
    <div class="view" data-view="batches">
      <h1>
        Batches <LiveBadge state={live} what="batch events" />
      </h1>
      <form class="filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          status{" "}
          <select value={filters.status ?? ""} onChange={(e) => setFilter("status", e.currentTarget.value)}>
            <option value="">any</option>
            <option value="running">running</option>
            <option value="completed">completed</option>
          </select>
        </label>
        <label>
          queue{" "}
          <input value={filters.queue ?? ""} onChange={(e) => setFilter("queue", e.currentTarget.value)} />
        </label>
        <label>
          harness{" "}
          <input
            value={filters.harness ?? ""}
            onChange={(e) => setFilter("harness", e.currentTarget.value)}
          />
        </label>
        <label>
          last{" "}
          <select value={filters.since ?? ""} onChange={(e) => setFilter("since", e.currentTarget.value)}>
            <option value="">any time</option>
            <option value="1">1 h</option>
            <option value="24">24 h</option>
            <option value="168">7 days</option>
          </select>
        </label>
        {picked.length === 2 ? (
          <a class="button" href={hrefOf({ view: "compare", a: picked[0]!, b: picked[1]! })}>
            Compare the two
          </a>
        ) : (
          <span class="muted">tick two batches to compare them</span>
        )}
      </form>
      {list.error ? <ErrorNote error={list.error} what="batches" /> : null}
      <Section title={`${rows.length} batches`}>
        <table>
          <thead>
            <tr>
              <th />
              <th>batch</th>
              <th>queue</th>
              <th>created</th>
              <th>status</th>
              <th>progress</th>
              <th>sessions</th>
              <th>errors</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((b) => {
              const u = updates[b.batch_id];
              const counts = u?.counts ?? b.status?.counts ?? {};
              const done = ["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"].reduce(
                (n, s) => n + (counts[s] ?? 0),
                0,
              );
              return (
                <tr key={b.batch_id} data-batch={b.batch_id}>
                  <td>
                    <input
                      type="checkbox"
                      aria-label={`compare ${b.batch_id}`}
                      checked={picked.includes(b.batch_id)}
                      onChange={(e) =>
                        setPicked((p) =>
                          e.currentTarget.checked
                            ? [...p, b.batch_id].slice(-2)
                            : p.filter((x) => x !== b.batch_id),
                        )
                      }
                    />
                  </td>
                  <td>
                    <a href={hrefOf({ view: "batch", batchId: b.batch_id })}>{b.batch_id}</a>
                  </td>
                  <td>{b.queue}</td>
                  <td>{new Date(b.created_at).toLocaleString()}</td>
                  <td>{u?.status ?? b.status?.status ?? "?"}</td>
                  <td>
                    <Progress done={done} total={b.sessions} />
                  </td>
                  <td>
                    <Counts counts={counts} />
                  </td>
                  <td>
                    <Counts counts={b.status?.errors ?? {}} />
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </Section>
    </div>
  );
}
