import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { GatewayPool, POLL, resultFor, shardSettled, submitBatch, task, uniqueId } from "../testing/fixtures";
import { DISPATCH_RETRY_MS } from "./settings";

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

/** The env a QueueDO was constructed with, so a test can wrap one of its bindings. */
const envOf = (instance: unknown) => instance as { env: Env };

describe("lost leases (QueueDO → BatchDO)", () => {
  it("a lease lost unstarted whose requeue reaches the queue before the ledger's answer is dispatched again at the same attempt", async () => {
    const queue = uniqueId("lost-race");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const stub = env.QUEUE.getByName(queue);
    const ledger = env.BATCH.getByName(batchId);
    const first = await gateways.join(queue, "node-1", { credit: 1 });
    const a = await first.expect("assign");
    first.close();
    await expect.poll(async () => (await stub.stats()).gateways[0]?.connected, POLL).toBe(false);
    // The ledger's answer to leaseLost reaches the queue only after the requeue it sent (its
    // outbox's enqueue) was handled there: two messages the network may deliver in either order.
    const real = await runInDurableObject(stub, (instance) => {
      const holder = envOf(instance);
      const saved = holder.env;
      const batches = {
        getByName: (name: string) => {
          const target = saved.BATCH.getByName(name);
          return new Proxy(target, {
            get: (t, key) =>
              key === "leaseLost"
                ? async (...args: Parameters<typeof t.leaseLost>) => {
                    const outcome = await t.leaseLost(...args);
                    const until = Date.now() + POLL.timeout;
                    while ((await t.outboxSize()) > 0 && Date.now() < until) await scheduler.wait(10);
                    return outcome;
                  }
                : Reflect.get(t, key),
          });
        },
      };
      holder.env = { ...saved, BATCH: batches as unknown as Env["BATCH"] };
      return saved;
    });
    try {
      await runInDurableObject(stub, (_, state) => {
        state.storage.sql.exec("UPDATE leases SET lost_at = 1");
      });
      await runDurableObjectAlarm(stub);
      expect(await ledger.session(a.session.session_id)).toMatchObject({ status: "QUEUED", attempt: 1 });
      const second = await gateways.join(queue, "node-2", { credit: 1 });
      const again = await second.expect("assign");
      expect(again.session).toMatchObject({ session_id: a.session.session_id, attempt: 1 });
    } finally {
      await runInDurableObject(stub, (instance) => {
        envOf(instance).env = real;
      });
    }
  });
  it("a lost lease its ledger cannot be told about stays, due again DISPATCH_RETRY_MS later, and is handed back once the ledger answers", async () => {
    const queue = uniqueId("lost-retry");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const stub = env.QUEUE.getByName(queue);
    const gw = await gateways.join(queue, "node-1", { credit: 1 });
    const a = await gw.expect("assign");
    gw.close();
    await expect.poll(async () => (await stub.stats()).gateways[0]?.connected, POLL).toBe(false);
    const real = await runInDurableObject(stub, (instance, state) => {
      const holder = envOf(instance);
      const saved = holder.env;
      const batches = {
        getByName: (name: string) =>
          new Proxy(saved.BATCH.getByName(name), {
            get: (t, key) =>
              key === "leaseLost"
                ? async () => {
                    throw new Error("ledger unavailable");
                  }
                : Reflect.get(t, key),
          }),
      };
      holder.env = { ...saved, BATCH: batches as unknown as Env["BATCH"] };
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
      return saved;
    });
    let before = 0;
    let after = 0;
    let rows: { lease_id: string; lost_at: number }[] = [];
    try {
      before = Date.now();
      await runDurableObjectAlarm(stub);
      after = Date.now();
    } finally {
      rows = await runInDurableObject(stub, async (instance, state) => {
        envOf(instance).env = real;
        // Read before the retry is due, and keep the shard's own alarm from retrying meanwhile.
        const leases = state.storage.sql
          .exec<{ lease_id: string; lost_at: number }>("SELECT lease_id, lost_at FROM leases")
          .toArray();
        await state.storage.deleteAlarm();
        return leases;
      });
    }
    const [lease, ...others] = rows;
    expect(others).toEqual([]);
    expect(lease!.lease_id).toBe(a.lease_id);
    expect(lease!.lost_at).toBeGreaterThanOrEqual(before + DISPATCH_RETRY_MS);
    expect(lease!.lost_at).toBeLessThanOrEqual(after + DISPATCH_RETRY_MS);
    const ledger = env.BATCH.getByName(batchId);
    expect(await ledger.session(a.session.session_id)).toMatchObject({
      status: "ASSIGNED",
      lease_id: a.lease_id,
    });
    // Due again: the ledger answers now and requeues the session.
    await runInDurableObject(stub, async (_, state) => {
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
      await state.storage.setAlarm(Date.now());
    });
    await runDurableObjectAlarm(stub);
    await expect.poll(async () => (await ledger.session(a.session.session_id))?.status, POLL).toBe("QUEUED");
    await shardSettled(stub);
    expect(await stub.stats()).toMatchObject({ leases: 0, counters: { requeued_leases: 1 } });
  });

  it("a lost lease of a session that ended on the ledger meanwhile is removed without a requeue", async () => {
    const queue = uniqueId("lost-ended");
    const batchId = await submitBatch(queue, [task("t", { max_attempts: 2 })]);
    const stub = env.QUEUE.getByName(queue);
    const gw = await gateways.join(queue, "node-1", { credit: 1 });
    const a = await gw.expect("assign");
    // The ledger ends the session (here: its result through the ledger's RPC) and the shard's
    // withdrawal is still to come when the gateway leaves and its grace runs out.
    const ledger = env.BATCH.getByName(batchId);
    expect(await ledger.submitResult(a.session.session_id, a.lease_id, resultFor(a.session, "node-1"))).toBe(
      "accepted",
    );
    gw.close();
    await expect.poll(async () => (await stub.stats()).gateways[0]?.connected, POLL).toBe(false);
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE leases SET lost_at = 1");
    });
    await runDurableObjectAlarm(stub);
    expect(await stub.stats()).toMatchObject({ pending: 0, leases: 0, counters: { requeued_leases: 0 } });
    expect(await ledger.session(a.session.session_id)).toMatchObject({ status: "COMPLETED", attempt: 1 });
    expect((await ledger.counters()).requeued_sessions).toBe(0);
  });
});
