/**
 * The control plane's `GET /metrics`: Prometheus text (format 0.0.4) built on each scrape from
 * the Durable Objects' own state, one `metrics()` call per dispatcher shard of every known queue
 * (the registry's list, expanded to all shards). Nothing is cached in the Worker: a scrape is as
 * fresh as the shards. Families and labels are listed in docs/control-plane.md.
 *
 * @module
 */
import { Hono } from "hono";
import { z } from "zod";
import { authorize } from "./auth";
import { EXPOSITION_CONTENT_TYPE, Exposition, type Labels, type Sample } from "./metrics-text";
import { type ApiDescription, errors } from "./openapi-registry";
import type { QueueCounters } from "./queue/counter-store";
import type { ShardMetrics } from "./queue/shard-metrics";
import { dispatchersOf } from "./queue/shards";
import { REGISTRY_NAME } from "./registry/registry-do";

/** Counters of the dispatcher exported as `polar_queue_<name>_total`, with their help. */
const DISPATCHER_COUNTERS: Record<keyof QueueCounters, string> = {
  stale_progress: "Progress frames for a lease that is not current (ignored)",
  stale_results: "Results for a lease that was superseded (refused by the ledger)",
  duplicate_results: "Results the ledger had already recorded (acknowledged again)",
  requeued_leases: "Leases handed back to the ledger after their gateway's grace ran out",
  stolen_sessions: "Sessions this shard took from sibling shards for its idle gateways",
  lent_sessions: "Sessions sibling shards took from this shard",
};

function per(shards: ShardMetrics[], value: (m: ShardMetrics) => number): Sample[] {
  return shards.map((m) => ({ labels: { queue: m.queue, shard: m.shard }, value: value(m) }));
}

/**
 * The exposition of `shards` (pure: the route gathers, this writes), family after family in the
 * order docs/control-plane.md lists them.
 *
 * @example
 * ```ts
 * renderControlPlaneMetrics([await env.QUEUE.getByName("default").metrics()]);
 * // # TYPE polar_queue_pending_sessions gauge
 * // polar_queue_pending_sessions{queue="default",shard="default"} 3
 * ```
 */
export function renderControlPlaneMetrics(shards: ShardMetrics[]): string {
  const out = new Exposition();
  writeDepths(out, shards);
  writeGateways(out, shards);
  writeDispatch(out, shards);
  writeFence(out, shards);
  for (const [name, help] of Object.entries(DISPATCHER_COUNTERS) as [keyof QueueCounters, string][])
    out.counter(
      `polar_queue_${name}_total`,
      help,
      per(shards, (m) => m.counters[name]),
    );
  return out.text();
}

/** What each shard holds: sessions pending and leased, batches active. */
function writeDepths(out: Exposition, shards: ShardMetrics[]): void {
  out.gauge(
    "polar_queue_pending_sessions",
    "Sessions waiting for a gateway (queue depth)",
    per(shards, (m) => m.pending),
  );
  out.gauge(
    "polar_queue_leases",
    "Sessions in a gateway's hands (leased)",
    per(shards, (m) => m.leases),
  );
  out.gauge(
    "polar_queue_active_batches",
    "Batches with a session pending or leased on the shard",
    per(shards, (m) => m.active_batches),
  );
}

/** The gateways of each shard: counted by state, and each one's credit and leases. */
function writeGateways(out: Exposition, shards: ShardMetrics[]): void {
  const gatewayStates: Sample[] = [];
  const credit: Sample[] = [];
  const gatewayLeases: Sample[] = [];
  for (const m of shards) {
    const n = { connected: 0, draining: 0, disconnected: 0 };
    for (const g of m.gateways) {
      n[!g.connected ? "disconnected" : g.draining ? "draining" : "connected"]++;
      const labels: Labels = { queue: m.queue, shard: m.shard, node_id: g.node_id };
      if (g.connected) credit.push({ labels, value: g.credit });
      gatewayLeases.push({ labels, value: g.leases });
    }
    for (const [state, value] of Object.entries(n))
      gatewayStates.push({ labels: { queue: m.queue, shard: m.shard, state }, value });
  }
  out.gauge(
    "polar_queue_gateways",
    "Gateways known to the shard by state (connected: taking work; draining: connected, no new work; disconnected: gone, leases in grace or handed back)",
    gatewayStates,
  );
  out.gauge(
    "polar_queue_gateway_credit",
    "Credit (sessions it will take now) of each connected gateway",
    credit,
  );
  out.gauge("polar_queue_gateway_leases", "Leases held by each gateway", gatewayLeases);
}

