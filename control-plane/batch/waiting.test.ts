/**
 * Waiting for a gateway versus the run budget: a session may wait in the queue as long as the fleet
 * needs (the run budget `timeout_seconds` starts at INITIALIZING), unless the task sets
 * `queue_timeout_seconds`; a queue that has had no gateway at all for `POLAR_NO_GATEWAY_SECONDS`
 * (default LIMITS.noGatewaySeconds) ends its waiting sessions. Elapsed time is simulated by moving
 * every stored timestamp of a ledger (or dispatcher) back, then firing its alarm.
 */
import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { LIMITS, type SessionAssignment } from "../../protocol";
import { sessionShard, shardsOf } from "../queue/shards";
import {
  type Gateway,
  GatewayPool,
  getAsTrainer,
  POLL,
  postBatch,
  resultFor,
  resultsPage,
  submitBatch,
  task,
  uniqueId,
} from "../testing/fixtures";
import type { BatchDO } from "./batch-do";

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

const GRACE_MS = LIMITS.deadlineGraceSeconds * 1000;
const NO_GATEWAY_MS = LIMITS.noGatewaySeconds * 1000;

const results = async (batchId: string) => (await resultsPage(batchId)).results.map((r) => r.result);

function session(batchId: string, sessionId: string) {
  return env.BATCH.getByName(batchId).session(sessionId);
}

/** `ms` pass on the ledger: every stored time of its sessions moves back by `ms`. */
async function elapse(batchId: string, ms: number) {
  await runInDurableObject(env.BATCH.getByName(batchId), (_, state) => {
    state.storage.sql.exec(
      `UPDATE sessions SET created_at = created_at - ?1, updated_at = updated_at - ?1,
         queued_at = queued_at - ?1, assigned_at = assigned_at - ?1, started_at = started_at - ?1,
         deadline_at = deadline_at - ?1`,
      ms,
    );
  });
}

/**
 * Runs the ledger's alarm handler now and waits for it (its timers decide what is due). Called
 * directly: an alarm scheduled for now would also fire on its own, racing the test's reads.
 */
async function fireAlarm(batchId: string) {
  await runInDurableObject(env.BATCH.getByName(batchId), (instance: BatchDO) => instance.alarm());
}

function progress(gw: Gateway, assign: { lease_id: string; session: SessionAssignment }, status: string) {
  gw.send({
    v: 1,
    type: "progress",
    lease_id: assign.lease_id,
    session_id: assign.session.session_id,
    status,
    at: Date.now(),
  });
}

/** Reports INITIALIZING and waits until the ledger recorded it. */
async function initialize(
  batchId: string,
  gw: Gateway,
  assign: { lease_id: string; session: SessionAssignment },
) {
  progress(gw, assign, "INITIALIZING");
  await expect
    .poll(async () => (await session(batchId, assign.session.session_id))?.started_at, POLL)
    .not.toBeNull();
  return (await session(batchId, assign.session.session_id))!;
}

async function finish(gw: Gateway, nodeId: string, assign: { lease_id: string; session: SessionAssignment }) {
  gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result: resultFor(assign.session, nodeId) });
  expect((await gw.expect("ack")).status).toBe("accepted");
}

