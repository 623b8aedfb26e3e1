import { afterEach, describe, expect, it } from "vitest";
import { renderControlPlaneMetrics } from "./metrics";
import { EXPOSITION_CONTENT_TYPE, Exposition, escapeLabelValue } from "./metrics-text";
import { DISPATCH_BUCKETS_S } from "./queue/counter-store";
import type { ShardMetrics } from "./queue/shard-metrics";
import { call, Gateway, postBatch, resultFor, TOKENS, task, uniqueId } from "./testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

async function scrape(token: string = TOKENS.trainer): Promise<Response> {
  return call("/metrics", { headers: { Authorization: `Bearer ${token}` } });
}

/** The value of the one sample of `name` whose label text contains every `labels` pair. */
function value(text: string, name: string, labels: Record<string, string>): number | undefined {
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{(.*)\} (\S+)$/.exec(line);
    if (m && m[1] === name && want.every((w) => m[2]!.split(",").includes(w))) return Number(m[3]);
  }
  return undefined;
}

describe("GET /metrics", () => {
  it("needs a token: 401 without one, with a wrong one or a gateway token", async () => {
    const missing = await call("/metrics");
    expect(missing.status).toBe(401);
    expect(((await missing.json()) as { error: { code: string } }).error.code).toBe("unauthorized");
    expect((await scrape("not-a-token")).status).toBe(401);
    expect((await scrape(TOKENS.gateway)).status).toBe(401);
  });

  it("answers the read-only viewer token, and the trainer and admin tokens", async () => {
    for (const token of [TOKENS.viewer, TOKENS.trainer, TOKENS.admin]) {
      const res = await scrape(token);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain("# TYPE polar_queue_pending_sessions gauge");
    }
  });

  it("serves queue depth, leases, gateways, dispatch latency and results from the shard's state", async () => {
    const queue = uniqueId("metrics");
    const batchId = uniqueId("b");
    expect(
      (await postBatch({ batch_id: batchId, queue, tasks: [task("t0", { num_samples: 3 })] })).status,
    ).toBe(201);
    const gw = await Gateway.connect(queue);
    open.push(gw);
    gw.hello("node-m", 2);
    await gw.expect("welcome");
    const first = await gw.expect("assign");
    await gw.expect("assign");
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result: resultFor(first.session, "node-m") });
    expect(await gw.expect("ack")).toMatchObject({ status: "accepted" });

    const res = await scrape();
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toBe(EXPOSITION_CONTENT_TYPE);
    const text = await res.text();
    const shard = { queue, shard: queue };
    // Three sessions: two leased (one of them then finished), one waiting for credit.
    expect(value(text, "polar_queue_pending_sessions", shard)).toBe(1);
    expect(value(text, "polar_queue_leases", shard)).toBe(1);
    expect(value(text, "polar_queue_active_batches", shard)).toBe(1);
    expect(value(text, "polar_queue_gateways", { ...shard, state: "connected" })).toBe(1);
    expect(value(text, "polar_queue_gateways", { ...shard, state: "draining" })).toBe(0);
    expect(value(text, "polar_queue_gateway_credit", { ...shard, node_id: "node-m" })).toBe(0);
    expect(value(text, "polar_queue_gateway_leases", { ...shard, node_id: "node-m" })).toBe(1);
    expect(value(text, "polar_queue_results_total", { ...shard, status: "COMPLETED" })).toBe(1);
    // Both leases were measured; a fresh shard leases in well under 5 s.
    expect(value(text, "polar_queue_dispatch_seconds_count", shard)).toBe(2);
    expect(value(text, "polar_queue_dispatch_seconds_bucket", { ...shard, le: "+Inf" })).toBe(2);
    expect(value(text, "polar_queue_dispatch_seconds_bucket", { ...shard, le: "5" })).toBe(2);
    expect(value(text, "polar_queue_paused", shard)).toBe(0);
    // A duplicate of the same result is acknowledged but not counted twice.
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result: resultFor(first.session, "node-m") });
    expect(await gw.expect("ack")).toMatchObject({ status: "duplicate" });
    const again = await (await scrape()).text();
    expect(value(again, "polar_queue_results_total", { ...shard, status: "COMPLETED" })).toBe(1);
    expect(value(again, "polar_queue_duplicate_results_total", shard)).toBe(1);
  });
});

function shardOf(over: Partial<ShardMetrics> = {}): ShardMetrics {
  const count = 3;
  return {
    queue: "q",
    shard: "q#1",
    pending: 0,
    leases: 0,
    active_batches: 0,
    gateways: [],
    fence: { paused: false, policy_version: null, fence_seq: 0 },
    dispatch: {
      buckets: [
        ...DISPATCH_BUCKETS_S.map((le) => ({ le, count: le < 1 ? 1 : count })),
        { le: Infinity, count },
      ],
      sum_seconds: 2.5,
      count,
    },
    results: {},
    counters: {
      stale_progress: 0,
      stale_results: 0,
      duplicate_results: 0,
      requeued_leases: 0,
      stolen_sessions: 0,
      lent_sessions: 0,
    },
    ...over,
  };
}

