/**
 * The counterexamples the control plane's fuzzing found (`routes.test.ts`, `wire.test.ts`), each
 * as its shrunk input, with the answer it gets since the fix. Before, each was a 500 or a wire
 * `internal` / `result_not_recorded`, or let one gateway end another's session.
 */
import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { LIMITS } from "../../protocol";
import { tokenHash } from "../auth";
import { taskResultSeqs } from "../batch/callbacks";
import { sessionsById } from "../batch/lifecycle";
import type { BatchDb } from "../batch/store";
import type { QueueDb } from "../queue/db";
import { lendPending, settleLent } from "../queue/loan-store";
import { call, Gateway, POLL, postBatch, resultFor, TOKENS, task, uniqueId } from "../testing/fixtures";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

async function connect(queue: string, nodeId: string, credit: number): Promise<Gateway> {
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello(nodeId, credit);
  await gw.expect("welcome");
  return gw;
}

/** `{"a":{"a":…1…}}`, `depth` objects deep, as text (JSON.stringify cannot write it). */
function deepText(depth: number): string {
  return `${'{"a":'.repeat(depth)}1${"}".repeat(depth)}`;
}

async function errorOf(res: Response) {
  const body = (await res.json()) as { error: { code: string; message: string; details?: unknown } };
  return { status: res.status, ...body.error };
}

describe("fuzz counterexamples: HTTP", () => {
  it("a batch whose task metadata nests 20 000 deep is a 400 naming the field, not a 500", async () => {
    const body = JSON.stringify({ tasks: [task("t0", { metadata: { deep: "DEEP" } })] }).replace(
      '"DEEP"',
      deepText(20_000),
    );
    const error = await errorOf(await postBatch(body));
    expect(error).toMatchObject({ status: 400, code: "validation_failed" });
    expect(error.message).toMatch(/^tasks\[0\]\.metadata\.deep(\.a)+…?: nests more than 128 levels deep/);
  });

  it("nesting up to the limit is accepted", async () => {
    // The body is depth 1, tasks 2, the task 3, metadata 4: 124 more objects reach 128, 125 pass it.
    const body = JSON.stringify({
      queue: uniqueId("deep-ok"),
      tasks: [task("t0", { metadata: { deep: "DEEP" } })],
    });
    expect((await postBatch(body.replace('"DEEP"', deepText(LIMITS.maxJsonDepth - 4)))).status).toBe(201);
    expect((await postBatch(body.replace('"DEEP"', deepText(LIMITS.maxJsonDepth - 3)))).status).toBe(400);
  });

  it("an upstream submit naming another queue with an object that has no string form is a 403", async () => {
    const credential = "pt_fz-regress.AbCdEfGhIjKlMnOpQrSt";
    const registered = await call("/v1/admin/path_tokens", {
      method: "POST",
      headers: { Authorization: `Bearer ${TOKENS.admin}`, "Content-Type": "application/json" },
      body: JSON.stringify({ name: "fz-regress", sha256: await tokenHash(credential), queue: "q-regress" }),
    });
    expect(registered.status).toBe(201);
    const res = await call(`/u/${credential}/rollout/task/submit`, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ ...task("t0"), queue: JSON.parse('{"toString":1}') }),
    });
    const error = await errorOf(res);
    expect(error).toMatchObject({ status: 403, code: "forbidden" });
    expect(error.message).toContain(`not {"toString":1}`);
  });
});