describe("a batch larger than the fleet", () => {
  it("the tail waits in the queue far past timeout_seconds and still completes; queued_ms is the ledger's wait", async () => {
    const queue = uniqueId("overflow");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 3, timeout_seconds: 1 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-o", 1);
    await gw.expect("welcome");
    const first = await gw.expect("assign");
    await initialize(batchId, gw, first);
    await finish(gw, "node-o", first);
    // The fleet is busy for ten minutes: far beyond the 1 s budget plus the 120 s grace.
    await elapse(batchId, 600_000);
    await fireAlarm(batchId);
    const status = (await (await getAsTrainer(`/v1/batches/${batchId}`)).json()) as {
      counts: Record<string, number>;
    };
    expect(status.counts).toMatchObject({ QUEUED: 2, TIMEOUT: 0, COMPLETED: 1 });
    const waiting = (await (await getAsTrainer(`/v1/sessions/${batchId}.0.1`)).json()) as {
      status: string;
      queued_ms: number;
      queued_at: number;
    };
    expect(waiting.status).toBe("QUEUED");
    expect(waiting.queued_ms).toBeGreaterThanOrEqual(600_000);
    for (let i = 0; i < 2; i++) {
      gw.send({ v: 1, type: "credit", grant: 1 });
      const next = await gw.expect("assign");
      await initialize(batchId, gw, next);
      await finish(gw, "node-o", next);
    }
    const all = await results(batchId);
    expect(all.map((r) => r.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED"]);
    const bySession = new Map(all.map((r) => [r.session_id, r]));
    // The gateway said queued_ms 1; the ledger's own measure (QUEUED → INITIALIZING) replaces it.
    expect(bySession.get(`${batchId}.0.0`)!.timing.queued_ms).toBeLessThan(600_000);
    expect(bySession.get(`${batchId}.0.1`)!.timing.queued_ms).toBeGreaterThanOrEqual(600_000);
    expect(bySession.get(`${batchId}.0.2`)!.timing.queued_ms).toBeGreaterThanOrEqual(600_000);
    // The other stage times are the gateway's.
    expect(bySession.get(`${batchId}.0.1`)!.timing.run_ms).toBe(4);
    const done = (await (await getAsTrainer(`/v1/sessions/${batchId}.0.2`)).json()) as { queued_ms: number };
    expect(done.queued_ms).toBe(bySession.get(`${batchId}.0.2`)!.timing.queued_ms);
  });

  it("counts the run budget from INITIALIZING: deadline = INIT + timeout_seconds + grace, however long the wait", async () => {
    const queue = uniqueId("budget");
    const batchId = await submitBatch(queue, [task("t", { timeout_seconds: 100 })]);
    const sessionId = `${batchId}.0.0`;
    const queued = (await session(batchId, sessionId))!;
    // Waiting: only the no-gateway check is armed (no queue_timeout_seconds).
    expect(queued.deadline_at! - queued.queued_at!).toBe(NO_GATEWAY_MS);
    const gw = await gateways.connect(queue);
    gw.hello("node-b", 0);
    await gw.expect("welcome");
    await elapse(batchId, 1_800_000);
    gw.send({ v: 1, type: "credit", grant: 1 });
    const assign = await gw.expect("assign");
    const started = await initialize(batchId, gw, assign);
    expect(started.deadline_at).toBe(started.started_at! + 100_000 + GRACE_MS);
    expect(started.queued_ms).toBeGreaterThanOrEqual(1_800_000);
    // One second short of budget + grace: still running.
    await elapse(batchId, 100_000 + GRACE_MS - 1000);
    await fireAlarm(batchId);
    expect((await session(batchId, sessionId))!.status).toBe("INITIALIZING");
    await elapse(batchId, 2000);
    await fireAlarm(batchId);
    expect(await gw.expect("cancel")).toMatchObject({ lease_id: assign.lease_id });
    const [result] = await results(batchId);
    expect(result).toMatchObject({ status: "TIMEOUT", metadata: { timeout_source: "session" } });
    expect(result!.timing.queued_ms).toBeGreaterThanOrEqual(1_800_000);
  });

  it("a retried attempt waits again with its own limits and gets a fresh budget from its own INITIALIZING", async () => {
    const queue = uniqueId("retry");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2, timeout_seconds: 50 })]);
    const sessionId = `${batchId}.0.0`;
    await elapse(batchId, 300_000);
    const first = await gateways.connect(queue);
    first.hello("node-r1", 1);
    await first.expect("welcome");
    const a1 = await first.expect("assign");
    await initialize(batchId, first, a1);
    first.close();
    const queueStub = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await queueStub.stats()).gateways[0]?.connected, POLL).toBe(false);
    await elapse(batchId, 40_000);
    await runInDurableObject(queueStub, (_, state) => {
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
    });
    await runDurableObjectAlarm(queueStub);
    await expect.poll(async () => (await session(batchId, sessionId))!.attempt, POLL).toBe(2);
    const requeued = (await session(batchId, sessionId))!;
    expect(requeued).toMatchObject({ status: "QUEUED", started_at: null });
    expect(requeued.deadline_at! - requeued.queued_at!).toBe(NO_GATEWAY_MS);
    const second = await gateways.connect(queue);
    second.hello("node-r2", 1);
    await second.expect("welcome");
    const a2 = await second.expect("assign");
    expect(a2.session.attempt).toBe(2);
    const restarted = await initialize(batchId, second, a2);
    // A fresh 50 s budget, although attempt 1 already spent 40 s of its own.
    expect(restarted.deadline_at).toBe(restarted.started_at! + 50_000 + GRACE_MS);
    await finish(second, "node-r2", a2);
    const [result] = await results(batchId);
    expect(result).toMatchObject({ status: "COMPLETED", attempt: 2 });
    // Both waits count: attempt 1's five minutes plus attempt 2's.
    expect(result!.timing.queued_ms).toBeGreaterThanOrEqual(300_000);
    expect(result!.timing.queued_ms).toBeLessThan(340_000);
  });
});