describe("the API document", () => {
  it("lists GET /metrics as getMetrics, answering Prometheus text", async () => {
    const doc = (await (await call("/openapi.json")).json()) as {
      paths: Record<
        string,
        Record<string, { operationId?: string; responses: Record<string, { content?: object }> }>
      >;
    };
    const op = doc.paths["/metrics"]!.get!;
    expect(op.operationId).toBe("getMetrics");
    expect(Object.keys(op.responses["200"]!.content!)).toEqual([EXPOSITION_CONTENT_TYPE]);
  });
});

describe("renderControlPlaneMetrics", () => {
  it("writes cumulative histogram buckets, +Inf last, with sum and count", () => {
    const text = renderControlPlaneMetrics([shardOf()]);
    expect(text).toContain("# TYPE polar_queue_dispatch_seconds histogram");
    expect(text).toContain('polar_queue_dispatch_seconds_bucket{queue="q",shard="q#1",le="0.5"} 1');
    expect(text).toContain('polar_queue_dispatch_seconds_bucket{queue="q",shard="q#1",le="1"} 3');
    expect(text).toContain('polar_queue_dispatch_seconds_bucket{queue="q",shard="q#1",le="+Inf"} 3');
    expect(text).toContain('polar_queue_dispatch_seconds_sum{queue="q",shard="q#1"} 2.5');
    expect(text).toContain('polar_queue_dispatch_seconds_count{queue="q",shard="q#1"} 3');
  });

  it("labels the policy version (escaped) and counts gateways by state", () => {
    const text = renderControlPlaneMetrics([
      shardOf({
        fence: { paused: true, policy_version: 'v"7\\n', fence_seq: 4 },
        gateways: [
          { node_id: "a", connected: true, draining: false, credit: 2, leases: 1 },
          { node_id: "b", connected: true, draining: true, credit: 0, leases: 3 },
          { node_id: "c", connected: false, draining: false, credit: 5, leases: 0 },
        ],
      }),
    ]);
    expect(text).toContain('polar_queue_paused{queue="q",shard="q#1"} 1');
    expect(text).toContain('polar_queue_fence_seq{queue="q",shard="q#1"} 4');
    expect(text).toContain(
      'polar_queue_policy_version_info{queue="q",shard="q#1",policy_version="v\\"7\\\\n"} 1',
    );
    expect(text).toContain('polar_queue_gateways{queue="q",shard="q#1",state="connected"} 1');
    expect(text).toContain('polar_queue_gateways{queue="q",shard="q#1",state="draining"} 1');
    expect(text).toContain('polar_queue_gateways{queue="q",shard="q#1",state="disconnected"} 1');
    // A gone gateway's credit means nothing: only connected ones have a credit sample.
    expect(text).toContain('polar_queue_gateway_credit{queue="q",shard="q#1",node_id="a"} 2');
    expect(text).not.toContain('polar_queue_gateway_credit{queue="q",shard="q#1",node_id="c"}');
  });

  it("keeps every family's HELP and TYPE when no queue is known yet", () => {
    const text = renderControlPlaneMetrics([]);
    expect(text).toContain("# TYPE polar_queue_pending_sessions gauge");
    expect(text).toContain("# TYPE polar_queue_results_total counter");
    expect(text.split("\n").filter((l) => l && !l.startsWith("#"))).toEqual([]);
    // The same HELP and TYPE lines as with a queue: every family, not only the two above.
    const comments = (t: string) => t.split("\n").filter((l) => l.startsWith("# "));
    const withQueue = comments(renderControlPlaneMetrics([shardOf()]));
    expect(withQueue.length).toBeGreaterThan(2);
    expect(comments(text)).toEqual(withQueue);
  });
});

describe("Exposition", () => {
  it("escapes label values and help as the text format says", () => {
    expect(escapeLabelValue('a"b\\c\nd')).toBe('a\\"b\\\\c\\nd');
    const text = new Exposition()
      .gauge("x_g", "line one\nback\\slash", [{ labels: { l: "v\n" }, value: 1 }])
      .text();
    expect(text).toBe('# HELP x_g line one\\nback\\\\slash\n# TYPE x_g gauge\nx_g{l="v\\n"} 1\n');
  });

  it("refuses a counter without _total, a bad name, a reserved label and a family written twice", () => {
    expect(() => new Exposition().counter("x", "h", [])).toThrow(/_total/);
    expect(() => new Exposition().gauge("1x", "h", [])).toThrow(/invalid metric name/);
    expect(() => new Exposition().gauge("x", "h", [{ labels: { __x: "v" }, value: 1 }])).toThrow(
      /label name/,
    );
    expect(() =>
      new Exposition().histogram("h", "h", [{ labels: { le: "1" }, buckets: [], sum: 0, count: 0 }]),
    ).toThrow(/reserved/);
    expect(() => new Exposition().gauge("x", "h", []).gauge("x", "h", [])).toThrow(/twice/);
  });
});
