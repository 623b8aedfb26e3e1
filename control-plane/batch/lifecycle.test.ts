import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { ArtifactRef, BatchStatusBody } from "../../protocol";
import { tokenHash } from "../auth";
import {
  call,
  type Gateway,
  GatewayPool,
  getAsTrainer,
  POLL,
  postBatch,
  resultFor,
  resultsPage,
  shardSettled,
  submitBatch,
  TOKENS,
  task,
  uniqueId,
} from "../testing/fixtures";
import type { BatchDO } from "./batch-do";

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

async function status(batchId: string) {
  return BatchStatusBody.parse(await (await getAsTrainer(`/v1/batches/${batchId}`)).json());
}

function asAdmin(path: string, init: RequestInit = {}) {
  return call(path, { ...init, headers: { Authorization: `Bearer ${TOKENS.admin}`, ...init.headers } });
}

/** Reports INITIALIZING for an assignment and waits until the ledger counts it as started. */
async function started(
  batchId: string,
  gw: Gateway,
  assign: { lease_id: string; session: { session_id: string } },
) {
  gw.send({
    v: 1,
    type: "progress",
    lease_id: assign.lease_id,
    session_id: assign.session.session_id,
    status: "INITIALIZING",
    at: Date.now(),
  });
  await expect.poll(async () => (await status(batchId)).counts.INITIALIZING, POLL).toBe(1);
}

/** Makes every timer of a ledger due now and fires its alarm. */
async function fireLedgerAlarm(batchId: string, sql: string) {
  const stub = env.BATCH.getByName(batchId);
  await runInDurableObject(stub, (_, state) => {
    state.storage.sql.exec(sql);
  });
  await runInDurableObject(stub, (_, state) => state.storage.setAlarm(Date.now()));
  await runDurableObjectAlarm(stub);
}

