import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { BatchRequest, type SessionAssignment } from "../../protocol";
import type { QueueDO } from "../queue/queue-do";
import { canonicalHash } from "../request-body";
import {
  call,
  Gateway,
  POLL,
  postBatch,
  resultFor,
  shardSettled,
  TOKENS,
  task,
  uniqueId,
} from "../testing/fixtures";
import type { BatchDO } from "./batch-do";
import { outboxBackoffMs } from "./outbox-store";

/** A namespace whose objects always fail: what the caller sees while the other DO is unreachable. */
function unreachable(what: string) {
  return {
    getByName: () =>
      new Proxy(
        {},
        {
          get: () => async () => {
            throw new Error(`${what} unavailable`);
          },
        },
      ),
  };
}

/** The env an object was constructed with, so a test can cut one of its bindings. */
function envOf(instance: BatchDO | QueueDO): { env: Env } {
  return instance as unknown as { env: Env };
}

describe("outbox: BatchDO → QueueDO", () => {
  it("delivers right away on create", async () => {
    const queue = uniqueId("direct");
    const batchId = uniqueId("b");
    expect(
      (await postBatch({ batch_id: batchId, queue, tasks: [task("a", { num_samples: 3 }), task("b")] }))
        .status,
    ).toBe(201);
    expect(await env.BATCH.getByName(batchId).outboxSize()).toBe(0);
    expect(await env.QUEUE.getByName(queue).stats()).toMatchObject({ pending: 4, leases: 0 });
  });

  it("routes a task with its own queue to that queue", async () => {
    const main = uniqueId("main");
    const other = uniqueId("other");
    const batchId = uniqueId("b");
    await postBatch({
      batch_id: batchId,
      queue: main,
      tasks: [task("a"), task("b", { queue: other, num_samples: 2 })],
    });
    expect((await env.QUEUE.getByName(main).stats()).pending).toBe(1);
    expect((await env.QUEUE.getByName(other).stats()).pending).toBe(2);
  });

  it("keeps an undelivered row with a backoff and delivers it from the alarm", async () => {
    const queue = uniqueId("later");
    const batchId = uniqueId("b");
    const request = {
      ...BatchRequest.parse({ queue, tasks: [task("a", { num_samples: 2 })] }),
      batch_id: batchId,
    };
    const stub = env.BATCH.getByName(batchId);
    const before = Date.now();
    const outcome = await runInDurableObject(stub, async (instance) => {
      const holder = envOf(instance);
      const real = holder.env;
      holder.env = { ...real, QUEUE: unreachable("queue") as unknown as Env["QUEUE"] };
      try {
        return await instance.create(request, await canonicalHash(request));
      } finally {
        holder.env = real;
      }
    });
    expect(outcome.kind).toBe("created");
    const row = await runInDurableObject(stub, (_, state) =>
      state.storage.sql.exec("SELECT attempts, last_error, next_attempt_at FROM outbox").one(),
    );
    expect(row).toMatchObject({ attempts: 1, last_error: "queue unavailable" });
    // The first retry waits outboxBackoffMs(1) from the failed attempt (made during create).
    const failedAt = Number(row.next_attempt_at) - outboxBackoffMs(1);
    expect(failedAt).toBeGreaterThanOrEqual(before);
    expect(failedAt).toBeLessThanOrEqual(Date.now());
    expect(await runInDurableObject(stub, (_, state) => state.storage.getAlarm())).toBe(row.next_attempt_at);
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(0);

    // Make the row due now instead of waiting out the backoff, then fire the alarm.
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE outbox SET next_attempt_at = 0");
    });
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    expect(await stub.outboxSize()).toBe(0);
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(2);
    // The alarm stays armed only for the sessions' deadlines (budget + grace), not the outbox.
    const alarm = await runInDurableObject(stub, (_, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThan(Date.now() + 60_000);
  });

  it("a cancel while the queue is unreachable stays in the outbox with a backoff; the alarm withdraws the sessions", async () => {
    const queue = uniqueId("cancel-later");
    const batchId = uniqueId("b");
    expect(
      (await postBatch({ batch_id: batchId, queue, tasks: [task("a", { num_samples: 2 })] })).status,
    ).toBe(201);
    const queueStub = env.QUEUE.getByName(queue);
    const gw = await Gateway.connect(queue);
    try {
      gw.hello("node-cancel-later", 1);
      await gw.expect("welcome");
      const leased = await gw.expect("assign");
      const stub = env.BATCH.getByName(batchId);
      const real = await runInDurableObject(stub, (instance) => {
        const holder = envOf(instance);
        const saved = holder.env;
        holder.env = { ...saved, QUEUE: unreachable("queue") as unknown as Env["QUEUE"] };
        return saved;
      });
      const del = await call(`/v1/batches/${batchId}`, {
        method: "DELETE",
        headers: { Authorization: `Bearer ${TOKENS.trainer}` },
      });
      // The ledger's answer does not wait for the queue: both sessions end there at once.
      expect(await del.json()).toMatchObject({ status: "cancelled", cancelled_sessions: 2 });
      const outboxRow = () =>
        runInDurableObject(stub, (_, state) =>
          state.storage.sql
            .exec<{
              kind: string;
              attempts: number;
              last_error: string | null;
              next_attempt_at: number;
              payload: string;
            }>("SELECT kind, attempts, last_error, next_attempt_at, payload FROM outbox")
            .toArray(),
        );
      await expect.poll(async () => (await outboxRow())[0]?.attempts ?? 0, POLL).toBeGreaterThanOrEqual(1);
      const [row, ...more] = await outboxRow();
      expect(more).toEqual([]);
      expect(row).toMatchObject({ kind: "cancel", last_error: "queue unavailable" });
      expect(JSON.parse(row!.payload)).toEqual([
        { session_id: leased.session.session_id, lease_id: leased.lease_id },
        { session_id: `${batchId}.0.1`, lease_id: null },
      ]);
      expect(row!.next_attempt_at).toBeGreaterThan(Date.now() - 1000);
      expect(await runInDurableObject(stub, (_, state) => state.storage.getAlarm())).toBeLessThanOrEqual(
        row!.next_attempt_at,
      );
      // Not withdrawn meanwhile: the queue still holds the lease and the pending session, and the
      // gateway was told nothing.
      expect(await queueStub.stats()).toMatchObject({ pending: 1, leases: 1 });
      await gw.expectNothingBeforeReply();

      await runInDurableObject(stub, (instance, state) => {
        envOf(instance).env = real;
        state.storage.sql.exec("UPDATE outbox SET next_attempt_at = 0");
      });
      // The alarm may fire on its own once the row is due: either way it delivers the row.
      await runInDurableObject(stub, (_, state) => state.storage.setAlarm(Date.now()));
      await runDurableObjectAlarm(stub);
      expect(await gw.expect("cancel")).toMatchObject({
        lease_id: leased.lease_id,
        session_id: leased.session.session_id,
      });
      await expect.poll(() => stub.outboxSize(), POLL).toBe(0);
      expect(await queueStub.stats()).toMatchObject({ pending: 0, leases: 0 });
    } finally {
      gw.close();
    }
  });

  it("redelivery is idempotent by session id", async () => {
    const queue = uniqueId("again");
    const batchId = uniqueId("b");
    await postBatch({ batch_id: batchId, queue, tasks: [task("a", { num_samples: 2 })] });
    const stub = env.BATCH.getByName(batchId);
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec(
        "INSERT INTO outbox (queue, task_index, attempts, next_attempt_at, created_at) VALUES (?, 0, 0, 0, 0)",
        queue,
      );
    });
    await stub.drainOutbox();
    expect(await stub.outboxSize()).toBe(0);
    expect((await env.QUEUE.getByName(queue).stats()).pending).toBe(2);
  });
});

