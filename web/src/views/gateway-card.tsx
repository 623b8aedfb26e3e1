/**
 * One gateway of the fleet: up or down, draining, paused, policy version, last ping, credit and
 * leases, capacity, engine and model, its sessions per stage as bars, and the button that drains it.
 *
 * @module
 */
import type { Api } from "../api";
import type { FenceNode, GatewayRow } from "../api-types";
import { BarChart } from "../chart";
import type { ConfirmedAction } from "../hooks";
import { drainGateway } from "../requests";
import { ago } from "../stats";

/** Sessions per stage as the gateway reports them in its metrics. */
const STAGE_BARS = [
  { label: "init queued", field: "init_queue_depth", color: "#b0b7c3" },
  { label: "init", field: "init_inflight", color: "#6c8ebf" },
  { label: "ready", field: "ready_depth", color: "#d6b656" },
  { label: "run", field: "run_inflight", color: "#82b366" },
  { label: "post-run queued", field: "postrun_queue_depth", color: "#c3b0d0" },
  { label: "post-run", field: "postrun_inflight", color: "#9673a6" },
];

/** The gateway's sessions per stage, from its last reported metrics. */
function StageBars({ gateway: g }: { gateway: GatewayRow }) {
  if (!g.metrics) return <p class="muted">No metrics reported yet.</p>;
  const metrics = g.metrics;
  return (
    <BarChart
      label={`sessions per stage on ${g.node_id}`}
      labels={STAGE_BARS.map((s) => s.label)}
      datasets={[{ label: "sessions", data: STAGE_BARS.map((s) => metrics[s.field] ?? 0), color: "#6c8ebf" }]}
      horizontal
      height={140}
    />
  );
}

/** The gateway's figures as a definition list. */
function GatewayFacts({ gateway: g, gate }: { gateway: GatewayRow; gate: FenceNode | undefined }) {
  return (
    <dl>
      <dt>queue / shard</dt>
      <dd>
        {g.queue} / {g.shard}
      </dd>
      <dt>policy version</dt>
      <dd>{gate?.policy_version ?? "–"}</dd>
      <dt>last ping</dt>
      <dd>{ago(g.last_seen_at)}</dd>
      <dt>credit / leases</dt>
      <dd>
        {g.credit} / {g.leases}
      </dd>
      <dt>capacity</dt>
      <dd>
        init {g.capacity.max_init}, run {g.capacity.max_run}, post-run {g.capacity.max_postrun}
      </dd>
      <dt>engine / model</dt>
      <dd>{g.engine || g.model ? `${g.engine ?? "?"} / ${g.model ?? "?"}` : "not reported"}</dd>
    </dl>
  );
}

/**
 * A gateway's card; `gate` is its gate in its queue's fence, when the fence was read.
 *
 * @example
 * ```tsx
 * <GatewayCard api={api} gateway={g} gate={gateOf(fleet.fences, g.node_id)} act={act} />
 * ```
 */
export function GatewayCard({
  api,
  gateway: g,
  gate,
  act,
}: {
  api: Api;
  gateway: GatewayRow;
  gate: FenceNode | undefined;
  act: ConfirmedAction["act"];
}) {
  return (
    <div class="card gateway" data-node={g.node_id}>
      <h3>
        {g.node_id}{" "}
        <span class={`status ${g.connected ? "status-completed" : "status-error"}`}>
          {g.connected ? "up" : "down"}
        </span>
        {g.draining ? <span class="status status-paused">draining</span> : null}
        {gate?.paused ? <span class="status status-paused">paused</span> : null}
      </h3>
      <GatewayFacts gateway={g} gate={gate} />
      <StageBars gateway={g} />
      {g.connected && !g.draining ? (
        <button
          type="button"
          onClick={() => act(`Drain ${g.node_id}`, () => drainGateway(api, g.node_id).then(() => "done"))}
        >
          Drain
        </button>
      ) : null}
    </div>
  );
}
