import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ResultsPage } from "../../protocol";
import {
  call,
  Gateway,
  GatewayPool,
  getAsTrainer,
  POLL,
  resultFor,
  shardSettled,
  submitBatch,
  TOKENS,
  task,
  uniqueId,
} from "../testing/fixtures";
import {
  gatewayShard,
  parseShardName,
  ShardConfigError,
  sessionShard,
  shardCount,
  shardName,
  shardsOf,
} from "./shards";

/** The vitest config gives queues named `sharded-…` four shards. */
const SHARDS = 4;
const CONFIG = env.POLAR_QUEUE_SHARDS;

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

/** A node id whose gateway lands on shard `index` of `queue`. */
function nodeOnShard(queue: string, index: number, tag = "n"): string {
  const target = shardName(queue, index, SHARDS);
  for (let i = 0; ; i++) {
    const node = `${tag}-${i}`;
    if (gatewayShard(queue, node, CONFIG) === target) return node;
  }
}

/** Connects `nodeId` to `queue` (routed to its shard) and completes the hello. */

/**
 * A sharded queue holding one session, pending on its home shard (the lender of the loan tests);
 * `otherIndex` is the next shard (the borrower).
 */
async function oneSessionOnItsShard() {
  const queue = uniqueId("sharded");
  const batchId = await submitBatch(queue, [task("t")]);
  const sessionId = `${batchId}.0.0`;
  const home = sessionShard(queue, sessionId, CONFIG);
  const homeIndex = parseShardName(home).index;
  const otherIndex = (homeIndex + 1) % SHARDS;
  const lender = env.QUEUE.getByName(home);
  await expect.poll(async () => (await lender.stats()).pending, POLL).toBe(1);
  return { queue, batchId, sessionId, homeIndex, otherIndex, lender };
}

function shardStats(queue: string) {
  return Promise.all(shardsOf(queue, CONFIG).map((name) => env.QUEUE.getByName(name).stats()));
}

function sessionIds(batchId: string, n: number): string[] {
  return Array.from({ length: n }, (_, i) => `${batchId}.0.${i}`);
}

describe("shard configuration", () => {
  it("parses exact names and prefixes; unlisted queues have one shard under their own name", () => {
    expect(shardCount("default", "default=4,gpu-*=8,gpu-big*=2")).toBe(4);
    expect(shardCount("gpu-a", "default=4,gpu-*=8,gpu-big*=2")).toBe(8);
    expect(shardCount("gpu-big-1", "default=4,gpu-*=8,gpu-big*=2")).toBe(2);
    expect(shardCount("other", "default=4")).toBe(1);
    expect(shardCount("default", undefined)).toBe(1);
    expect(shardsOf("q", "")).toEqual(["q"]);
    expect(shardsOf("q", "q=3")).toEqual(["q#0", "q#1", "q#2"]);
    expect(sessionShard("q", "b.0.1", undefined)).toBe("q");
    expect(gatewayShard("q", "node-a", "q=1")).toBe("q");
    expect(gatewayShard("q", null, "q=4")).toBe("q#0");
    expect(parseShardName("q#3")).toEqual({ queue: "q", index: 3 });
    expect(parseShardName("q")).toEqual({ queue: "q", index: 0 });
  });

  it("refuses a malformed POLAR_QUEUE_SHARDS naming the variable and the entry", () => {
    expect(() => shardCount("q", "q=0")).toThrow(ShardConfigError);
    expect(() => shardCount("q", "q=four")).toThrow(/POLAR_QUEUE_SHARDS: entry 'q=four'/);
    expect(() => shardCount("q", "a*b=2")).toThrow(/only at the end/);
    expect(() => shardCount("q", "q=65")).toThrow(/from 1 to 64/);
  });

  it("places sessions by a stable hash of their id", () => {
    const placed = new Map<string, number>();
    for (let i = 0; i < 400; i++) {
      const shard = sessionShard("sharded-x", `b.0.${i}`, CONFIG);
      expect(sessionShard("sharded-x", `b.0.${i}`, CONFIG)).toBe(shard);
      placed.set(shard, (placed.get(shard) ?? 0) + 1);
    }
    expect([...placed.keys()].sort()).toEqual(shardsOf("sharded-x", CONFIG));
    for (const n of placed.values()) expect(n).toBeGreaterThan(50);
  });
});