describe("what an enqueue row delivers (outbox-store.ts)", () => {
  it("only the task's sessions still queued: neither an assigned one nor a finished one is sent to a queue again", async () => {
    const batchId = uniqueId("b");
    await postBatch({ batch_id: batchId, queue: uniqueId("first"), tasks: [task("a", { num_samples: 3 })] });
    const stub = env.BATCH.getByName(batchId);
    const [running, finished, waiting] = [0, 1, 2].map((i) => `${batchId}.0.${i}`);
    expect(await stub.markAssigned(running!, "l_running", 1, "node-a")).toBe("assigned");
    expect(await stub.markAssigned(finished!, "l_finished", 1, "node-a")).toBe("assigned");
    const assignment = {
      session_id: finished,
      batch_id: batchId,
      task_id: "a",
      attempt: 1,
      instruction: "solve a",
    };
    expect(
      await stub.submitResult(finished!, "l_finished", resultFor(assignment as SessionAssignment, "node-a")),
    ).toBe("accepted");
    // The task's enqueue row again, towards a queue that holds nothing yet.
    const fresh = uniqueId("fresh");
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec(
        "INSERT INTO outbox (queue, task_index, attempts, next_attempt_at, created_at) VALUES (?, 0, 0, 0, 0)",
        fresh,
      );
    });
    await stub.drainOutbox();
    expect(await stub.outboxSize()).toBe(0);
    const pending = await runInDurableObject(env.QUEUE.getByName(fresh), (_, state) =>
      state.storage.sql
        .exec<{ session_id: string; attempt: number }>("SELECT session_id, attempt FROM pending")
        .toArray(),
    );
    expect(pending).toEqual([{ session_id: waiting, attempt: 1 }]);
  });
});

describe("dispatch retry: QueueDO → BatchDO", () => {
  it("keeps the session pending when the ledger is unreachable and assigns it from the alarm", async () => {
    const queue = uniqueId("retry");
    const batchId = uniqueId("b");
    const queueStub = env.QUEUE.getByName(queue);
    const real = await runInDurableObject(queueStub, (instance) => {
      const holder = envOf(instance);
      const saved = holder.env;
      holder.env = { ...saved, BATCH: unreachable("ledger") as unknown as Env["BATCH"] };
      return saved;
    });
    expect((await postBatch({ batch_id: batchId, queue, tasks: [task("a")] })).status).toBe(201);
    const gw = await Gateway.connect(queue);
    try {
      gw.hello("node-retry", 1);
      await gw.expect("welcome");
      // The hello's dispatch pass is over: the ledger refused the assignment, nothing was sent.
      await shardSettled(queueStub);
      await gw.expectNothingBeforeReply();
      expect(await queueStub.stats()).toMatchObject({ pending: 1, leases: 0, gateways: [{ credit: 1 }] });
      await runInDurableObject(queueStub, (instance) => {
        envOf(instance).env = real;
      });
      expect(await runDurableObjectAlarm(queueStub)).toBe(true);
      const assign = await gw.expect("assign");
      expect(assign.session.session_id).toBe(`${batchId}.0.0`);
      expect(await queueStub.stats()).toMatchObject({ pending: 0, leases: 1 });
    } finally {
      gw.close();
    }
  });
});