/** How fast each shard leases what it holds, and what comes back. */
function writeDispatch(out: Exposition, shards: ShardMetrics[]): void {
  out.histogram(
    "polar_queue_dispatch_seconds",
    "Time from a session entering the shard's pending list to its lease (sent to a gateway)",
    shards.map((m) => ({
      labels: { queue: m.queue, shard: m.shard },
      buckets: m.dispatch.buckets,
      sum: m.dispatch.sum_seconds,
      count: m.dispatch.count,
    })),
  );
  out.counter(
    "polar_queue_results_total",
    "Session results the ledger accepted through the shard, by session status",
    shards.flatMap((m) =>
      Object.entries(m.results).map(([status, value]) => ({
        labels: { queue: m.queue, shard: m.shard, status },
        value,
      })),
    ),
  );
}

/** The queue's inference fence as each shard stores it. */
function writeFence(out: Exposition, shards: ShardMetrics[]): void {
  out.gauge(
    "polar_queue_paused",
    "1 while the queue's inference fence is paused (as stored on the shard)",
    per(shards, (m) => (m.fence.paused ? 1 : 0)),
  );
  out.gauge(
    "polar_queue_fence_seq",
    "Sequence number of the queue's last fence change (as stored on the shard)",
    per(shards, (m) => m.fence.fence_seq),
  );
  out.gauge(
    "polar_queue_policy_version_info",
    "Always 1, labelled with the queue's policy version (no sample: none set)",
    shards.flatMap((m) =>
      m.fence.policy_version === null
        ? []
        : [{ labels: { queue: m.queue, shard: m.shard, policy_version: m.fence.policy_version }, value: 1 }],
    ),
  );
}

/**
 * The metrics sub-app (mounted at `/metrics`).
 *
 * @example
 * ```ts
 * app.route("/metrics", metricsRoutes);
 * ```
 */
export const metricsRoutes = new Hono<{ Bindings: Env }>();

metricsRoutes.get("/", async (c) => {
  await authorize("viewer", c.req.header("Authorization"), c.env);
  const recorded = await c.env.REGISTRY.getByName(REGISTRY_NAME).listQueues();
  const dispatchers = dispatchersOf(recorded, c.env.POLAR_QUEUE_SHARDS);
  const shards = await Promise.all(dispatchers.map((q) => c.env.QUEUE.getByName(q).metrics()));
  return c.body(renderControlPlaneMetrics(shards), 200, { "content-type": EXPOSITION_CONTENT_TYPE });
});

/**
 * The OpenAPI entry of `GET /metrics`: Prometheus text, so registered whole rather than through
 * `api.path` (which answers JSON), with the one error it answers before gathering (401).
 *
 * @example
 * ```ts
 * describeMetricsRoutes(apiDescription(doc.openAPIRegistry));
 * ```
 */
export function describeMetricsRoutes(api: ApiDescription): void {
  api.register({
    method: "get",
    path: "/metrics",
    operationId: "getMetrics",
    summary: "Prometheus metrics of every queue's shards: depth, leases, gateways, dispatch latency, results",
    security: [{ bearer: [] }],
    responses: {
      401: errors[401],
      200: {
        description: "Prometheus text exposition format 0.0.4 (families: docs/control-plane.md)",
        content: { "text/plain; version=0.0.4; charset=utf-8": { schema: z.string() } },
      },
    },
  });
}