describe("deadlines (I3)", () => {
  it("ends a session no gateway picked up within queue_timeout_seconds as TIMEOUT", async () => {
    const queue = uniqueId("nogw");
    const batchId = await submitBatch(queue, [
      task("t", { num_samples: 2, timeout_seconds: 5, queue_timeout_seconds: 5 }),
    ]);
    await fireLedgerAlarm(batchId, "UPDATE sessions SET deadline_at = 1, queued_at = 1");
    const all = await resultsPage(batchId);
    expect(all.done).toBe(true);
    expect(all.results.map((r) => r.result.status)).toEqual(["TIMEOUT", "TIMEOUT"]);
    expect(all.results[0]!.result.error).toMatchObject({ kind: "timeout" });
    expect(all.results[0]!.result.metadata).toMatchObject({ timeout_source: "queue" });
    // The queue no longer offers them.
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(0);
  });

  it("starts the budget at INITIALIZING and cancels the gateway's lease when it runs out", async () => {
    const queue = uniqueId("budget");
    const batchId = await submitBatch(queue, [task("t", { timeout_seconds: 100 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-d", 1);
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    const before = await env.BATCH.getByName(batchId).session(assign.session.session_id);
    gw.send({
      v: 1,
      type: "progress",
      lease_id: assign.lease_id,
      session_id: assign.session.session_id,
      status: "INITIALIZING",
      at: Date.now(),
    });
    await expect
      .poll(
        async () => (await env.BATCH.getByName(batchId).session(assign.session.session_id))?.started_at,
        POLL,
      )
      .not.toBeNull();
    const after = await env.BATCH.getByName(batchId).session(assign.session.session_id);
    expect(before!.started_at).toBeNull();
    expect(after!.deadline_at!).toBe(after!.started_at! + 100_000 + 120_000);
    await fireLedgerAlarm(batchId, "UPDATE sessions SET deadline_at = 1");
    expect(await gw.expect("cancel")).toMatchObject({ lease_id: assign.lease_id });
    expect((await resultsPage(batchId)).results[0]!.result).toMatchObject({
      status: "TIMEOUT",
      metadata: { timeout_source: "session" },
    });
    // A late result from the gateway is a duplicate, accepted once only.
    gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result: resultFor(assign.session, "node-d") });
    expect((await gw.expect("ack")).status).toBe("duplicate");
  });
  it("pauses the budget from READY to RUNNING: waiting for a RUN slot is not charged", async () => {
    const queue = uniqueId("ready");
    const batchId = await submitBatch(queue, [task("t", { timeout_seconds: 100 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-r", 1);
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    const id = assign.session.session_id;
    const ledger = env.BATCH.getByName(batchId);
    const report = (status: "INITIALIZING" | "READY" | "RUNNING") =>
      gw.send({ v: 1, type: "progress", lease_id: assign.lease_id, session_id: id, status, at: Date.now() });
    report("INITIALIZING");
    await expect.poll(async () => (await ledger.session(id))?.status, POLL).toBe("INITIALIZING");
    const init = (await ledger.session(id))!;
    const budget = init.deadline_at! - init.started_at!;
    expect(budget).toBe(100_000 + 120_000);
    // 30 s of INIT are charged.
    await runInDurableObject(ledger, (_, state) => {
      state.storage.sql.exec("UPDATE sessions SET deadline_at = deadline_at - 30000");
    });
    report("READY");
    await expect.poll(async () => (await ledger.session(id))?.status, POLL).toBe("READY");
    const left = () =>
      runInDurableObject(
        ledger,
        (_, state) =>
          state.storage.sql.exec<{ left: number | null }>("SELECT budget_left_ms AS left FROM sessions").one()
            .left,
      );
    const kept = (await left())!;
    expect(kept).toBeGreaterThan(budget - 30_000 - 5_000);
    expect(kept).toBeLessThanOrEqual(budget - 30_000);
    // While READY the ledger holds the session only to a day's backstop: a long wait is no TIMEOUT.
    const ready = (await ledger.session(id))!;
    expect(ready.deadline_at! - Date.now()).toBeGreaterThan(86_400_000);
    report("RUNNING");
    await expect.poll(async () => (await ledger.session(id))?.status, POLL).toBe("RUNNING");
    const running = (await ledger.session(id))!;
    expect(await left()).toBeNull();
    // The clock runs again with what was left, however long READY lasted.
    expect(running.deadline_at! - Date.now()).toBeGreaterThan(kept - 5_000);
    expect(running.deadline_at! - Date.now()).toBeLessThanOrEqual(kept);
  });
});

describe("lost gateways: grace, requeue, max_attempts", () => {
  it("requeues a dropped gateway's session after the grace with attempt + 1; a second gateway finishes it", async () => {
    const queue = uniqueId("lost");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const first = await gateways.connect(queue);
    first.hello("node-1", 1);
    await first.expect("welcome");
    const a1 = await first.expect("assign");
    expect(a1.session.attempt).toBe(1);
    await started(batchId, first, a1);
    first.close();
    const queueStub = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await queueStub.stats()).gateways[0]?.connected, POLL).toBe(false);
    const second = await gateways.connect(queue);
    second.hello("node-2", 1);
    await second.expect("welcome");
    // The lease is still in its grace period: held on the queue and the ledger, not requeued.
    await shardSettled(queueStub);
    await second.expectNothingBeforeReply();
    expect(await queueStub.stats()).toMatchObject({ pending: 0, leases: 1 });
    expect(await env.BATCH.getByName(batchId).session(a1.session.session_id)).toMatchObject({
      status: "INITIALIZING",
      attempt: 1,
      lease_id: a1.lease_id,
    });
    await runInDurableObject(queueStub, (_, state) => {
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
    });
    await runDurableObjectAlarm(queueStub);
    const a2 = await second.expect("assign");
    expect(a2.session).toMatchObject({ session_id: a1.session.session_id, attempt: 2 });
    second.send({ v: 1, type: "result", lease_id: a2.lease_id, result: resultFor(a2.session, "node-2") });
    expect((await second.expect("ack")).status).toBe("accepted");
    // The first gateway's late result under the old lease is stale.
    const late = await gateways.connect(queue);
    late.hello("node-1", 0);
    await late.expect("welcome");
    late.send({ v: 1, type: "result", lease_id: a1.lease_id, result: resultFor(a1.session, "node-1") });
    expect((await late.expect("ack")).status).toBe("duplicate");
    const results = await resultsPage(batchId);
    expect(results.results).toHaveLength(1);
    expect(results.results[0]!.result).toMatchObject({ node_id: "node-2", attempt: 2, status: "COMPLETED" });
    expect((await queueStub.stats()).counters.requeued_leases).toBe(1);
  });

  it("a reconnect within the grace keeps the lease", async () => {
    const queue = uniqueId("keep");
    await submitBatch(queue, [task("t")]);
    const gw = await gateways.connect(queue);
    gw.hello("node-k", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    gw.close();
    await expect
      .poll(async () => (await env.QUEUE.getByName(queue).stats()).gateways[0]?.connected, POLL)
      .toBe(false);
    const again = await gateways.connect(queue);
    again.hello("node-k", 0, [{ lease_id: a.lease_id, session_id: a.session.session_id }]);
    expect((await again.expect("welcome")).kept_leases).toEqual([a.lease_id]);
    const rows = await runInDurableObject(env.QUEUE.getByName(queue), (_, state) =>
      state.storage.sql.exec("SELECT lease_id, lost_at FROM leases").toArray(),
    );
    expect(rows).toEqual([{ lease_id: a.lease_id, lost_at: null }]);
  });

  it("ends the session as ERROR kind infra once max_attempts is used up, and retries infra errors", async () => {
    const queue = uniqueId("infra");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-i", 2);
    await gw.expect("welcome");
    const a1 = await gw.expect("assign");
    // An infra failure reported by the gateway (runtime failed to start) is retried (I4).
    const infra = {
      ...resultFor(a1.session, "node-i"),
      status: "ERROR" as const,
      error: { kind: "infra" as const, message: "runtime failed to start" },
    };
    gw.send({ v: 1, type: "result", lease_id: a1.lease_id, result: infra });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const a2 = await gw.expect("assign");
    expect(a2.session.attempt).toBe(2);
    await started(batchId, gw, a2);
    // The second attempt's gateway disappears mid-run: no attempts left → ERROR infra.
    gw.close();
    const queueStub = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await queueStub.stats()).gateways[0]?.connected, POLL).toBe(false);
    await runInDurableObject(queueStub, (_, state) => {
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
    });
    await runDurableObjectAlarm(queueStub);
    const results = await resultsPage(batchId);
    expect(results.done).toBe(true);
    expect(results.results[0]!.result).toMatchObject({
      status: "ERROR",
      attempt: 2,
      error: { kind: "infra" },
    });
    expect(results.results[0]!.result.error!.message).toContain("max_attempts 2");
  });

  it("a lease lost before INITIALIZING is requeued without using up an attempt, at most max_attempts times", async () => {
    // An assign into a socket that just died (or a gateway killed while the session waited in its
    // INIT queue): nothing of the attempt ran, so it keeps its number; a task whose assignment
    // itself kills gateways still ends, once it was lost unstarted max_attempts times.
    const queue = uniqueId("unstarted");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const queueStub = env.QUEUE.getByName(queue);
    const lose = async (node: string) => {
      const gw = await gateways.connect(queue);
      gw.hello(node, 1);
      await gw.expect("welcome");
      const a = await gw.expect("assign");
      gw.close();
      await expect
        .poll(async () => (await queueStub.stats()).gateways.find((g) => g.node_id === node)?.connected, POLL)
        .toBe(false);
      await runInDurableObject(queueStub, (_, state) => {
        state.storage.sql.exec("UPDATE leases SET lost_at = 1");
      });
      await runDurableObjectAlarm(queueStub);
      return a;
    };
    const attempts = [];
    for (const node of ["node-u1", "node-u2", "node-u3", "node-u4"])
      attempts.push((await lose(node)).session.attempt);
    // Two free requeues (max_attempts 2), then the losses count: attempt 2, then no attempts left.
    expect(attempts).toEqual([1, 1, 1, 2]);
    const results = await resultsPage(batchId);
    expect(results.done).toBe(true);
    expect(results.results[0]!.result).toMatchObject({
      status: "ERROR",
      attempt: 2,
      error: { kind: "infra" },
    });
  });
});

describe("configuration errors", () => {
  it("are never retried, are counted in the batch status, and fail the upstream task", async () => {
    const queue = uniqueId("conf");
    const taskId = uniqueId("conf-task");
    // Through the upstream route, so its rendering is checked too (batch id rollout:<task_id>).
    const submitted = await call("/rollout/task/submit", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
      body: JSON.stringify({ ...task(taskId, { num_samples: 2, max_attempts: 3 }), queue }),
    });
    expect(submitted.status).toBe(200);
    const batchId = `rollout:${taskId}`;
    const gw = await gateways.connect(queue);
    gw.hello("node-c", 2);
    await gw.expect("welcome");
    const first = await gw.expect("assign");
    const second = await gw.expect("assign");
    const configuration = {
      ...resultFor(first.session, "node-c"),
      status: "ERROR" as const,
      reward: null,
      error: { kind: "configuration" as const, message: "evaluator.strategy: cannot import '../x.mjs'" },
    };
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result: configuration });
    expect((await gw.expect("ack")).status).toBe("accepted");
    gw.send({ v: 1, type: "result", lease_id: second.lease_id, result: resultFor(second.session, "node-c") });
    expect((await gw.expect("ack")).status).toBe("accepted");
    // No re-assign of the configuration error: the ledger sent nothing back to the queue (a
    // requeue would wait there as pending: the gateway has no credit left).
    await expect.poll(() => env.BATCH.getByName(batchId).outboxSize(), POLL).toBe(0);
    const confQueue = env.QUEUE.getByName(queue);
    await shardSettled(confQueue);
    expect(await confQueue.stats()).toMatchObject({ pending: 0, leases: 0 });
    await gw.expectNothingBeforeReply();
    // Ended at once on attempt 1: no second assign for the same session, whatever max_attempts says.
    const results = await resultsPage(batchId);
    expect(results.done).toBe(true);
    const ended = results.results.find((r) => r.result.session_id === first.session.session_id)!.result;
    expect(ended).toMatchObject({ status: "ERROR", attempt: 1, error: { kind: "configuration" } });
    const body = await status(batchId);
    expect(body.errors).toEqual({ infra: 0, agent: 0, configuration: 1, timeout: 0, cancelled: 0 });
    expect(body.counts.ERROR).toBe(1);
    const counters = await env.BATCH.getByName(batchId).counters();
    expect(counters.requeued_sessions).toBe(0);
    const upstream = (await (
      await call(`/rollout/task/${taskId}`, { headers: { Authorization: `Bearer ${TOKENS.trainer}` } })
    ).json()) as { status: string; completed_sessions: number };
    expect(upstream).toMatchObject({ status: "failed", completed_sessions: 2 });
    const overview = (await (
      await call("/rollout/status", { headers: { Authorization: `Bearer ${TOKENS.trainer}` } })
    ).json()) as { tasks: Record<string, string> };
    expect(overview.tasks[taskId]).toBe("failed");
  });
});

