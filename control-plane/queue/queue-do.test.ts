import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { BatchStatusBody, POLAR_VERSION, type SessionAssignment, ZERO_STAGE_METRICS } from "../../protocol";
import { artifactKey } from "../artifacts";
import {
  GatewayPool,
  getAsTrainer,
  POLL,
  resultFor,
  resultsPage,
  shardSettled,
  submitBatch,
  task,
  uniqueId,
} from "../testing/fixtures";

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

describe("gateway WebSocket flow", () => {
  it("welcome, assign, progress, result → accepted; duplicate; stale lease; results endpoint", async () => {
    const queue = uniqueId("flow");
    const batchId = await submitBatch(queue, [task("t0", { num_samples: 2 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-a", 2);
    const welcome = await gw.expect("welcome");
    expect(welcome).toMatchObject({ queue, node_id: "node-a", kept_leases: [], ping_interval_seconds: 15 });
    const first = await gw.expect("assign");
    const second = await gw.expect("assign");
    expect(first.lease_id).toMatch(/^l_[0-9a-f-]{36}$/);
    expect([first.session.session_id, second.session.session_id].sort()).toEqual([
      `${batchId}.0.0`,
      `${batchId}.0.1`,
    ]);
    expect(first.session).toMatchObject({
      batch_id: batchId,
      task_id: "t0",
      attempt: 1,
      instruction: "solve t0",
    });

    gw.send({
      v: 1,
      type: "progress",
      lease_id: first.lease_id,
      session_id: first.session.session_id,
      status: "RUNNING",
      at: Date.now(),
    });
    // Progress has no reply on success; the ledger shows it.
    await expect
      .poll(
        async () =>
          BatchStatusBody.parse(await (await getAsTrainer(`/v1/batches/${batchId}`)).json()).counts.RUNNING,
        POLL,
      )
      .toBe(1);

    const result = resultFor(first.session, "node-a");
    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result });
    expect(await gw.expect("ack")).toMatchObject({
      lease_id: first.lease_id,
      session_id: first.session.session_id,
      status: "accepted",
    });

    const page = await resultsPage(batchId);
    expect(page.results).toHaveLength(1);
    expect(page.results[0]!.seq).toBe(1);
    // As sent, but for queued_ms: the ledger's own measure of the wait for a gateway.
    const stored = page.results[0]!.result;
    expect(stored).toEqual({ ...result, timing: { ...result.timing, queued_ms: stored.timing.queued_ms } });
    expect(page.next).toBe(1);
    expect(page.done).toBe(false);

    gw.send({ v: 1, type: "result", lease_id: first.lease_id, result });
    expect((await gw.expect("ack")).status).toBe("duplicate");

    // A result for the open session under a lease that is not its own.
    gw.send({ v: 1, type: "result", lease_id: "l_not-current", result: resultFor(second.session, "node-a") });
    expect((await gw.expect("ack")).status).toBe("stale");
    gw.send({
      v: 1,
      type: "progress",
      lease_id: "l_not-current",
      session_id: second.session.session_id,
      status: "RUNNING",
      at: 1,
    });
    expect(await gw.expect("error")).toMatchObject({ code: "stale_lease" });

    const counters = await env.BATCH.getByName(batchId).counters();
    expect(counters).toMatchObject({ stale_results: 1, duplicate_results: 1, stale_progress: 0 });
    expect((await env.QUEUE.getByName(queue).stats()).counters).toMatchObject({
      stale_progress: 1,
      stale_results: 1,
    });

    gw.send({ v: 1, type: "result", lease_id: second.lease_id, result: resultFor(second.session, "node-a") });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const all = await resultsPage(batchId);
    expect(all.results.map((r) => r.seq)).toEqual([1, 2]);
    expect(all.done).toBe(true);
    expect((await resultsPage(batchId, "?after=1")).results.map((r) => r.seq)).toEqual([2]);
    const status = BatchStatusBody.parse(await (await getAsTrainer(`/v1/batches/${batchId}`)).json());
    expect(status).toMatchObject({ status: "completed", completed_sessions: 2 });
    expect((await env.QUEUE.getByName(queue).stats()).leases).toBe(0);
  });

  it("never sends more assigns than granted credit", async () => {
    const queue = uniqueId("credit");
    await submitBatch(queue, [task("t0", { num_samples: 3 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-c", 1);
    await gw.expect("welcome");
    await gw.expect("assign");
    const stub = env.QUEUE.getByName(queue);
    // Once the shard has handled everything, an assign past the credit would already be here.
    await shardSettled(stub);
    await gw.expectNothingBeforeReply();
    expect(await stub.stats()).toMatchObject({ pending: 2, leases: 1, gateways: [{ credit: 0 }] });
    gw.send({ v: 1, type: "credit", grant: 1 });
    await gw.expect("assign");
    await shardSettled(stub);
    await gw.expectNothingBeforeReply();
    expect(await stub.stats()).toMatchObject({ pending: 1, leases: 2, gateways: [{ credit: 0 }] });
    gw.send({ v: 1, type: "credit", grant: 5 });
    await gw.expect("assign");
    await shardSettled(stub);
    await gw.expectNothingBeforeReply();
    const stats = await stub.stats();
    expect(stats).toMatchObject({ pending: 0, leases: 3 });
    expect(stats.gateways).toMatchObject([{ node_id: "node-c", credit: 4, connected: true, leases: 3 }]);
  });

  it("answers malformed messages with an error and keeps the socket working", async () => {
    const queue = uniqueId("malformed");
    const gw = await gateways.connect(queue);
    gw.send("{nope");
    expect(await gw.expect("error")).toMatchObject({ code: "invalid_json" });
    gw.send({ v: 1, type: "credit", grant: 1 });
    expect(await gw.expect("error")).toMatchObject({ code: "hello_required" });
    gw.send({ v: 1, type: "credit", grant: 0, extra: true });
    const invalid = await gw.expect("error");
    expect(invalid.code).toBe("invalid_message");
    expect(invalid.message).toContain("grant:");
    expect(invalid.message).toContain("extra: unknown key");
    gw.send("ping");
    expect(await gw.nextRaw()).toBe("pong");
    gw.hello("node-m", 0);
    expect(await gw.expect("welcome")).toMatchObject({ node_id: "node-m" });
    expect(gw.closed).toBeNull();
  });

  it("closes with 4400 on a hello of another protocol version", async () => {
    const gw = await gateways.connect(uniqueId("version"));
    gw.send({ v: 4, type: "hello", node_id: "n", agent_version: "9.0.0" });
    const refusal = await gw.expect("error");
    expect(refusal).toMatchObject({ code: "unsupported_version" });
    // Both sides: the gateway's wire and Polar versions, the control plane's own (package.json's).
    expect(refusal.message).toBe(
      `gateway 'n' speaks wire v4 (polar 9.0.0); this control plane (polar ${POLAR_VERSION}) speaks v1, v2 and v3: upgrade the control plane to a release that speaks v4 (a fleet upgrades its control plane first, then its gateways), or run this gateway at polar ${POLAR_VERSION}`,
    );
    expect(POLAR_VERSION).toMatch(/^\d+\.\d+\.\d+/);
    await expect.poll(() => gw.closed?.code, POLL).toBe(4400);
  });

  it("refuses oversized messages with too_large", async () => {
    const gw = await gateways.connect(uniqueId("big"));
    gw.send(`{"pad":"${"x".repeat(16 * 1024 * 1024)}"}`);
    expect(await gw.expect("error", 15_000)).toMatchObject({ code: "too_large" });
    gw.hello("node-big", 0);
    await gw.expect("welcome");
  }, 30_000);

  it("dispatches by priority first, then first in", async () => {
    const queue = uniqueId("prio");
    const low = await submitBatch(queue, [task("low")]);
    const high = await submitBatch(queue, [task("high", { dispatch_priority: 9 })]);
    const mid = await submitBatch(queue, [
      task("mid-1", { dispatch_priority: 5 }),
      task("mid-2", { dispatch_priority: 5 }),
    ]);
    const gw = await gateways.connect(queue);
    gw.hello("node-p", 10);
    await gw.expect("welcome");
    const order: string[] = [];
    for (let i = 0; i < 4; i++) order.push((await gw.expect("assign")).session.session_id);
    expect(order).toEqual([`${high}.0.0`, `${mid}.0.0`, `${mid}.1.0`, `${low}.0.0`]);
  });

  it("chooses the gateway by stage pressure: one reporting every run slot busy gets nothing while another idles (the order: scoring.test.ts)", async () => {
    const queue = uniqueId("pick");
    const busy = await gateways.connect(queue);
    busy.hello("node-a-busy", 4);
    await busy.expect("welcome");
    const idle = await gateways.connect(queue);
    idle.hello("node-b-idle", 0);
    await idle.expect("welcome");
    const zero = ZERO_STAGE_METRICS;
    // node-a sorts first by id, but reports every run slot busy; node-b reports an idle host.
    busy.send({ v: 1, type: "credit", grant: 1, metrics: { ...zero, run_inflight: 4 } });
    idle.send({ v: 1, type: "credit", grant: 4, metrics: zero });
    await expect
      .poll(
        async () => (await env.QUEUE.getByName(queue).stats()).gateways.map((g) => g.metrics !== null),
        POLL,
      )
      .toEqual([true, true]);
    await submitBatch(queue, [task("t", { num_samples: 3 })]);
    for (let i = 0; i < 3; i++) await idle.expect("assign");
    await shardSettled(env.QUEUE.getByName(queue));
    await busy.expectNothingBeforeReply();
    expect((await env.QUEUE.getByName(queue).stats()).gateways).toMatchObject([
      { node_id: "node-a-busy", leases: 0, credit: 5 },
      { node_id: "node-b-idle", leases: 3 },
    ]);
  });

  it("a reconnecting node replaces its old socket (4409) and keeps only its current leases", async () => {
    const queue = uniqueId("reconnect");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 2 })]);
    const old = await gateways.connect(queue);
    old.hello("node-r", 2);
    await old.expect("welcome");
    const a = await old.expect("assign");
    const b = await old.expect("assign");

    const fresh = await gateways.connect(queue);
    // Holds lease a and an unknown lease; lost lease b (e.g. restarted mid-run).
    fresh.hello("node-r", 0, [
      { lease_id: a.lease_id, session_id: a.session.session_id },
      { lease_id: "l_unknown", session_id: `${batchId}.0.1` },
    ]);
    await expect.poll(() => old.closed?.code, POLL).toBe(4409);
    expect(await fresh.expect("cancel")).toMatchObject({ lease_id: "l_unknown" });
    const welcome = await fresh.expect("welcome");
    expect(welcome.kept_leases).toEqual([a.lease_id]);
    // b went back to the queue and is handed out again once there is credit; it never reported
    // INITIALIZING, so its attempt was not used up.
    fresh.send({ v: 1, type: "credit", grant: 1 });
    const again = await fresh.expect("assign");
    expect(again.session).toMatchObject({
      session_id: b.session.session_id,
      attempt: 1,
    } satisfies Partial<SessionAssignment>);
    expect(again.lease_id).not.toBe(b.lease_id);
    // The old lease of b is superseded in the ledger.
    fresh.send({ v: 1, type: "result", lease_id: b.lease_id, result: resultFor(b.session, "node-r") });
    expect((await fresh.expect("ack")).status).toBe("stale");
    fresh.send({
      v: 1,
      type: "result",
      lease_id: again.lease_id,
      result: resultFor(again.session, "node-r"),
    });
    expect((await fresh.expect("ack")).status).toBe("accepted");
    const stats = await env.QUEUE.getByName(queue).stats();
    expect(stats.gateways).toMatchObject([{ node_id: "node-r", credit: 0, connected: true, leases: 1 }]);
  });

  it("a result whose artifact ref is another session's upload is refused, naming the field; the session stays open", async () => {
    const queue = uniqueId("refs");
    const batchId = await submitBatch(queue, [task("t", { num_samples: 2 })]);
    const gw = await gateways.connect(queue);
    gw.hello("node-ref", 2);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    const b = await gw.expect("assign");
    // The key of b's upload, sent with a's result: a gateway must not point at another's data.
    const ref = {
      key: artifactKey(batchId, b.session.session_id, b.lease_id, "completions"),
      bytes: 10,
      sha256: "0".repeat(64),
    };
    gw.send({
      v: 1,
      type: "result",
      lease_id: a.lease_id,
      result: resultFor(a.session, "node-ref"),
      completions_ref: ref,
    });
    expect(await gw.expect("error")).toMatchObject({
      code: "invalid_message",
      message: expect.stringContaining("completions_ref.key"),
    });
    const session = (await (await getAsTrainer(`/v1/sessions/${a.session.session_id}`)).json()) as {
      status: string;
    };
    expect(session.status).not.toBe("COMPLETED");
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result: resultFor(a.session, "node-ref") });
    expect((await gw.expect("ack")).status).toBe("accepted");
  });

  it("a result the ledger fails to record is answered result_not_recorded; the lease stays, and the same result sent again is accepted", async () => {
    const queue = uniqueId("unrecorded");
    const batchId = await submitBatch(queue, [task("t")]);
    const gw = await gateways.connect(queue);
    gw.hello("node-unrecorded", 1);
    await gw.expect("welcome");
    const a = await gw.expect("assign");
    const ledger = env.BATCH.getByName(batchId);
    // The ledger's storage refuses the result row (as a failing write would).
    await runInDurableObject(ledger, (_, state) => {
      state.storage.sql.exec(
        "CREATE TRIGGER refuse_results BEFORE INSERT ON results BEGIN SELECT RAISE(ABORT, 'storage failed'); END",
      );
    });
    const result = resultFor(a.session, "node-unrecorded");
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result });
    expect(await gw.expect("error")).toMatchObject({
      code: "result_not_recorded",
      message: `result of '${a.session.session_id}' was not recorded; send it again`,
    });
    // Nothing was recorded: the session is open under the same lease, on the ledger and the queue.
    expect(await ledger.session(a.session.session_id)).toMatchObject({
      status: "ASSIGNED",
      lease_id: a.lease_id,
      result_json: null,
    });
    const stats = await env.QUEUE.getByName(queue).stats();
    expect(stats).toMatchObject({ leases: 1, pending: 0 });
    expect(stats.counters).toMatchObject({ stale_results: 0, duplicate_results: 0 });
    await runInDurableObject(ledger, (_, state) => {
      state.storage.sql.exec("DROP TRIGGER refuse_results");
    });
    gw.send({ v: 1, type: "result", lease_id: a.lease_id, result });
    expect((await gw.expect("ack")).status).toBe("accepted");
    expect((await resultsPage(batchId)).results.map((r) => r.result.session_id)).toEqual([
      a.session.session_id,
    ]);
    expect((await env.QUEUE.getByName(queue).stats()).leases).toBe(0);
  });

  it("marks a closed gateway disconnected and keeps its leases", async () => {
    const queue = uniqueId("close");
    await submitBatch(queue, [task("t")]);
    const gw = await gateways.connect(queue);
    gw.hello("node-x", 1);
    await gw.expect("welcome");
    await gw.expect("assign");
    gw.close();
    await expect
      .poll(async () => (await env.QUEUE.getByName(queue).stats()).gateways[0]?.connected, POLL)
      .toBe(false);
    const stats = await env.QUEUE.getByName(queue).stats();
    expect(stats).toMatchObject({ leases: 1, pending: 0 });
    expect(stats.gateways[0]!.credit).toBe(0);
  });

  it("stores a result larger than a SQLite row in chunks and returns it whole", async () => {
    const queue = uniqueId("large");
    const batchId = await submitBatch(queue, [task("t")]);
    const gw = await gateways.connect(queue);
    gw.hello("node-l", 1);
    await gw.expect("welcome");
    const assign = await gw.expect("assign");
    const result = resultFor(assign.session, "node-l", { blob: "é😀".repeat(1_200_000) });
    gw.send({ v: 1, type: "result", lease_id: assign.lease_id, result });
    expect((await gw.expect("ack", 20_000)).status).toBe("accepted");
    const page = await resultsPage(batchId);
    expect(page.results[0]!.result.metadata.blob).toBe(result.metadata.blob);
  }, 30_000);
});
