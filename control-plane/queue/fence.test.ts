/**
 * The durable inference fence: the trainer's `/v1/queues/:queue/…` routes and the admin ones store
 * the fence in every shard before any gateway hears of it, a gateway that connects during a pause
 * gets it in `welcome` (v2) or as v1 actions, the state survives a restart of the dispatcher, and
 * one timeout governs the wait for the gateways' answers.
 */
import { abortAllDurableObjects, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { type AdminMessage, FenceChangeResponse, FenceStatusResponse } from "../../protocol";
import {
  call,
  type Gateway,
  GatewayPool,
  POLL,
  postBatch,
  TOKENS,
  task,
  uniqueId,
} from "../testing/fixtures";
import { gatewayShard, shardsOf } from "./shards";

const CONFIG = "sharded-*=4";
const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

function post(path: string, body?: unknown, token: string = TOKENS.trainer): Promise<Response> {
  return call(path, {
    method: "POST",
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    ...(body === undefined ? {} : { body: typeof body === "string" ? body : JSON.stringify(body) }),
  });
}

/** The fence as the queue's (first) dispatcher stores it, without asking any gateway. */
function stored(queue: string) {
  return env.QUEUE.getByName(queue).fence();
}

/** `GET /v1/queues/:queue/inference` (it asks connected gateways: use with none connected). */
async function fenceOf(queue: string) {
  const res = await call(`/v1/queues/${queue}/inference`, {
    headers: { Authorization: `Bearer ${TOKENS.trainer}` },
  });
  expect(res.status).toBe(200);
  return FenceStatusResponse.parse(await res.json());
}

/** Answers an admin message as a gateway whose gate is in the given state. */
function ack(gw: Gateway, msg: AdminMessage, state: { paused: boolean; policy_version: string | null }) {
  gw.send({
    v: msg.v,
    type: "admin_ack",
    request_id: msg.request_id,
    ok: true,
    inflight: 0,
    ...state,
  });
}

/** A node id whose `?node_id=` lands on shard `index` of `queue`. */
function nodeOnShard(queue: string, index: number, prefix: string): string {
  for (let i = 0; ; i++) {
    const node = `${prefix}-${i}`;
    if (gatewayShard(queue, node, CONFIG) === shardsOf(queue, CONFIG)[index]) return node;
  }
}

describe("the queue's inference fence (trainer routes)", { timeout: 20_000 }, () => {
  it("stores a pause, tells the connected gateway, and hands it to one that connects later in welcome", async () => {
    const queue = uniqueId("fence");
    const a = await gateways.join(queue, "node-a", { wire: 2, welcome: false });
    expect((await a.expect("welcome")).fence).toMatchObject({ queue, paused: false, fence_seq: 0 });

    const pending = post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 2 });
    const msg = await a.expect("admin");
    expect(msg).toMatchObject({ v: 2, action: "fence", timeout_seconds: 2 });
    expect(msg.fence).toMatchObject({ queue, paused: true, mode: "drain", fence_seq: 1 });
    // Stored before the fan-out: a gateway that connects while the pause is pending sees it.
    const b = await gateways.join(queue, "node-b", { wire: 2, welcome: false });
    expect((await b.expect("welcome")).fence).toMatchObject({ paused: true, mode: "drain", fence_seq: 1 });
    ack(a, msg, { paused: true, policy_version: null });
    const res = await pending;
    expect(res.status).toBe(200);
    const body = FenceChangeResponse.parse(await res.json());
    expect(body).toMatchObject({ queue, ok: true, fence: { paused: true, mode: "drain" } });
    expect(body.fence.paused_at).toBeGreaterThan(0);
    expect(body.nodes).toEqual([
      { node_id: "node-a", ok: true, paused: true, inflight: 0, policy_version: null },
    ]);

    const version = post(`/v1/queues/${queue}/policy_version`, { policy_version: "3" });
    for (const gw of [a, b]) {
      const m = await gw.expect("admin");
      expect(m.fence).toMatchObject({ paused: true, policy_version: "3", fence_seq: 2 });
      ack(gw, m, { paused: true, policy_version: "3" });
    }
    expect(FenceChangeResponse.parse(await (await version).json())).toMatchObject({ ok: true });

    const resume = post(`/v1/queues/${queue}/inference/resume`, { policy_version: "4" });
    for (const gw of [a, b]) {
      const m = await gw.expect("admin");
      expect(m.fence).toMatchObject({ paused: false, mode: null, paused_at: null, policy_version: "4" });
      ack(gw, m, { paused: false, policy_version: "4" });
    }
    const resumed = FenceChangeResponse.parse(await (await resume).json());
    expect(resumed).toMatchObject({ ok: true, fence: { paused: false, policy_version: "4", fence_seq: 3 } });
    expect(await stored(queue)).toEqual(resumed.fence);
  });

  it("a v1 gateway gets the fence as the v1 actions it knows: version, then pause, after welcome", async () => {
    const queue = uniqueId("fence-v1");
    const paused = post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 0 });
    expect(FenceChangeResponse.parse(await (await paused).json())).toMatchObject({ ok: true, nodes: [] });
    await post(`/v1/queues/${queue}/policy_version`, { policy_version: "7" });

    const old = await gateways.join(queue, "node-old", { wire: 1, welcome: false });
    const welcome = await old.expect("welcome");
    expect(welcome.v).toBe(1);
    expect(welcome).not.toHaveProperty("fence");
    const version = await old.expect("admin");
    expect(version).toMatchObject({ v: 1, action: "policy_version", policy_version: "7" });
    const pause = await old.expect("admin");
    expect(pause).toMatchObject({ v: 1, action: "pause" });

    const resume = post(`/v1/queues/${queue}/inference/resume`, {});
    const again = await old.expect("admin");
    expect(again).toMatchObject({ v: 1, action: "policy_version", policy_version: "7" });
    const go = await old.expect("admin");
    expect(go).toMatchObject({ v: 1, action: "resume" });
    ack(old, go, { paused: false, policy_version: "7" });
    expect(FenceChangeResponse.parse(await (await resume).json()).nodes).toEqual([
      { node_id: "node-old", ok: true, paused: false, inflight: 0, policy_version: "7" },
    ]);
  });

  it("one timeout: an ack later than a fixed window but within timeout_seconds counts; none at all does not", async () => {
    const queue = uniqueId("fence-t");
    const gw = await gateways.join(queue, "node-slow", { wire: 2, welcome: false });
    await gw.expect("welcome");
    const started = Date.now();
    const pending = post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 3 });
    const msg = await gw.expect("admin");
    // The gateway drains for 2.5 s before it answers: still within the pause's own timeout.
    await new Promise((r) => setTimeout(r, 2500));
    ack(gw, msg, { paused: true, policy_version: null });
    const body = FenceChangeResponse.parse(await (await pending).json());
    expect(body.ok).toBe(true);
    expect(Date.now() - started).toBeGreaterThanOrEqual(2500);

    const silent = post(`/v1/queues/${queue}/inference/pause`, { mode: "abort", timeout_seconds: 0.5 });
    expect((await gw.expect("admin")).fence).toMatchObject({ mode: "abort" });
    const failed = FenceChangeResponse.parse(await (await silent).json());
    expect(failed.ok).toBe(false);
    expect(failed.nodes[0]).toMatchObject({ node_id: "node-slow", ok: false });
    expect(failed.nodes[0]!.error).toMatch(/no admin_ack within 5500 ms/);
    // The queue stays paused either way: the fence is durable, not the ack.
    expect(await stored(queue)).toMatchObject({ paused: true, mode: "abort" });
  });

  it("survives a restart of the dispatcher: the fence is read back from SQLite", async () => {
    const queue = uniqueId("fence-r");
    await post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 0 });
    await post(`/v1/queues/${queue}/policy_version`, { policy_version: "11" });
    const before = (await fenceOf(queue)).fence;
    const mark = (obj: object) => obj as { restartMark?: boolean };
    await runInDurableObject(env.QUEUE.getByName(queue), (obj) => {
      mark(obj).restartMark = true;
    });
    // Reset every object: their memory is gone, their storage is not.
    await abortAllDurableObjects();
    expect(
      await runInDurableObject(env.QUEUE.getByName(queue), (obj) => mark(obj).restartMark),
    ).toBeUndefined();
    expect((await fenceOf(queue)).fence).toEqual(before);
    const gw = await gateways.join(queue, "node-late", { wire: 2, welcome: false });
    expect((await gw.expect("welcome")).fence).toEqual(before);
    expect(before).toMatchObject({ paused: true, policy_version: "11", fence_seq: 2 });
  });

  it("a sharded queue: every shard stores the fence; gateways of every shard pause; a late one starts paused", async () => {
    const queue = uniqueId("sharded");
    const nodes = [0, 1, 2, 3].map((i) => nodeOnShard(queue, i, "fz"));
    const gws = await Promise.all(nodes.map((n) => gateways.join(queue, n, { wire: 2, welcome: false })));
    for (const [i, gw] of gws.entries()) expect((await gw.expect("welcome")).queue).toBe(`${queue}#${i}`);
    const pending = post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 1 });
    for (const gw of gws) ack(gw, await gw.expect("admin"), { paused: true, policy_version: null });
    const body = FenceChangeResponse.parse(await (await pending).json());
    expect(body.ok).toBe(true);
    expect(body.nodes.map((n) => n.node_id).sort()).toEqual([...nodes].sort());
    for (const shard of shardsOf(queue, CONFIG))
      expect(await env.QUEUE.getByName(shard).fence()).toMatchObject({ queue, paused: true, fence_seq: 1 });
    const late = await gateways.join(queue, nodeOnShard(queue, 2, "fz-late"), { wire: 2, welcome: false });
    expect((await late.expect("welcome")).fence).toMatchObject({ queue, paused: true });
  });

  it("GET asks every gateway for its gate without changing anything", async () => {
    const queue = uniqueId("fence-s");
    const gw = await gateways.join(queue, "node-s", { wire: 2, welcome: false });
    await gw.expect("welcome");
    const old = await gateways.join(queue, "node-s1", { wire: 1, welcome: false });
    await old.expect("welcome");
    const pending = call(`/v1/queues/${queue}/inference`, {
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    const msg = await gw.expect("admin");
    expect(msg.action).toBe("status");
    gw.send({
      v: 2,
      type: "admin_ack",
      request_id: msg.request_id,
      ok: true,
      paused: false,
      inflight: 2,
      policy_version: null,
      fence_seq: 0,
    });
    const body = FenceStatusResponse.parse(await (await pending).json());
    expect(body.fence).toMatchObject({ paused: false, fence_seq: 0 });
    expect(body.nodes.find((n) => n.node_id === "node-s")).toMatchObject({ ok: true, inflight: 2 });
    expect(body.nodes.find((n) => n.node_id === "node-s1")).toMatchObject({ ok: false });
    // The answer came after the fan-out: a status request to the wire-v1 gateway would be here.
    await old.expectNothingBeforeReply();
  });

  it("refuses bad bodies naming the field, and tokens of other roles", async () => {
    const queue = uniqueId("fence-v");
    const cases: Array<[string, unknown, RegExp]> = [
      ["inference/pause", { mode: "later" }, /^mode:/],
      ["inference/pause", { timeout_seconds: 4000 }, /^timeout_seconds:/],
      ["inference/pause", { timeout_seconds: -1 }, /^timeout_seconds:/],
      ["inference/pause", { extra: 1 }, /extra/],
      ["inference/resume", { policy_version: "" }, /^policy_version:/],
      ["policy_version", {}, /^policy_version:/],
      ["policy_version", { policy_version: 3 }, /^policy_version:/],
    ];
    for (const [route, body, message] of cases) {
      const res = await post(`/v1/queues/${queue}/${route}`, body);
      expect(res.status, `${route} ${JSON.stringify(body)}`).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(message);
    }
    const notJson = await post(`/v1/queues/${queue}/inference/pause`, "{");
    expect(notJson.status).toBe(400);
    const badQueue = await post(`/v1/queues/a%23b/inference/pause`, {});
    expect(badQueue.status).toBe(400);
    expect(((await badQueue.json()) as { error: { message: string } }).error.message).toMatch(/^queue:/);
    expect((await post(`/v1/queues/${queue}/inference/pause`, {}, TOKENS.gateway)).status).toBe(401);
    // Nothing was stored by the refused requests.
    expect((await fenceOf(queue)).fence.fence_seq).toBe(0);
    // The admin token may act as the trainer.
    const byAdmin = await post(`/v1/queues/${queue}/inference/pause`, { timeout_seconds: 0 }, TOKENS.admin);
    expect(byAdmin.status).toBe(200);
  });
});

