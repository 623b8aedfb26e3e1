/**
 * Upstream's weight-update fence discovery (`GET /nodes`, `POST <gateway_url>/admin/inference/*`)
 * against the Worker in workerd, with gateways as real WebSockets: the rows' shape and URLs, the
 * durable fence behind each URL, upstream's answers (a drain timeout is `timed_out`, not an HTTP
 * error), fail-closed answers for gateways that cannot confirm, and the credential's queue scope.
 */
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { AdminMessage } from "../../protocol";
import { tokenHash } from "../auth";
import { call, Gateway, GatewayPool, POLL, postBatch, TOKENS, task, uniqueId } from "../testing/fixtures";
import { GatewayNodeInfo, GenerationStatus } from "./nodes";

const ORIGIN = "http://control-plane.test";
const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

/** A registered path credential scoped to `queue`; returns its base path `/u/<credential>`. */
async function baseFor(queue: string): Promise<string> {
  const name = uniqueId("fence-run");
  const token = `pt_${name}.${crypto.randomUUID().replaceAll("-", "")}`;
  const res = await call("/v1/admin/path_tokens", {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json" },
    body: JSON.stringify({ name, sha256: await tokenHash(token), queue }),
  });
  expect(res.status).toBe(201);
  return `/u/${token}`;
}

/** Answers an admin message as a gateway would after its drain (or its timeout). */
function ack(
  gw: Gateway,
  msg: AdminMessage,
  state: { ok?: boolean; paused: boolean; inflight?: number; error?: string },
) {
  gw.send({
    v: 2,
    type: "admin_ack",
    request_id: msg.request_id,
    ok: state.ok ?? true,
    paused: state.paused,
    inflight: state.inflight ?? 0,
    policy_version: null,
    fence_seq: msg.fence?.fence_seq ?? 0,
    ...(state.error ? { error: state.error } : {}),
  });
}

/** Acks every admin message `gw` gets until `done` settles; returns how many there were. */
async function ackAll(gw: Gateway, paused: boolean, done: Promise<unknown>): Promise<number> {
  let settled = false;
  void done.finally(() => {
    settled = true;
  });
  let n = 0;
  while (!settled) {
    const msg = await gw.next(300).catch(() => null);
    if (msg?.type === "admin") {
      ack(gw, msg, { paused });
      n++;
    }
  }
  return n;
}

const nodesOf = async (path: string) => {
  const res = await call(path);
  expect(res.status, await res.clone().text()).toBe(200);
  return z.array(GatewayNodeInfo).parse(await res.json());
};

const fencePost = (path: string) =>
  call(path, { method: "POST", headers: { "Content-Type": "application/json" } });

describe("GET /nodes: the fleet in upstream's GatewayNodeInfo, gateway_url a fence URL", () => {
  it("lists the credential's queue only, each row on the credential's base; /rollout/status and /health agree", async () => {
    const queue = uniqueId("nodes");
    const base = await baseFor(queue);
    await gateways.join(queue, "gpu-b", { wire: 2 });
    await gateways.join(queue, "gpu-a", { wire: 2 });
    await gateways.join(uniqueId("other"), "gpu-elsewhere", { wire: 2 });
    const rows = await nodesOf(`${base}/nodes`);
    expect(rows.map((r) => r.node_id)).toEqual(["gpu-a", "gpu-b"]);
    expect(rows[0]).toMatchObject({
      gateway_url: `${ORIGIN}${base}/queues/${queue}/gateways/gpu-a`,
      max_init_workers: 4,
      max_run_workers: 4,
      max_postrun_workers: 4,
      metrics: { init_queue_depth: 0, run_inflight: 0 },
      dispatch_reservations: 0,
      healthy: true,
      draining: false,
      heartbeat_interval_seconds: 15,
    });
    expect(Number.isNaN(Date.parse(rows[0]!.last_heartbeat))).toBe(false);
    const status = (await (await call(`${base}/rollout/status`)).json()) as { nodes: { nodes: unknown[] } };
    expect(z.array(GatewayNodeInfo).parse(status.nodes.nodes)).toEqual(rows);
    expect(await (await call(`${base}/health`)).json()).toEqual({ status: "ok", nodes: 2 });
  });

  it("a gateway gone with no lease drops out; a queue without a listed gateway gets one queue row", async () => {
    const queue = uniqueId("nodes-gone");
    const base = await baseFor(queue);
    const gw = await gateways.join(queue, "gpu-gone", { wire: 2 });
    expect((await nodesOf(`${base}/nodes`)).map((r) => r.node_id)).toEqual(["gpu-gone"]);
    gw.close();
    await expect
      .poll(async () => (await env.QUEUE.getByName(queue).stats()).gateways[0]?.connected, POLL)
      .toBe(false);
    const rows = await nodesOf(`${base}/nodes`);
    expect(rows).toEqual([
      expect.objectContaining({
        node_id: `queue:${queue}`,
        gateway_url: `${ORIGIN}${base}/queues/${queue}`,
        healthy: false,
        max_run_workers: 0,
      }),
    ]);
    expect(await (await call(`${base}/health`)).json()).toEqual({ status: "ok", nodes: 0 });
  });

  it("a role token in a header sees every known queue; URLs are on the root then", async () => {
    const queue = uniqueId("nodes-root");
    const other = uniqueId("nodes-root");
    await gateways.join(queue, "gpu-r", { wire: 2 });
    await gateways.join(other, "gpu-r2", { wire: 2 });
    const listing = async () =>
      z
        .array(GatewayNodeInfo)
        .parse(await (await call("/nodes", { headers: { "X-Polar-Control-Token": TOKENS.trainer } })).json());
    // Both queues' gateways, each under its own queue's URL.
    await expect
      .poll(async () => (await listing()).filter((r) => r.node_id.startsWith("gpu-r")).length, POLL)
      .toBeGreaterThanOrEqual(2);
    const rows = await listing();
    expect(rows).toContainEqual(
      expect.objectContaining({ node_id: "gpu-r", gateway_url: `${ORIGIN}/queues/${queue}/gateways/gpu-r` }),
    );
    expect(rows).toContainEqual(
      expect.objectContaining({
        node_id: "gpu-r2",
        gateway_url: `${ORIGIN}/queues/${other}/gateways/gpu-r2`,
      }),
    );
    expect(new Set(rows.map((r) => r.gateway_url)).size).toBe(rows.length);
    expect((await call("/nodes")).status).toBe(401);
  });
});