describe("cancel and early stop", () => {
  it("cancels a batch idempotently; its sessions end CANCELLED once; the id cannot be resubmitted", async () => {
    const queue = uniqueId("cancel");
    const body = { tasks: [task("t", { num_samples: 2 })] };
    const batchId = uniqueId("b");
    expect((await postBatch({ batch_id: batchId, queue, ...body })).status).toBe(201);
    const gw = await gateways.connect(queue);
    gw.hello("node-x", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    const del = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(await del.json()).toMatchObject({ status: "cancelled", cancelled_sessions: 2 });
    expect(await gw.expect("cancel")).toMatchObject({ lease_id: a.lease_id });
    const again = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(await again.json()).toMatchObject({ cancelled_sessions: 0 });
    const results = await resultsPage(batchId);
    expect(results.results.map((r) => r.result.status)).toEqual(["CANCELLED", "CANCELLED"]);
    expect(results.results[0]!.result.error?.kind).toBe("cancelled");
    expect((await status(batchId)).cancelled_at).toBeTypeOf("number");
    const resubmit = await postBatch({ batch_id: batchId, queue, ...body });
    expect(resubmit.status).toBe(409);
    // Cancelling an id never submitted leaves a tombstone.
    const ghost = uniqueId("ghost");
    expect(
      (
        await call(`/v1/batches/${ghost}`, {
          method: "DELETE",
          headers: { Authorization: `Bearer ${TOKENS.trainer}` },
        })
      ).status,
    ).toBe(200);
    expect((await postBatch({ batch_id: ghost, queue, ...body })).status).toBe(409);
  });

  it("cancels one task and leaves the others running", async () => {
    const queue = uniqueId("cancel-task");
    const batchId = await submitBatch(queue, [task("keep"), task("drop", { num_samples: 2 })]);
    const res = await call(`/v1/batches/${batchId}/tasks/drop`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(await res.json()).toMatchObject({ task_id: "drop", cancelled_sessions: 2 });
    const s = await status(batchId);
    expect(s.tasks.map((t) => [t.task_id, t.counts.CANCELLED, t.counts.QUEUED])).toEqual([
      ["keep", 0, 1],
      ["drop", 2, 0],
    ]);
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(1);
    const missing = await call(`/v1/batches/${batchId}/tasks/nope`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(missing.status).toBe(404);
  });

  it("early stop: once enough sessions are usable, stragglers end as ERROR with metadata", async () => {
    const queue = uniqueId("early");
    const batchId = await submitBatch(queue, [
      task("t", { num_samples: 3, early_stop_min_usable_sessions: 1 }),
    ]);
    const gw = await gateways.connect(queue);
    gw.hello("node-e", 3);
    await gw.expect("welcome");
    const assigns = [await gw.expect("assign"), await gw.expect("assign"), await gw.expect("assign")];
    const [first] = assigns;
    gw.send({ v: 1, type: "result", lease_id: first!.lease_id, result: resultFor(first!.session, "node-e") });
    const cancelled = new Set<string>();
    for (let i = 0; i < 3; i++) {
      const m = await gw.next();
      if (m.type === "cancel") cancelled.add(m.lease_id);
      else expect(m).toMatchObject({ type: "ack", status: "accepted" });
    }
    expect(cancelled).toEqual(new Set([assigns[1]!.lease_id, assigns[2]!.lease_id]));
    const results = await resultsPage(batchId);
    expect(results.done).toBe(true);
    const stopped = results.results.filter((r) => r.result.status === "ERROR");
    expect(stopped).toHaveLength(2);
    expect(stopped[0]!.result.error?.kind).toBe("cancelled");
    expect(stopped[0]!.result.metadata).toMatchObject({
      early_stop_cancelled: true,
      fully_masked: true,
      early_stop_min_usable_sessions: 1,
      early_stop_usable_sessions: 1,
    });
  });
});

describe("callbacks", () => {
  it("refuses private callback hosts outside dev, naming the field", async () => {
    const res = await postBatch({ tasks: [task("t", { callback_url: "http://127.0.0.1:9/cb" })] });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toMatch(/^tasks\[0\]\.callback_url: host 127\.0\.0\.1/);
  });

  it("POSTs the task result when the group completes, retrying with the same Idempotency-Key", async () => {
    const queue = uniqueId("cb");
    const batchId = await submitBatch(queue, [task("t", { callback_url: "https://trainer.example/cb" })]);
    const stub = env.BATCH.getByName(batchId);
    const seen: { key: string | null; body: { task_id: string; status: string; results: unknown[] } }[] = [];
    await runInDurableObject(stub, (instance: BatchDO) => {
      instance.callbackFetch = async (_url, init) => {
        const headers = new Headers(init?.headers);
        seen.push({ key: headers.get("Idempotency-Key"), body: JSON.parse(String(init?.body)) });
        return new Response("busy", { status: seen.length === 1 ? 503 : 200 });
      };
    });
    const gw = await gateways.connect(queue);
    gw.hello("node-cb", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: resultFor(a.session, "node-cb") });
    await gw.expect("ack");
    await expect.poll(() => seen.length, POLL).toBe(1);
    expect(await stub.callbackState()).toMatchObject([
      { attempts: 1, delivered: false, last_error: "HTTP 503" },
    ]);
    await fireLedgerAlarm(batchId, "UPDATE callbacks SET next_attempt_at = 1");
    // The alarm may already have fired on its own before runDurableObjectAlarm: wait for it.
    await expect.poll(() => seen.length, POLL).toBe(2);
    expect(seen[1]!.key).toBe(`${batchId}:t`);
    expect(seen[0]!.key).toBe(seen[1]!.key);
    expect(seen[1]!.body).toMatchObject({ task_id: "t", status: "completed" });
    expect(seen[1]!.body.results).toHaveLength(1);
    await expect.poll(async () => (await stub.callbackState())[0]?.delivered, POLL).toBe(true);
    expect(await stub.callbackState()).toMatchObject([{ attempts: 2, delivered: true }]);
  });
  it("a callback whose POST is still out when the next result arrives is sent once", async () => {
    // Each recorded result starts a callback pass; the first task's row stays due until its
    // answer is recorded, so a second pass used to POST it again (both answered 200).
    const queue = uniqueId("cb1");
    const batchId = await submitBatch(queue, [
      task("t0", { callback_url: "https://trainer.example/cb" }),
      task("t1", { callback_url: "https://trainer.example/cb" }),
    ]);
    const stub = env.BATCH.getByName(batchId);
    const posted: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    await runInDurableObject(stub, (instance: BatchDO) => {
      instance.callbackFetch = async (_url, init) => {
        const { task_id } = JSON.parse(String(init?.body)) as { task_id: string };
        posted.push(task_id);
        if (task_id === "t0") await held;
        return new Response("ok");
      };
    });
    const gw = await gateways.connect(queue);
    gw.hello("node-cb1", 2);
    await gw.expect("welcome");
    const first = await gw.expect("assign");
    const second = await gw.expect("assign");
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result: resultFor(first.session, "node-cb1") });
    await gw.expect("ack");
    await expect.poll(() => posted.length, POLL).toBe(1);
    gw.send({
      v: 1,
      type: "result",
      lease_id: second.lease_id,
      result: resultFor(second.session, "node-cb1"),
    });
    await gw.expect("ack");
    release();
    await expect.poll(async () => (await stub.callbackState()).every((c) => c.delivered), POLL).toBe(true);
    expect(posted.sort()).toEqual(["t0", "t1"]);
    expect(await stub.callbackState()).toMatchObject([
      { attempts: 1, delivered: true },
      { attempts: 1, delivered: true },
    ]);
  });
});