describe("the admin fence routes go through the same durable state", { timeout: 20_000 }, () => {
  it("pauses and resumes every known queue, with the version", async () => {
    const queues = [uniqueId("fence-adm"), uniqueId("fence-adm")];
    const gws = [
      await gateways.join(queues[0]!, "node-adm2", { wire: 2, welcome: false }),
      await gateways.join(queues[1]!, "node-adm3", { wire: 2, welcome: false }),
    ];
    for (const gw of gws) await gw.expect("welcome");
    await expect
      .poll(async () => {
        const known = await env.REGISTRY.getByName("global").listQueues();
        return queues.every((q) => known.includes(q));
      }, POLL)
      .toBe(true);
    const pending = post("/v1/admin/inference/pause", { timeout_seconds: 1 }, TOKENS.admin);
    for (const gw of gws) ack(gw, await gw.expect("admin"), { paused: true, policy_version: null });
    const res = await pending;
    expect(res.status).toBe(200);
    const body = (await res.json()) as {
      ok: boolean;
      queues: { queue: string; fence: { paused: boolean } }[];
      nodes: { node_id: string; queue: string; ok: boolean }[];
    };
    for (const [i, queue] of queues.entries()) {
      expect(body.queues.find((q) => q.queue === queue)?.fence.paused).toBe(true);
      expect(body.nodes.find((n) => n.node_id === `node-adm${i + 2}`)).toMatchObject({ queue, ok: true });
      expect((await stored(queue)).paused).toBe(true);
    }

    const resume = post("/v1/admin/inference/resume", { policy_version: "9" }, TOKENS.admin);
    for (const gw of gws) ack(gw, await gw.expect("admin"), { paused: false, policy_version: "9" });
    expect((await resume).status).toBe(200);
    for (const queue of queues)
      expect(await stored(queue)).toMatchObject({ paused: false, policy_version: "9" });
    expect((await post("/v1/admin/inference/resume", {}, TOKENS.trainer)).status).toBe(401);
  });
});