describe("queue_timeout_seconds", () => {
  it("ends sessions still waiting after queue_timeout_seconds as TIMEOUT (queue); a started one keeps its budget", async () => {
    const queue = uniqueId("qtimeout");
    const batchId = await submitBatch(queue, [
      task("t", { num_samples: 2, timeout_seconds: 600, queue_timeout_seconds: 60 }),
    ]);
    const waiting = (await session(batchId, `${batchId}.0.1`))!;
    expect(waiting.deadline_at! - waiting.queued_at!).toBe(60_000);
    const gw = await gateways.connect(queue);
    gw.hello("node-q", 1);
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    expect(assign.session.session_id).toBe(`${batchId}.0.0`);
    await initialize(batchId, gw, assign);
    // 50 s of the 60 s wait: real time also passes (the gateway's hello and INIT above), so the
    // first check keeps a 10 s margin on a loaded machine.
    await elapse(batchId, 50_000);
    await fireAlarm(batchId);
    expect((await session(batchId, `${batchId}.0.1`))!.status).toBe("QUEUED");
    await elapse(batchId, 11_000);
    await fireAlarm(batchId);
    const [timedOut] = await results(batchId);
    expect(timedOut).toMatchObject({
      session_id: `${batchId}.0.1`,
      status: "TIMEOUT",
      error: { kind: "timeout" },
      metadata: { timeout_source: "queue" },
    });
    expect(timedOut!.error!.message).toContain("queue_timeout_seconds (60 s)");
    expect(timedOut!.timing.queued_ms).toBeGreaterThanOrEqual(60_000);
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(0);
    // The session that reached INITIALIZING runs on under its own budget.
    expect((await session(batchId, `${batchId}.0.0`))!.status).toBe("INITIALIZING");
  });

  it("applies while the gateway holds the session before INITIALIZING, and cancels it there", async () => {
    const queue = uniqueId("qheld");
    const batchId = await submitBatch(queue, [task("t", { queue_timeout_seconds: 30 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-h", 1);
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    await elapse(batchId, 31_000);
    await fireAlarm(batchId);
    expect(await gw.expect("cancel")).toMatchObject({ lease_id: assign.lease_id });
    expect((await results(batchId))[0]).toMatchObject({
      status: "TIMEOUT",
      metadata: { timeout_source: "queue" },
    });
  });

  it.each([
    [0, "too small"],
    [-5, "too small"],
    [LIMITS.maxQueueTimeoutSeconds + 1, "too big"],
    ["60", "expected number"],
  ])("refuses queue_timeout_seconds %s with a 400 naming the field", async (value, words) => {
    const res = await postBatch({ tasks: [task("t", { queue_timeout_seconds: value as number })] });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; message: string } };
    expect(body.error.code).toBe("validation_failed");
    expect(body.error.message).toContain("tasks[0].queue_timeout_seconds");
    expect(body.error.message.toLowerCase()).toContain(words);
  });

  it("is in the OpenAPI document", async () => {
    const doc = JSON.stringify(await (await getAsTrainer("/openapi.json")).json());
    expect(doc).toContain('"queue_timeout_seconds"');
  });
});

describe("a queue without any gateway", () => {
  it("ends waiting sessions after POLAR_NO_GATEWAY_SECONDS with no gateway as TIMEOUT (no_gateway)", async () => {
    const queue = uniqueId("nogw");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 2, timeout_seconds: 5 })]);
    await elapse(batchId, NO_GATEWAY_MS - 1000);
    await fireAlarm(batchId);
    expect((await results(batchId)).length).toBe(0);
    await elapse(batchId, 2000);
    await fireAlarm(batchId);
    const all = await results(batchId);
    expect(all.map((r) => r.status)).toEqual(["TIMEOUT", "TIMEOUT"]);
    expect(all[0]).toMatchObject({ error: { kind: "timeout" }, metadata: { timeout_source: "no_gateway" } });
    expect(all[0]!.error!.message).toContain(`no gateway was connected to queue '${queue}'`);
    expect(all[0]!.error!.message).toContain("POLAR_NO_GATEWAY_SECONDS");
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(0);
  });

  it("a connected gateway keeps sessions waiting; after it leaves, the limit counts from when it left", async () => {
    const queue = uniqueId("gwleft");
    const gw = await gateways.connect(queue);
    gw.hello("node-l", 0);
    await gw.expect("welcome");
    const batchId = await submitBatch(queue, [task("t")]);
    const sessionId = `${batchId}.0.0`;
    await elapse(batchId, 2 * NO_GATEWAY_MS);
    await fireAlarm(batchId);
    const rearmed = (await session(batchId, sessionId))!;
    expect(rearmed.status).toBe("QUEUED");
    // Checked again one limit after now (the gateway is connected now).
    expect(rearmed.deadline_at!).toBeGreaterThanOrEqual(Date.now() + NO_GATEWAY_MS - 60_000);
    gw.close();
    const queueStub = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await queueStub.stats()).gateways[0]?.connected, POLL).toBe(false);
    // It left half a limit ago: not yet.
    await runInDurableObject(queueStub, (_, state) => {
      state.storage.sql.exec("UPDATE gateways SET disconnected_at = disconnected_at - ?", NO_GATEWAY_MS / 2);
    });
    await elapse(batchId, NO_GATEWAY_MS);
    await fireAlarm(batchId);
    const again = (await session(batchId, sessionId))!;
    expect(again.status).toBe("QUEUED");
    expect(again.deadline_at!).toBeLessThanOrEqual(Date.now() + NO_GATEWAY_MS / 2 + 1000);
    // It left a whole limit ago: the session ends.
    await runInDurableObject(queueStub, (_, state) => {
      state.storage.sql.exec(
        "UPDATE gateways SET disconnected_at = disconnected_at - ?",
        NO_GATEWAY_MS / 2 + 1000,
      );
    });
    await elapse(batchId, NO_GATEWAY_MS);
    await fireAlarm(batchId);
    expect((await results(batchId))[0]).toMatchObject({
      status: "TIMEOUT",
      metadata: { timeout_source: "no_gateway" },
    });
  });

  it("on a sharded queue, a gateway on any shard counts for sessions homed on every shard", async () => {
    const queue = uniqueId("sharded-wait");
    const gw = await gateways.connect(queue, { nodeId: "node-s" });
    gw.hello("node-s", 0);
    await gw.expect("welcome");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 40 })]);
    // The sessions are homed on every shard, not only on the gateway's.
    const homes = new Set(
      Array.from({ length: 40 }, (_, i) => sessionShard(queue, `${batchId}.0.${i}`, env.POLAR_QUEUE_SHARDS)),
    );
    expect(homes.size).toBe(shardsOf(queue, env.POLAR_QUEUE_SHARDS).length);
    expect(homes.size).toBeGreaterThan(1);
    await elapse(batchId, 2 * NO_GATEWAY_MS);
    await fireAlarm(batchId);
    const status = (await (await getAsTrainer(`/v1/batches/${batchId}`)).json()) as {
      counts: Record<string, number>;
    };
    expect(status.counts).toMatchObject({ QUEUED: 40, TIMEOUT: 0 });
  });
});