describe("artifacts in R2", () => {
  it("stores an uploaded trajectory under the lease and serves results with it spliced in", async () => {
    const queue = uniqueId("r2");
    const batchId = await submitBatch(queue, [task("t")]);
    const gw = await gateways.connect(queue);
    gw.hello("node-r2", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    const full = resultFor(a.session, "node-r2");
    const put = (kind: string, lease: string, body: string) =>
      call(`/v1/sessions/${a.session.session_id}/artifacts/${kind}?lease_id=${lease}`, {
        method: "PUT",
        headers: { Authorization: `Bearer ${TOKENS.gateway}`, "Content-Type": "application/json" },
        body,
      });
    expect((await put("trajectory", "l_other", JSON.stringify(full.trajectory))).status).toBe(409);
    expect((await put("bogus", a.lease_id, "{}")).status).toBe(400);
    const trainerPut = await call(
      `/v1/sessions/${a.session.session_id}/artifacts/trajectory?lease_id=${a.lease_id}`,
      {
        method: "PUT",
        headers: { Authorization: `Bearer ${TOKENS.trainer}` },
        body: "{}",
      },
    );
    expect(trainerPut.status).toBe(401);
    const uploaded = await put("trajectory", a.lease_id, JSON.stringify(full.trajectory));
    expect(uploaded.status).toBe(201);
    const ref = ArtifactRef.parse(await uploaded.json());
    expect(ref.key).toBe(`batches/${batchId}/sessions/${a.session.session_id}/${a.lease_id}/trajectory.json`);
    const completions = ArtifactRef.parse(
      await (await put("completions", a.lease_id, '[{"completion_id":"c1"}]')).json(),
    );
    const slim = { ...full, trajectory: { ...full.trajectory, traces: [] } };
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: slim,
      trajectory_ref: ref,
      completions_ref: completions,
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const results = await resultsPage(batchId);
    // As sent, but for queued_ms: the ledger's own measure of the wait for a gateway.
    const queuedMs = results.results[0]!.result.timing.queued_ms;
    expect(results.results[0]!.result).toEqual({ ...full, timing: { ...full.timing, queued_ms: queuedMs } });
    const session = (await (await getAsTrainer(`/v1/sessions/${a.session.session_id}`)).json()) as Record<
      string,
      unknown
    >;
    expect(session).toMatchObject({
      status: "COMPLETED",
      attempt: 1,
      has_completions: true,
      queued_ms: queuedMs,
      result: { ...full, timing: { ...full.timing, queued_ms: queuedMs } },
    });
    expect(await (await getAsTrainer(`/v1/sessions/${a.session.session_id}/trajectory`)).json()).toEqual(
      full.trajectory,
    );
    expect(await (await getAsTrainer(`/v1/sessions/${a.session.session_id}/completions`)).json()).toEqual([
      { completion_id: "c1" },
    ]);
    expect((await getAsTrainer(`/v1/sessions/${batchId}.9.9`)).status).toBe(404);
  });
});

describe("results stream", () => {
  it("long-polls with wait= until a result arrives, and streams SSE resumable by Last-Event-ID", async () => {
    const queue = uniqueId("poll");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 2 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-p", 2);
    await gw.expect("welcome");
    const a1 = await gw.expect("assign");
    const a2 = await gw.expect("assign");
    const waiting = resultsPage(batchId, "?after=0&wait=10");
    gw.send({ v: 1, type: "result", lease_id: a1.lease_id, result: resultFor(a1.session, "node-p") });
    const got = await waiting;
    expect(got.results.map((r) => r.seq)).toEqual([1]);
    gw.send({ v: 1, type: "result", lease_id: a2.lease_id, result: resultFor(a2.session, "node-p") });
    await gw.expect("ack");
    await gw.expect("ack");
    const sse = await call(`/v1/batches/${batchId}/results`, {
      headers: {
        Authorization: `Bearer ${TOKENS.trainer}`,
        Accept: "text/event-stream",
        "Last-Event-ID": "1",
      },
    });
    expect(sse.headers.get("Content-Type")).toContain("text/event-stream");
    const text = await sse.text();
    expect(text).toContain("id: 2\n");
    expect(text).not.toContain("id: 1\n");
    expect(text).toContain("event: done");
  });
});

describe("admin, drain, per-gateway tokens, limits", () => {
  it("fans pause out to every gateway and reports each ack; 502 when all fail, 200 when one succeeds", async () => {
    const queue = uniqueId("admin");
    const nodes = ["node-adm", "node-adm-b"];
    const gws: Gateway[] = [];
    for (const node of nodes) {
      const gw = await gateways.connect(queue);
      gw.hello(node, 0);
      await gw.expect("welcome");
      gws.push(gw);
    }
    // Wait until the registry knows the queue (recorded after welcome).
    await expect
      .poll(async () => (await env.REGISTRY.getByName("global").listQueues()).includes(queue), POLL)
      .toBe(true);
    type Fanout = { ok: boolean; nodes: { node_id: string; ok: boolean; paused: boolean }[] };
    /** Sends `path`, answers each gateway's admin message with its `ok`, returns status and nodes. */
    const fanOut = async (path: string, body: object, oks: boolean[]) => {
      const pending = asAdmin(path, { method: "POST", body: JSON.stringify(body) });
      for (const [i, gw] of gws.entries()) {
        const msg = await gw.expect("admin");
        gw.send({
          v: 1,
          type: "admin_ack",
          request_id: msg.request_id,
          ok: oks[i],
          paused: true,
          inflight: 0,
          policy_version: null,
          ...(oks[i] ? {} : { error: "engine unreachable" }),
        });
      }
      const res = await pending;
      const json = (await res.json()) as Fanout;
      return { status: res.status, ok: json.ok, mine: json.nodes.filter((n) => nodes.includes(n.node_id)) };
    };
    const byNode = (mine: Fanout["nodes"]) =>
      Object.fromEntries(mine.map((n) => [n.node_id, n.ok] as const).sort(([a], [b]) => a.localeCompare(b)));
    const paused = await fanOut("/v1/admin/inference/pause", { timeout_seconds: 1 }, [true, true]);
    expect(paused.status).toBe(200);
    expect(paused.ok).toBe(true);
    expect(byNode(paused.mine)).toEqual({ "node-adm": true, "node-adm-b": true });
    expect(paused.mine.every((n) => n.paused)).toBe(true);
    // One gateway failing its ack: reported, but not a 502 while another succeeded.
    const one = await fanOut("/v1/admin/inference/resume", {}, [false, true]);
    expect(one).toMatchObject({ status: 200, ok: false });
    expect(byNode(one.mine)).toEqual({ "node-adm": false, "node-adm-b": true });
    // Every gateway failing its ack: 502, each failure reported (the fence is stored all the same).
    const all = await fanOut("/v1/admin/inference/resume", {}, [false, false]);
    expect(all).toMatchObject({ status: 502, ok: false });
    expect(byNode(all.mine)).toEqual({ "node-adm": false, "node-adm-b": false });
    expect(
      (
        await call("/v1/admin/inference/resume", {
          method: "POST",
          headers: { Authorization: `Bearer ${TOKENS.trainer}` },
        })
      ).status,
    ).toBe(401);
    const bad = await asAdmin("/v1/admin/policy_version", { method: "POST", body: "{}" });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/^policy_version:/);
  });

  it("drains a gateway: admin drain message, and no new sessions", async () => {
    const queue = uniqueId("drain");
    const gw = await gateways.connect(queue);
    gw.hello("node-drain", 0);
    await gw.expect("welcome");
    await expect
      .poll(async () => env.REGISTRY.getByName("global").queueOfNode("node-drain"), POLL)
      .toBe(queue);
    const pending = asAdmin("/v1/gateways/node-drain/drain", { method: "POST" });
    const msg = await gw.expect("admin");
    expect(msg.action).toBe("drain");
    gw.send({
      v: 1,
      type: "admin_ack",
      request_id: msg.request_id,
      ok: true,
      paused: false,
      inflight: 0,
      policy_version: null,
    });
    expect((await pending).status).toBe(200);
    gw.send({ v: 1, type: "credit", grant: 2 });
    const drained = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await drained.stats()).gateways[0]?.credit, POLL).toBe(2);
    await submitBatch(queue, [task("t")]);
    // Delivered to the queue, and its dispatch passes are over: the session waits, unsent.
    await shardSettled(drained);
    await gw.expectNothingBeforeReply();
    expect(await drained.stats()).toMatchObject({ pending: 1, leases: 0, gateways: [{ credit: 2 }] });
    const list = (await (await getAsTrainer("/v1/gateways")).json()) as {
      gateways: { node_id: string; draining: boolean }[];
    };
    expect(list.gateways.find((g) => g.node_id === "node-drain")).toMatchObject({ draining: true });
  });

  it("per-gateway tokens: registered as hashes, bound to their node id, refused elsewhere", async () => {
    const token = `gw_node-tok.${"A".repeat(32)}`;
    const reg = await asAdmin("/v1/admin/gateway_tokens", {
      method: "POST",
      body: JSON.stringify({ node_id: "node-tok", sha256: await tokenHash(token) }),
    });
    expect(reg.status).toBe(201);
    const queue = uniqueId("tok");
    const gw = await gateways.connect(queue, { token });
    gw.hello("node-tok", 0);
    await gw.expect("welcome");
    const impostor = await gateways.connect(queue, { token });
    impostor.hello("node-other", 0);
    expect(await impostor.expect("error")).toMatchObject({ code: "node_id_mismatch" });
    expect((await postBatch({ tasks: [task("t")] }, token)).status).toBe(401);
    const wrong = await call(`/v1/gateways/connect?queue=${queue}`, {
      headers: { Upgrade: "websocket", Authorization: `Bearer gw_node-tok.${"B".repeat(32)}` },
    });
    expect(wrong.status).toBe(401);
  });

  it("answers 429 with Retry-After when a queue is full", async () => {
    const queue = uniqueId("full");
    await runInDurableObject(env.QUEUE.getByName(queue), (_, state) => {
      state.storage.sql.exec(
        `WITH RECURSIVE n(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM n WHERE x < 100000)
         INSERT INTO pending (session_id, batch_id, attempt, priority, payload, enqueued_at)
         SELECT 'filler.' || x, 'filler', 1, 0, '{}', 0 FROM n`,
      );
    });
    const res = await postBatch({ queue, tasks: [task("t")] });
    expect(res.status).toBe(429);
    expect(res.headers.get("Retry-After")).toBe("30");
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(
      "LIMITS.maxQueueDepth",
    );
  });

  it("lists batches newest first", async () => {
    const queue = uniqueId("list");
    const a = await submitBatch(queue, [task("t")]);
    const b = await submitBatch(queue, [task("t")]);
    const res = (await (await getAsTrainer("/v1/batches?limit=200")).json()) as {
      batches: { batch_id: string }[];
    };
    const ids = res.batches.map((x) => x.batch_id);
    expect(ids.indexOf(b)).toBeLessThan(ids.indexOf(a));
    expect(ids.indexOf(a)).toBeGreaterThanOrEqual(0);
  });
});