describe("min_policy_version", () => {
  it("is validated at submit and carried in the assignment (not to v1 gateways)", async () => {
    for (const bad of [-1, 1.5, "3"]) {
      const res = await postBatch({ tasks: [task("t", { min_policy_version: bad as never })] });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
        /tasks\.0\.min_policy_version|tasks\[0\]\.min_policy_version/,
      );
    }
    const queue = uniqueId("minv");
    const gw = await gateways.join(queue, "node-m", { wire: 2, credit: 1, welcome: false });
    await gw.expect("welcome");
    expect((await postBatch({ queue, tasks: [task("t", { min_policy_version: 4 })] })).status).toBe(201);
    expect((await gw.expect("assign")).session.min_policy_version).toBe(4);

    const queue1 = uniqueId("minv1");
    const old = await gateways.join(queue1, "node-m1", { wire: 1, credit: 1, welcome: false });
    await old.expect("welcome");
    expect((await postBatch({ queue: queue1, tasks: [task("t", { min_policy_version: 4 })] })).status).toBe(
      201,
    );
    const assign = await old.expect("assign");
    expect(assign.v).toBe(1);
    expect(assign.session).not.toHaveProperty("min_policy_version");
  });
});

describe("engine_priority", () => {
  it("is validated at submit and carried to v3 gateways; v2 and v1 gateways get assignments without it", async () => {
    for (const bad of [1.5, "3", 2 ** 31, -(2 ** 31)]) {
      const res = await postBatch({ tasks: [task("t", { engine_priority: bad as never })] });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(
        /tasks\.0\.engine_priority|tasks\[0\]\.engine_priority/,
      );
    }
    const spec = { min_policy_version: 2, engine_priority: -7 };
    const assigned = async (wire: 1 | 2 | 3) => {
      const queue = uniqueId(`prio${wire}`);
      const gw = await gateways.join(queue, `node-p${wire}`, { wire, credit: 1, welcome: false });
      await gw.expect("welcome");
      expect((await postBatch({ queue, tasks: [task("t", spec)] })).status).toBe(201);
      return gw.expect("assign");
    };
    const v3 = await assigned(3);
    expect(v3.v).toBe(3);
    expect(v3.session).toMatchObject(spec);
    const v2 = await assigned(2);
    expect(v2.v).toBe(2);
    expect(v2.session.min_policy_version).toBe(2);
    expect(v2.session).not.toHaveProperty("engine_priority");
    const v1 = await assigned(1);
    expect(v1.v).toBe(1);
    expect(v1.session).not.toHaveProperty("engine_priority");
    expect(v1.session).not.toHaveProperty("min_policy_version");
  });
});