describe("fuzz counterexamples: gateway wire", () => {
  it("a result whose metadata nests 20 000 deep is invalid_message, not result_not_recorded", async () => {
    const queue = uniqueId("deep-wire");
    const batchId = uniqueId("b");
    expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t0")] })).status).toBe(201);
    const gw = await connect(queue, "node-deep", 1);
    const assign = await gw.expect("assign");
    const result = { ...resultFor(assign.session, "node-deep"), metadata: { deep: "DEEP" } };
    gw.send(
      JSON.stringify({ v: 1, type: "result", lease_id: assign.lease_id, result }).replace(
        '"DEEP"',
        deepText(20_000),
      ),
    );
    const error = await gw.expect("error");
    expect(error.code).toBe("invalid_message");
    expect(error.message).toMatch(/^result\.metadata\.deep(\.a)+…?: nests more than 128 levels deep/);
    // The lease is untouched: the session's real result is accepted.
    gw.send({
      v: 1,
      type: "result",
      lease_id: assign.lease_id,
      result: resultFor(assign.session, "node-deep"),
    });
    expect(await gw.expect("ack")).toMatchObject({ status: "accepted" });
  });

  it("a result for another gateway's lease is stale and leaves that gateway's session alone", async () => {
    const queue = uniqueId("foreign");
    const batchId = uniqueId("b");
    expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t0")] })).status).toBe(201);
    const owner = await connect(queue, "node-owner", 1);
    const assign = await owner.expect("assign");
    const other = await connect(queue, "node-other", 0);
    other.send({
      v: 1,
      type: "result",
      lease_id: assign.lease_id,
      result: resultFor(assign.session, "node-other"),
    });
    expect(await other.expect("ack")).toMatchObject({ lease_id: assign.lease_id, status: "stale" });
    owner.send({
      v: 1,
      type: "result",
      lease_id: assign.lease_id,
      result: resultFor(assign.session, "node-owner"),
    });
    expect(await owner.expect("ack")).toMatchObject({ lease_id: assign.lease_id, status: "accepted" });
    const session = await call(`/v1/sessions/${assign.session.session_id}`, {
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(await session.json()).toMatchObject({ status: "COMPLETED", result: { node_id: "node-owner" } });
  });
});

/**
 * Found by the wire fuzz's last step (cancelling its work batches of 512 sessions): Durable Object
 * SQLite binds at most 100 parameters, and the queue withdrew a batch's sessions with one
 * `IN (…)` of all their ids — "too many SQL variables", retried forever, the sessions left waiting
 * in the queue. Every query over a list of ids now runs in chunks (`sql-chunks.ts`).
 */
describe("fuzz counterexamples: more ids than one statement may bind", () => {
  it("cancelling a batch of 300 waiting sessions withdraws every one from its queue", async () => {
    const queue = uniqueId("withdraw");
    const batchId = uniqueId("b");
    expect(
      (await postBatch({ batch_id: batchId, queue, tasks: [task("t0", { num_samples: 300 })] })).status,
    ).toBe(201);
    await expect.poll(async () => (await env.QUEUE.getByName(queue).stats()).pending, POLL).toBe(300);
    const cancelled = await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    expect(cancelled.status).toBe(200);
    await expect.poll(async () => (await env.QUEUE.getByName(queue).stats()).pending, POLL).toBe(0);
  });

  it("a gateway holding 120 leases of a cancelled batch is told to cancel each", async () => {
    const queue = uniqueId("withdraw-leases");
    const batchId = uniqueId("b");
    expect(
      (await postBatch({ batch_id: batchId, queue, tasks: [task("t0", { num_samples: 120 })] })).status,
    ).toBe(201);
    const gw = await connect(queue, "node-many", 120);
    for (let i = 0; i < 120; i++) await gw.expect("assign");
    await call(`/v1/batches/${batchId}`, {
      method: "DELETE",
      headers: { Authorization: `Bearer ${TOKENS.trainer}` },
    });
    const cancelled = new Set<string>();
    for (let i = 0; i < 120; i++) cancelled.add((await gw.expect("cancel")).session_id);
    expect(cancelled.size).toBe(120);
    expect((await env.QUEUE.getByName(queue).stats()).leases).toBe(0);
  });

  it("the ledger reads 150 sessions and their results by id (callback bodies, withdrawals)", async () => {
    const batchId = uniqueId("b");
    expect(
      (
        await postBatch({
          batch_id: batchId,
          queue: uniqueId("q"),
          tasks: [task("t0", { num_samples: 150 })],
        })
      ).status,
    ).toBe(201);
    await runInDurableObject(env.BATCH.getByName(batchId), (instance) => {
      const db = (instance as unknown as { ledger: { db: BatchDb } }).ledger.db;
      expect(taskResultSeqs(db, 0)).toEqual([]);
      const ids = Array.from({ length: 150 }, (_, i) => `${batchId}.0.${i}`);
      expect(sessionsById(db, ids)).toHaveLength(150);
    });
  });

  it("a shard lends and settles 150 sessions in one steal", async () => {
    const queue = uniqueId("lend");
    expect((await postBatch({ queue, tasks: [task("t0", { num_samples: 150 })] })).status).toBe(201);
    await expect.poll(async () => (await env.QUEUE.getByName(queue).stats()).pending, POLL).toBe(150);
    await runInDurableObject(env.QUEUE.getByName(queue), (instance) => {
      const db = (instance as unknown as { shard: { db: QueueDb } }).shard.db;
      const loan = lendPending(db, `${queue}#1`, 150, Date.now() + 60_000);
      expect(loan.payloads).toHaveLength(150);
      const ids = loan.payloads.map((p) => (JSON.parse(p) as { session_id: string }).session_id);
      expect(settleLent(db, loan.token, ids)).toBe(150);
    });
  });
});
