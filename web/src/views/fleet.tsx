/**
 * Fleet: queues and their shards, each gateway (up, draining, paused, policy version, last ping,
 * credit, sessions per stage), the fence of each queue; drain and fence actions. Refreshed when
 * the state-event stream reports a gateway or fence change.
 *
 * @module
 */
import { useRef, useState } from "preact/hooks";
import { type Api, seg } from "../api";
import { BarChart } from "../chart";
import { useResource, useStream } from "../hooks";
import { ago } from "../stats";
import { ErrorNote, LiveBadge, Section } from "../ui";

interface GatewayView {
  node_id: string;
  queue: string;
  shard: string;
  credit: number;
  connected: boolean;
  draining: boolean;
  leases: number;
  capacity: { max_init: number; max_run: number; max_postrun: number };
  metrics: Record<string, number> | null;
  last_seen_at: number | null;
  engine?: string;
  model?: string;
}
interface Gateways {
  gateways: GatewayView[];
  queues: Array<{ queue: string; shard: string; pending: number; leases: number }>;
}
interface FenceStatus {
  queue: string;
  fence: { paused: boolean; mode: string | null; policy_version: string | null; fence_seq: number };
  nodes: Array<{
    node_id: string;
    ok: boolean;
    paused: boolean;
    inflight: number;
    policy_version: string | null;
  }>;
}

/** Sessions per stage as the gateway reports them in its metrics. */
const STAGE_BARS = [
  { label: "init queued", field: "init_queue_depth", color: "#b0b7c3" },
  { label: "init", field: "init_inflight", color: "#6c8ebf" },
  { label: "ready", field: "ready_depth", color: "#d6b656" },
  { label: "run", field: "run_inflight", color: "#82b366" },
  { label: "post-run queued", field: "postrun_queue_depth", color: "#c3b0d0" },
  { label: "post-run", field: "postrun_inflight", color: "#9673a6" },
];

/**
 * The fleet view.
 *
 * @example
 * ```tsx
 * <Fleet api={api} />
 * ```
 */