// Four shards start cold in the first test: 2 s alone, past the 5 s default on a loaded machine.
describe("sharded queue", { timeout: 20_000 }, () => {
  it("spreads the sessions of one batch over the shards by session id", async () => {
    const queue = uniqueId("sharded");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 40 })]);
    await expect
      .poll(async () => (await shardStats(queue)).reduce((n, s) => n + s.pending, 0), POLL)
      .toBe(40);
    const stats = await shardStats(queue);
    expect(stats.map((s) => s.shard)).toEqual(shardsOf(queue, CONFIG));
    for (const s of stats) expect(s.pending).toBeGreaterThan(0);
    const expected = new Map<string, number>();
    for (const id of sessionIds(batchId, 40)) {
      const shard = sessionShard(queue, id, CONFIG);
      expected.set(shard, (expected.get(shard) ?? 0) + 1);
    }
    for (const s of stats) expect(s.pending).toBe(expected.get(s.shard));
    // The queue-depth limit counts every shard.
    expect(await env.QUEUE.getByName(shardName(queue, 0, SHARDS)).depth()).toBe(expected.get(`${queue}#0`));
  });

  it("gateways on one shard get every session: they steal from shards without gateways", async () => {
    const queue = uniqueId("sharded");
    // Sessions first (they wait on shards without gateways), then one gateway on shard 2.
    const batchId = await submitBatch(queue, [task("t", { num_samples: 24 })]);
    const gw = await gateways.join(queue, nodeOnShard(queue, 2), { credit: 24, welcome: false });
    expect((await gw.expect("welcome")).queue).toBe(`${queue}#2`);
    const got = new Set<string>();
    for (let i = 0; i < 24; i++) got.add((await gw.expect("assign")).session.session_id);
    expect([...got].sort()).toEqual(sessionIds(batchId, 24).sort());
    const stats = await shardStats(queue);
    const home = sessionIds(batchId, 24).filter((id) => sessionShard(queue, id, CONFIG) === `${queue}#2`);
    expect(stats[2]!.counters.stolen_sessions).toBe(24 - home.length);
    expect(stats.reduce((n, s) => n + s.counters.lent_sessions, 0)).toBe(24 - home.length);
    expect(stats.map((s) => s.pending)).toEqual([0, 0, 0, 0]);
    expect(stats[2]!.leases).toBe(24);

    // Gateway first, sessions later: the shards that receive them poke the idle gateway's shard.
    const later = await submitBatch(queue, [task("u", { num_samples: 12 })]);
    const more = new Set<string>();
    gw.send({ v: 1, type: "credit", grant: 12 });
    for (let i = 0; i < 12; i++) more.add((await gw.expect("assign")).session.session_id);
    expect([...more].sort()).toEqual(sessionIds(later, 12).sort());
  });

  it("a result sent through another shard's gateway socket is accepted once (the ledger fences)", async () => {
    const queue = uniqueId("sharded");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 8 })]);
    const nodeA = nodeOnShard(queue, 0, "a");
    const a = await gateways.join(queue, nodeA, { credit: 8, welcome: false });
    await a.expect("welcome");
    const assigns = [];
    for (let i = 0; i < 8; i++) assigns.push(await a.expect("assign"));
    // A session shard 0 took from a sibling by stealing.
    const stolen = assigns.find((m) => sessionShard(queue, m.session.session_id, CONFIG) !== `${queue}#0`)!;
    expect(stolen).toBeDefined();
    const b = await gateways.join(queue, nodeOnShard(queue, 1, "b"), { credit: 0, welcome: false });
    expect((await b.expect("welcome")).queue).toBe(`${queue}#1`);

    const result = resultFor(stolen.session, nodeA);
    b.send({ v: 1, type: "result", lease_id: "l_not-current", result });
    expect((await b.expect("ack")).status).toBe("stale");
    b.send({ v: 1, type: "result", lease_id: stolen.lease_id, result });
    expect((await b.expect("ack")).status).toBe("accepted");
    a.send({ v: 1, type: "result", lease_id: stolen.lease_id, result });
    expect((await a.expect("ack")).status).toBe("duplicate");
    b.send({ v: 1, type: "result", lease_id: stolen.lease_id, result });
    expect((await b.expect("ack")).status).toBe("duplicate");

    const page = ResultsPage.parse(await (await getAsTrainer(`/v1/batches/${batchId}/results`)).json());
    expect(page.results.map((r) => r.result.session_id)).toEqual([stolen.session.session_id]);
    expect(await env.BATCH.getByName(batchId).counters()).toMatchObject({
      duplicate_results: 2,
      stale_results: 1,
    });
    // Shard 0 dropped its lease when its own gateway's (duplicate) result came in.
    expect((await env.QUEUE.getByName(`${queue}#0`).stats()).leases).toBe(7);
  });

  it("an infra failure of a stolen session goes back to its shard and is stolen again, until max_attempts", async () => {
    const queue = uniqueId("sharded");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 6, max_attempts: 2 })]);
    const node = nodeOnShard(queue, 3);
    const gw = await gateways.join(queue, node, { credit: 6, welcome: false });
    await gw.expect("welcome");
    const assigns = [];
    for (let i = 0; i < 6; i++) assigns.push(await gw.expect("assign"));
    const stolen = assigns.find((m) => sessionShard(queue, m.session.session_id, CONFIG) !== `${queue}#3`)!;
    expect(stolen, "shard 3's gateway stole none of the 6 sessions").toBeDefined();
    const home = sessionShard(queue, stolen.session.session_id, CONFIG);
    const lentBefore = (await env.QUEUE.getByName(home).stats()).counters.lent_sessions;
    const infra = (m: typeof stolen) => ({
      ...resultFor(m.session, node),
      status: "ERROR" as const,
      error: { kind: "infra" as const, message: "runtime failed to start" },
    });
    gw.send({ v: 1, type: "result", lease_id: stolen.lease_id, result: infra(stolen) });
    expect((await gw.expect("ack")).status).toBe("accepted");
    gw.send({ v: 1, type: "credit", grant: 1 });
    const again = await gw.expect("assign");
    expect(again.session).toMatchObject({ session_id: stolen.session.session_id, attempt: 2 });
    // It went back to its home shard and was lent out again.
    expect((await env.QUEUE.getByName(home).stats()).counters.lent_sessions).toBe(lentBefore + 1);
    gw.send({ v: 1, type: "result", lease_id: again.lease_id, result: infra(again) });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const session = (await (await getAsTrainer(`/v1/sessions/${stolen.session.session_id}`)).json()) as {
      status: string;
      attempt: number;
      batch_id: string;
      result: { error: { kind: string } };
    };
    // Ended at max_attempts (2): not handed out a third time.
    expect(session).toMatchObject({ status: "ERROR", attempt: 2, batch_id: batchId });
    expect(session.result.error.kind).toBe("infra");
    // Nothing left to hand out anywhere, so no third assign is on its way.
    expect(await env.BATCH.getByName(batchId).outboxSize()).toBe(0);
    expect((await shardStats(queue)).map((s) => s.pending)).toEqual([0, 0, 0, 0]);
    await shardSettled(env.QUEUE.getByName(`${queue}#3`));
    await gw.expectNothingBeforeReply();
  });

  it("a session that goes round the shards back to its lender before the loan settles is kept once", async () => {
    const queue = uniqueId("sharded");
    const batchId = await submitBatch(queue, [task("t")]);
    const sessionId = `${batchId}.0.0`;
    const home = sessionShard(queue, sessionId, CONFIG);
    const homeIndex = parseShardName(home).index;
    const other = shardName(queue, (homeIndex + 1) % SHARDS, SHARDS);
    const lender = env.QUEUE.getByName(home);
    await expect.poll(async () => (await lender.stats()).pending, POLL).toBe(1);
    // Another shard borrows it (its settle is still to come) and holds it pending, no gateways.
    const loan = await lender.steal(other, 1);
    expect(loan.payloads).toHaveLength(1);
    await env.QUEUE.getByName(other).enqueue([JSON.parse(loan.payloads[0]!)]);
    // A gateway on the lender's shard: its own copy is lent out, so it steals the session back.
    const node = nodeOnShard(queue, homeIndex);
    const gw = await gateways.join(queue, node, { credit: 1, welcome: false });
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    expect(assign.session.session_id).toBe(sessionId);
    // The first borrower's late settle must not delete the copy that came back.
    expect(await lender.settle(loan.token, [sessionId])).toBe(0);
    const stats = await shardStats(queue);
    expect(stats.map((st) => st.pending)).toEqual([0, 0, 0, 0]);
    expect(stats.reduce((n, st) => n + st.leases, 0)).toBe(1);
    gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result: resultFor(assign.session, node) });
    expect((await gw.expect("ack")).status).toBe("accepted");
  });

  it("a loan that ran out after the borrower dispatched it: the lender drops its copy, none runs twice", async () => {
    const { queue, sessionId, homeIndex, otherIndex, lender } = await oneSessionOnItsShard();
    // A borrower takes it and its gateway runs it, but the settle never reaches the lender.
    const loan = await lender.steal(shardName(queue, otherIndex, SHARDS), 1);
    await env.QUEUE.getByName(shardName(queue, otherIndex, SHARDS)).enqueue([JSON.parse(loan.payloads[0]!)]);
    const borrowerNode = nodeOnShard(queue, otherIndex, "b");
    const borrower = await gateways.join(queue, borrowerNode, { credit: 1, welcome: false });
    await borrower.expect("welcome");
    const first = await borrower.expect("assign");
    expect(first.session.session_id).toBe(sessionId);
    // The loan runs out with a gateway of the lender's own waiting for work.
    await runInDurableObject(lender, (_, state) => {
      state.storage.sql.exec("UPDATE pending SET lent_until = 1");
    });
    const lenderNode = nodeOnShard(queue, homeIndex, "l");
    const gw = await gateways.join(queue, lenderNode, { credit: 1, welcome: false });
    await gw.expect("welcome");
    await runDurableObjectAlarm(lender);
    // The ledger says the session is assigned: the lender's copy is gone, not dispatched.
    expect((await lender.stats()).pending).toBe(0);
    const stats = await shardStats(queue);
    expect(stats.reduce((n, st) => n + st.leases, 0)).toBe(1);
    await shardSettled(lender);
    await shardSettled(env.QUEUE.getByName(shardName(queue, otherIndex, SHARDS)));
    await gw.expectNothingBeforeReply();
    await borrower.expectNothingBeforeReply();
    borrower.send({
      v: 1,
      type: "result",
      lease_id: first.lease_id,
      result: resultFor(first.session, borrowerNode),
    });
    expect((await borrower.expect("ack")).status).toBe("accepted");
  });

  it("a settle that fails after a steal leaves the lender's copy lent until the loan runs out; then the ledger has it dropped, not run twice", async () => {
    const { queue, batchId, sessionId, homeIndex, otherIndex, lender } = await oneSessionOnItsShard();
    const thiefName = shardName(queue, otherIndex, SHARDS);
    const thief = env.QUEUE.getByName(thiefName);
    // The thief's calls to its siblings go through, but for settle, which fails (a lost answer).
    const settles: string[][] = [];
    const real = await runInDurableObject(thief, (instance) => {
      const holder = instance as unknown as { env: Env };
      const saved = holder.env;
      const wrap = (stub: ReturnType<Env["QUEUE"]["getByName"]>) =>
        new Proxy(stub, {
          get: (target, key) =>
            key === "settle"
              ? async (_token: string, ids: string[]) => {
                  settles.push(ids);
                  throw new Error("settle lost");
                }
              : Reflect.get(target, key),
        });
      holder.env = {
        ...saved,
        QUEUE: { getByName: (name: string) => wrap(saved.QUEUE.getByName(name)) } as unknown as Env["QUEUE"],
      };
      return saved;
    });
    try {
      const thiefNode = nodeOnShard(queue, otherIndex, "t");
      const gw = await gateways.join(queue, thiefNode, { credit: 1, welcome: false });
      await gw.expect("welcome");
      const stolen = await gw.expect("assign");
      expect(stolen.session.session_id).toBe(sessionId);
      await expect.poll(() => settles, POLL).toEqual([[sessionId]]);
      // The lender still holds its copy, lent to the thief: skipped by its dispatch.
      const lentRow = () =>
        runInDurableObject(lender, (_, state) =>
          state.storage.sql
            .exec<{ session_id: string; lent_to: string | null }>("SELECT session_id, lent_to FROM pending")
            .toArray(),
        );
      expect(await lentRow()).toEqual([{ session_id: sessionId, lent_to: thiefName }]);
      const lenderNode = nodeOnShard(queue, homeIndex, "l");
      const home = await gateways.join(queue, lenderNode, { credit: 1, welcome: false });
      await home.expect("welcome");
      await shardSettled(lender);
      await home.expectNothingBeforeReply();
      // The loan runs out: the ledger says the session is assigned, so the copy is dropped.
      await runInDurableObject(lender, (_, state) => {
        state.storage.sql.exec("UPDATE pending SET lent_until = 1");
      });
      await runDurableObjectAlarm(lender);
      expect(await lentRow()).toEqual([]);
      await shardSettled(lender);
      await home.expectNothingBeforeReply();
      expect(await env.BATCH.getByName(batchId).session(sessionId)).toMatchObject({
        status: "ASSIGNED",
        lease_id: stolen.lease_id,
      });
      gw.send({
        v: 1,
        type: "result",
        lease_id: stolen.lease_id,
        result: resultFor(stolen.session, thiefNode),
      });
      expect((await gw.expect("ack")).status).toBe("accepted");
    } finally {
      await runInDurableObject(thief, (instance) => {
        (instance as unknown as { env: Env }).env = real;
      });
    }
  });

  it("a loan that ran out before the borrower dispatched anything: the lender dispatches its copy again", async () => {
    const { queue, sessionId, homeIndex, otherIndex, lender } = await oneSessionOnItsShard();
    // A borrower took it and failed before storing or settling it.
    const loan = await lender.steal(shardName(queue, otherIndex, SHARDS), 1);
    expect(loan.payloads).toHaveLength(1);
    const lenderNode = nodeOnShard(queue, homeIndex, "l");
    const gw = await gateways.join(queue, lenderNode, { credit: 1, welcome: false });
    await gw.expect("welcome");
    // Still lent: the lender's gateway waits (its hello's dispatch pass is over, and sent nothing).
    await shardSettled(lender);
    await gw.expectNothingBeforeReply();
    expect(await lender.stats()).toMatchObject({ pending: 1, leases: 0, gateways: [{ credit: 1 }] });
    await runInDurableObject(lender, (_, state) => {
      state.storage.sql.exec("UPDATE pending SET lent_until = 1");
    });
    await runDurableObjectAlarm(lender);
    const assign = await gw.expect("assign");
    expect(assign.session.session_id).toBe(sessionId);
    gw.send({
      v: 1,
      type: "result",
      lease_id: assign.lease_id,
      result: resultFor(assign.session, lenderNode),
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
  });

  it("a loan that ran out while the borrower held it undispatched: when both copies run, the earlier is cancelled as the later is assigned", async () => {
    const { queue, sessionId, homeIndex, otherIndex, lender } = await oneSessionOnItsShard();
    // The borrower stored the session (no gateway of its own yet) but the settle was lost.
    const loan = await lender.steal(shardName(queue, otherIndex, SHARDS), 1);
    await env.QUEUE.getByName(shardName(queue, otherIndex, SHARDS)).enqueue([JSON.parse(loan.payloads[0]!)]);
    await runInDurableObject(lender, (_, state) => {
      state.storage.sql.exec("UPDATE pending SET lent_until = 1");
    });
    // The ledger still has it queued: the lender takes its copy back and dispatches it.
    await runDurableObjectAlarm(lender);
    const lenderNode = nodeOnShard(queue, homeIndex, "l");
    const gw = await gateways.join(queue, lenderNode, { credit: 1, welcome: false });
    await gw.expect("welcome");
    const first = await gw.expect("assign");
    expect(first.session.session_id).toBe(sessionId);
    // The borrower's gateway arrives and the borrower dispatches its copy too: the earlier lease
    // is told to stop at once, not when its result is refused.
    const borrowerNode = nodeOnShard(queue, otherIndex, "b");
    const borrower = await gateways.join(queue, borrowerNode, { credit: 1, welcome: false });
    await borrower.expect("welcome");
    const second = await borrower.expect("assign");
    expect(await gw.expect("cancel")).toMatchObject({
      lease_id: first.lease_id,
      session_id: sessionId,
      reason: expect.stringContaining("superseded"),
    });
    borrower.send({
      v: 1,
      type: "result",
      lease_id: second.lease_id,
      result: resultFor(second.session, borrowerNode),
    });
    expect((await borrower.expect("ack")).status).toBe("accepted");
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result: resultFor(first.session, lenderNode) });
    expect((await gw.expect("ack")).status).not.toBe("accepted");
  });

  it("cancelling a batch withdraws sessions leased through a steal", async () => {
    const queue = uniqueId("sharded");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 4 })]);
    const gw = await gateways.join(queue, nodeOnShard(queue, 1), { credit: 4, welcome: false });
    await gw.expect("welcome");
    const leases = new Set<string>();
    for (let i = 0; i < 4; i++) leases.add((await gw.expect("assign")).lease_id);
    const res = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(res.status).toBe(200);
    const cancelled = new Set<string>();
    for (let i = 0; i < 4; i++) cancelled.add((await gw.expect("cancel")).lease_id);
    expect(cancelled).toEqual(leases);
    await expect
      .poll(async () => (await shardStats(queue)).map((s) => s.leases + s.pending), POLL)
      .toEqual([0, 0, 0, 0]);
  });

  it("admin fan-out, listing and drain reach gateways on every shard", async () => {
    const queue = uniqueId("sharded");
    const nodes = [0, 1, 2, 3].map((i) => nodeOnShard(queue, i, `adm${i}`));
    const gws = await Promise.all(nodes.map((n) => gateways.join(queue, n, { credit: 0, welcome: false })));
    for (const [i, gw] of gws.entries()) expect((await gw.expect("welcome")).queue).toBe(`${queue}#${i}`);
    await expect
      .poll(
        async () => (await env.REGISTRY.getByName("global").listQueues()).filter((q) => q.startsWith(queue)),
        POLL,
      )
      .toHaveLength(4);

    const asAdmin = (path: string, body?: unknown) =>
      call(path, {
        method: "POST",
        headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
    const pending = asAdmin("/v1/admin/inference/pause", { timeout_seconds: 1 });
    for (const gw of gws) {
      const msg = await gw.expect("admin");
      expect(msg.action).toBe("pause");
      gw.send({
        v: 1,
        type: "admin_ack",
        request_id: msg.request_id,
        ok: true,
        paused: true,
        inflight: 0,
        policy_version: null,
      });
    }
    const res = await pending;
    expect(res.status).toBe(200);
    const body = (await res.json()) as { nodes: { node_id: string; ok: boolean; paused: boolean }[] };
    const mine = body.nodes.filter((n) => nodes.includes(n.node_id));
    expect(mine.map((n) => n.node_id).sort()).toEqual([...nodes].sort());
    for (const n of mine) expect(n).toMatchObject({ ok: true, paused: true });

    const listing = (await (await getAsTrainer("/v1/gateways")).json()) as {
      gateways: { node_id: string; queue: string; shard: string; connected: boolean }[];
      queues: { queue: string; shard: string }[];
    };
    for (const [i, node] of nodes.entries()) {
      expect(listing.gateways.find((g) => g.node_id === node)).toMatchObject({
        queue,
        shard: `${queue}#${i}`,
        connected: true,
      });
    }
    expect(listing.queues.filter((q) => q.queue === queue).map((q) => q.shard)).toEqual(
      shardsOf(queue, CONFIG),
    );

    const drain = asAdmin(`/v1/gateways/${nodes[3]}/drain`);
    const msg = await gws[3]!.expect("admin");
    expect(msg.action).toBe("drain");
    gws[3]!.send({
      v: 1,
      type: "admin_ack",
      request_id: msg.request_id,
      ok: true,
      paused: false,
      inflight: 0,
      policy_version: null,
    });
    const drained = await drain;
    expect(drained.status).toBe(200);
    expect(await drained.json()).toMatchObject({ node_id: nodes[3], queue: `${queue}#3`, draining: true });
  });

  it("routes by ?node_id= and refuses a hello naming another node", async () => {
    const queue = uniqueId("sharded");
    const bad = await call(`/v1/gateways/connect?queue=${queue}&node_id=${encodeURIComponent("no spaces")}`, {
      headers: { Upgrade: "websocket", Authorization: `Bearer ${TOKENS.gateway}` },
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^node_id:/);
    const gw = await Gateway.connect(queue, TOKENS.gateway, "node-x");
    gateways.track(gw);
    gw.hello("node-y", 0);
    expect(await gw.expect("error")).toMatchObject({ code: "node_id_mismatch" });
    await expect.poll(() => gw.closed?.code, POLL).toBe(4403);
    // Without a node id a gateway of a sharded queue lands on shard 0.
    const plain = await Gateway.connect(queue);
    gateways.track(plain);
    plain.hello("node-z", 0);
    expect((await plain.expect("welcome")).queue).toBe(`${queue}#0`);
  });

  it("an unsharded queue keeps its plain dispatcher name", async () => {
    const queue = uniqueId("plain");
    const gw = await gateways.join(queue, "node-p", { credit: 1, welcome: false });
    expect((await gw.expect("welcome")).queue).toBe(queue);
    const stats = await env.QUEUE.getByName(queue).stats();
    expect(stats).toMatchObject({ queue, shard: queue });
    expect(stats.gateways[0]).toMatchObject({ queue, shard: queue, node_id: "node-p" });
  });
});