describe("POST <gateway_url>/admin/inference/pause|resume: the queue's durable fence", {
  timeout: 20_000,
}, () => {
  it("the bridge's parallel pause of every gateway stores one fence change and answers each gateway's drain", async () => {
    const queue = uniqueId("fence-up");
    const base = await baseFor(queue);
    const [a, b] = [
      await gateways.join(queue, "gpu-a", { wire: 2 }),
      await gateways.join(queue, "gpu-b", { wire: 2 }),
    ];
    const rows = await nodesOf(`${base}/nodes`);
    const urls = rows.map((r) => r.gateway_url.slice(ORIGIN.length));
    // As the bridge: every pause at once, `timeout_seconds` as httpx renders the float.
    const pauses = Promise.all(urls.map((u) => fencePost(`${u}/admin/inference/pause?timeout_seconds=2.5`)));
    const [na, nb] = await Promise.all([ackAll(a, true, pauses), ackAll(b, true, pauses)]);
    const answers = await Promise.all((await pauses).map(async (r) => [r.status, await r.json()] as const));
    for (const [i, [status, body]] of answers.entries()) {
      expect(status).toBe(200);
      expect(GenerationStatus.parse(body)).toEqual({
        paused: true,
        drained: true,
        inflight: 0,
        timed_out: false,
        wait_for_drain: true,
        base_url: rows[i]!.gateway_url,
        engine: "polar-ts",
      });
    }
    // One change stored (the second call found the fence paused and fenced only its gateway).
    const fence = await env.QUEUE.getByName(queue).fence();
    expect(fence).toMatchObject({ paused: true, mode: "drain", fence_seq: 1 });
    expect(na + nb).toBe(3);

    const resumes = Promise.all(urls.map((u) => fencePost(`${u}/admin/inference/resume`)));
    await Promise.all([ackAll(a, false, resumes), ackAll(b, false, resumes)]);
    for (const r of await resumes) {
      expect(r.status).toBe(200);
      expect(GenerationStatus.parse(await r.json())).toMatchObject({ paused: false, inflight: 0 });
    }
    expect(await env.QUEUE.getByName(queue).fence()).toMatchObject({ paused: false, fence_seq: 2 });
  });

  it("a drain that outlasts timeout_seconds answers timed_out with the calls in flight, and the queue stays paused", async () => {
    const queue = uniqueId("fence-slow");
    const base = await baseFor(queue);
    const gw = await gateways.join(queue, "gpu-slow", { wire: 2 });
    const pending = fencePost(
      `${base}/queues/${queue}/gateways/gpu-slow/admin/inference/pause?timeout_seconds=1`,
    );
    const msg = await gw.expect("admin");
    expect(msg).toMatchObject({
      action: "fence",
      timeout_seconds: 1,
      fence: { paused: true, mode: "drain" },
    });
    ack(gw, msg, {
      ok: false,
      paused: true,
      inflight: 2,
      error: "2 model call(s) still in flight after the timeout",
    });
    const res = await pending;
    expect(res.status).toBe(200);
    expect(GenerationStatus.parse(await res.json())).toMatchObject({
      paused: true,
      drained: false,
      inflight: 2,
      timed_out: true,
    });
    expect(await env.QUEUE.getByName(queue).fence()).toMatchObject({ paused: true });
  });

  it("fails closed: a gateway that cannot fence is 502, a gone one holding a lease is listed and its pause 503", async () => {
    const queue = uniqueId("fence-bad");
    const base = await baseFor(queue);
    const odd = await gateways.join(queue, "gpu-odd", { wire: 2 });
    const pending = fencePost(
      `${base}/queues/${queue}/gateways/gpu-odd/admin/inference/pause?timeout_seconds=1`,
    );
    ack(odd, await odd.expect("admin"), { ok: false, paused: false, error: "no inference fence here" });
    const bad = await pending;
    expect(bad.status).toBe(502);
    expect(((await bad.json()) as { error: { code: string; message: string } }).error).toEqual({
      code: "gateway_error",
      message: `gateway 'gpu-odd' of queue '${queue}': no inference fence here`,
    });

    const batch = uniqueId("b");
    expect((await postBatch({ batch_id: batch, queue, tasks: [task("t")] })).status).toBe(201);
    const holder = await gateways.join(queue, "gpu-holder", { credit: 1, wire: 2 });
    await holder.expect("assign");
    holder.close();
    await expect
      .poll(
        async () =>
          (await env.QUEUE.getByName(queue).stats()).gateways.find((g) => g.node_id === "gpu-holder")
            ?.connected,
        POLL,
      )
      .toBe(false);
    const row = (await nodesOf(`${base}/nodes`)).find((r) => r.node_id === "gpu-holder");
    expect(row).toMatchObject({ healthy: false });
    const gone = await fencePost(`${row!.gateway_url.slice(ORIGIN.length)}/admin/inference/pause`);
    expect(gone.status).toBe(503);
    expect(((await gone.json()) as { error: { code: string } }).error.code).toBe("gateway_unavailable");
    // The undo of a partial pause still goes through: the resume is stored for it.
    const undo = fencePost(`${row!.gateway_url.slice(ORIGIN.length)}/admin/inference/resume`);
    ack(odd, await odd.expect("admin"), { paused: false });
    const resumed = await undo;
    expect(resumed.status).toBe(200);
    expect(GenerationStatus.parse(await resumed.json())).toMatchObject({ paused: false });
    expect(await env.QUEUE.getByName(queue).fence()).toMatchObject({ paused: false });
  });

  it("a queue row fences the queue with no gateway: one that connects later comes up paused", async () => {
    const queue = uniqueId("fence-empty");
    const base = await baseFor(queue);
    const [row] = await nodesOf(`${base}/nodes`);
    const res = await fencePost(
      `${row!.gateway_url.slice(ORIGIN.length)}/admin/inference/pause?timeout_seconds=300.0`,
    );
    expect(res.status).toBe(200);
    expect(GenerationStatus.parse(await res.json())).toMatchObject({
      paused: true,
      drained: true,
      inflight: 0,
    });
    const gw = await Gateway.connect(queue, TOKENS.gateway, "gpu-late");
    gateways.track(gw);
    gw.hello("gpu-late", 0, [], 2);
    expect((await gw.expect("welcome")).fence).toMatchObject({ queue, paused: true, mode: "drain" });
    const status = call(`${base}/queues/${queue}/gateways/gpu-late/admin/inference/status`);
    ack(gw, await gw.expect("admin"), { paused: true });
    expect(GenerationStatus.parse(await (await status).json())).toMatchObject({ paused: true, inflight: 0 });
  });

  it("a path credential fences only its own queue; unknown gateways and bad timeouts are refused by name", async () => {
    const queue = uniqueId("fence-scope");
    const base = await baseFor(queue);
    await gateways.join(queue, "gpu-s", { wire: 2 });
    const other = uniqueId("fence-other");
    const forbidden = await fencePost(`${base}/queues/${other}/admin/inference/pause`);
    expect(forbidden.status).toBe(403);
    expect(((await forbidden.json()) as { error: { message: string } }).error.message).toMatch(/^queue: /);
    expect(await env.QUEUE.getByName(other).fence()).toMatchObject({ paused: false, fence_seq: 0 });
    const unknown = await fencePost(`${base}/queues/${queue}/gateways/gpu-nope/admin/inference/pause`);
    expect(unknown.status).toBe(404);
    for (const t of ["abc", "-1", "3601", ""]) {
      const res = await fencePost(
        `${base}/queues/${queue}/gateways/gpu-s/admin/inference/pause?timeout_seconds=${t}`,
      );
      expect(res.status, t).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
        /^timeout_seconds: /,
      );
    }
    expect(await env.QUEUE.getByName(queue).fence()).toMatchObject({ paused: false, fence_seq: 0 });
    expect((await fencePost(`/queues/${queue}/admin/inference/pause`)).status).toBe(401);
  });
});