export function Fleet({ api }: { api: Api }) {
  const fleet = useResource(async () => {
    const g = await api.get<Gateways>("/v1/gateways");
    const queues = [...new Set(g.queues.map((q) => q.queue))];
    const fences = await Promise.all(
      queues.map((q) =>
        api.get<FenceStatus>(`/v1/queues/${seg(q)}/inference`).then(
          (f) => ({ queue: q, fence: f, error: undefined }),
          (e: Error) => ({ queue: q, fence: undefined, error: e }),
        ),
      ),
    );
    return { ...g, fences };
  }, []);
  // Coalesce a burst of events into one reload.
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  const live = useStream(
    {
      path: "/v1/events?kinds=gateway,fence",
      fromHead: true,
      token: api.token,
      onEvent: () => {
        if (pending.current) return;
        pending.current = setTimeout(() => {
          pending.current = null;
          fleet.reload();
        }, 300);
      },
    },
    [api.token],
  );
  const [note, setNote] = useState<string | null>(null);
  const act = async (what: string, run: () => Promise<unknown>) => {
    if (!confirm(`${what}?`)) return;
    try {
      await run();
      setNote(`${what}: done`);
    } catch (e) {
      setNote(`${what}: ${(e as Error).message}`);
    }
    fleet.reload();
  };
  const d = fleet.data;
  return (
    <div class="view" data-view="fleet">
      <h1>
        Fleet <LiveBadge state={live} what="gateway and fence events" />
        {live.kind === "missing" ? (
          <button type="button" onClick={fleet.reload}>
            Refresh
          </button>
        ) : null}
      </h1>
      {note ? <p class="note">{note}</p> : null}
      {fleet.error ? <ErrorNote error={fleet.error} what="gateways" /> : null}
      {d ? (
        <>
          <Section title="Queues">
            <table>
              <thead>
                <tr>
                  <th>queue</th>
                  <th>shard</th>
                  <th>pending</th>
                  <th>leases</th>
                  <th>fence</th>
                  <th>policy version</th>
                  <th />
                </tr>
              </thead>
              <tbody>
                {d.queues.map((q) => {
                  const f = d.fences.find((x) => x.queue === q.queue);
                  const fence = f?.fence?.fence;
                  return (
                    <tr key={q.shard} data-queue={q.queue}>
                      <td>{q.queue}</td>
                      <td>{q.shard}</td>
                      <td>{q.pending}</td>
                      <td>{q.leases}</td>
                      <td>
                        {fence ? (
                          fence.paused ? (
                            <span class="status status-paused">paused ({fence.mode})</span>
                          ) : (
                            <span class="status status-completed">open</span>
                          )
                        ) : f?.error ? (
                          <ErrorNote error={f.error} what="fence" />
                        ) : null}
                      </td>
                      <td>{fence?.policy_version ?? "–"}</td>
                      <td>
                        {fence ? (
                          fence.paused ? (
                            <button
                              type="button"
                              onClick={() =>
                                act(`Resume ${q.queue}`, () =>
                                  api.request(`/v1/queues/${seg(q.queue)}/inference/resume`, {
                                    method: "POST",
                                    body: {},
                                  }),
                                )
                              }
                            >
                              Resume
                            </button>
                          ) : (
                            <button
                              type="button"
                              onClick={() =>
                                act(`Fence ${q.queue} (pause, drain)`, () =>
                                  api.request(`/v1/queues/${seg(q.queue)}/inference/pause`, {
                                    method: "POST",
                                    body: { mode: "drain" },
                                  }),
                                )
                              }
                            >
                              Fence
                            </button>
                          )
                        ) : null}
                      </td>
                    </tr>
                  );
                })}
              </tbody>
            </table>
          </Section>
          <Section title="Gateways">
            {d.gateways.length === 0 ? <p class="muted">No gateway has connected.</p> : null}
            <div class="gateways">
              {d.gateways.map((g) => {
                const node = d.fences
                  .flatMap((f) => f.fence?.nodes ?? [])
                  .find((n) => n.node_id === g.node_id);
                return (
                  <div class="card gateway" key={`${g.shard}/${g.node_id}`} data-node={g.node_id}>
                    <h3>
                      {g.node_id}{" "}
                      <span class={`status ${g.connected ? "status-completed" : "status-error"}`}>
                        {g.connected ? "up" : "down"}
                      </span>
                      {g.draining ? <span class="status status-paused">draining</span> : null}
                      {node?.paused ? <span class="status status-paused">paused</span> : null}
                    </h3>
                    <dl>
                      <dt>queue / shard</dt>
                      <dd>
                        {g.queue} / {g.shard}
                      </dd>
                      <dt>policy version</dt>
                      <dd>{node?.policy_version ?? "–"}</dd>
                      <dt>last ping</dt>
                      <dd>{ago(g.last_seen_at)}</dd>
                      <dt>credit / leases</dt>
                      <dd>
                        {g.credit} / {g.leases}
                      </dd>
                      <dt>capacity</dt>
                      <dd>
                        init {g.capacity.max_init}, run {g.capacity.max_run}, post-run{" "}
                        {g.capacity.max_postrun}
                      </dd>
                      <dt>engine / model</dt>
                      <dd>
                        {g.engine || g.model ? `${g.engine ?? "?"} / ${g.model ?? "?"}` : "not reported"}
                      </dd>
                    </dl>
                    {g.metrics ? (
                      <BarChart
                        label={`sessions per stage on ${g.node_id}`}
                        labels={STAGE_BARS.map((s) => s.label)}
                        datasets={[
                          {
                            label: "sessions",
                            data: STAGE_BARS.map((s) => g.metrics?.[s.field] ?? 0),
                            color: "#6c8ebf",
                          },
                        ]}
                        horizontal
                        height={140}
                      />
                    ) : (
                      <p class="muted">No metrics reported yet.</p>
                    )}
                    {g.connected && !g.draining ? (
                      <button
                        type="button"
                        onClick={() =>
                          act(`Drain ${g.node_id}`, () =>
                            api.request(`/v1/gateways/${seg(g.node_id)}/drain`, { method: "POST" }),
                          )
                        }
                      >
                        Drain
                      </button>
                    ) : null}
                  </div>
                );
              })}
            </div>
          </Section>
        </>
      ) : null}
    </div>
  );
}
