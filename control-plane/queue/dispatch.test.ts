import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import type { SessionAssignment } from "../../protocol";
import { GatewayPool, POLL, resultFor, shardSettled, submitBatch, task, uniqueId } from "../testing/fixtures";

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

/** The env a QueueDO was constructed with, so a test can wrap one of its bindings. */
const envOf = (instance: unknown) => instance as { env: Env };

describe("dispatch (dispatch.ts)", () => {
  it("a session whose gateway's socket closed while the ledger recorded the assignment stays pending and goes to the next gateway", async () => {
    const queue = uniqueId("gone");
    const stub = env.QUEUE.getByName(queue);
    // The shard's ledger calls go through; the first assignment's gateway closes its socket while
    // the ledger records it, and the shard has handled the close by the time the answer arrives.
    const first = await gateways.join(queue, "node-gone", { credit: 1 });
    const leases: string[] = [];
    const real = await runInDurableObject(stub, (instance, state) => {
      const holder = envOf(instance);
      const saved = holder.env;
      const connected = () =>
        state.storage.sql
          .exec<{ connected: number }>("SELECT connected FROM gateways WHERE node_id = 'node-gone'")
          .one().connected === 1;
      const batches = {
        getByName: (name: string) => {
          const target = saved.BATCH.getByName(name);
          return new Proxy(target, {
            get: (t, key) =>
              key === "markAssigned"
                ? async (...args: Parameters<typeof t.markAssigned>) => {
                    const outcome = await t.markAssigned(...args);
                    leases.push(args[1]);
                    if (leases.length === 1) {
                      // The test closes the socket (from its own context) once it sees this call.
                      const until = Date.now() + POLL.timeout;
                      while (connected() && Date.now() < until) await scheduler.wait(10);
                    }
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
      const batchId = await submitBatch(queue, [task("t")]);
      const sessionId = `${batchId}.0.0`;
      await expect.poll(() => leases.length, POLL).toBe(1);
      first.close();
      await shardSettled(stub);
      // The ledger holds a lease nobody received; the shard still holds the session, unleased.
      expect(await env.BATCH.getByName(batchId).session(sessionId)).toMatchObject({
        status: "ASSIGNED",
        lease_id: leases[0],
      });
      expect(await stub.stats()).toMatchObject({ pending: 1, leases: 0, gateways: [{ connected: false }] });
      const next = await gateways.join(queue, "node-next", { credit: 1 });
      const assign = await next.expect("assign");
      expect(assign.session.session_id).toBe(sessionId);
      expect(assign.lease_id).toBe(leases[1]);
      next.send({
        v: 1,
        type: "result",
        lease_id: assign.lease_id,
        result: resultFor(assign.session, "node-next"),
      });
      expect((await next.expect("ack")).status).toBe("accepted");
    } finally {
      await runInDurableObject(stub, (instance) => {
        envOf(instance).env = real;
      });
    }
  });

  it("a gateway that reconnects while the ledger records an assignment to its old socket stays connected and is sent the session on its new socket", async () => {
    const queue = uniqueId("reconnected");
    const stub = env.QUEUE.getByName(queue);
    const old = await gateways.join(queue, "node-r", { credit: 1 });
    const leases: string[] = [];
    const real = await runInDurableObject(stub, (instance, state) => {
      const holder = envOf(instance);
      const saved = holder.env;
      const connIdOf = () =>
        state.storage.sql
          .exec<{ conn_id: string }>("SELECT conn_id FROM gateways WHERE node_id = 'node-r'")
          .one().conn_id;
      const batches = {
        getByName: (name: string) => {
          const target = saved.BATCH.getByName(name);
          return new Proxy(target, {
            get: (t, key) =>
              key === "markAssigned"
                ? async (...args: Parameters<typeof t.markAssigned>) => {
                    const before = connIdOf();
                    const outcome = await t.markAssigned(...args);
                    leases.push(args[1]);
                    if (leases.length === 1) {
                      // The test reconnects the node (from its own context) once it sees this call.
                      const until = Date.now() + POLL.timeout;
                      while (connIdOf() === before && Date.now() < until) await scheduler.wait(10);
                    }
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
      const batchId = await submitBatch(queue, [task("t")]);
      await expect.poll(() => leases.length, POLL).toBe(1);
      const fresh = await gateways.join(queue, "node-r", { credit: 1 });
      await expect.poll(() => old.closed?.code, POLL).toBe(4409);
      const assign = await fresh.expect("assign");
      expect(assign.session.session_id).toBe(`${batchId}.0.0`);
      expect(assign.lease_id).toBe(leases[1]);
      expect((await stub.stats()).gateways).toMatchObject([
        { node_id: "node-r", connected: true, leases: 1 },
      ]);
      fresh.send({
        v: 1,
        type: "result",
        lease_id: assign.lease_id,
        result: resultFor(assign.session, "node-r"),
      });
      expect((await fresh.expect("ack")).status).toBe("accepted");
    } finally {
      await runInDurableObject(stub, (instance) => {
        envOf(instance).env = real;
      });
    }
  });

  it("a session that ended on the ledger while it waited on the shard is dropped there when dispatched, and no gateway is sent it", async () => {
    const queue = uniqueId("ended");
    const batchId = await submitBatch(queue, [task("t")]);
    const sessionId = `${batchId}.0.0`;
    const stub = env.QUEUE.getByName(queue);
    await expect.poll(async () => (await stub.stats()).pending, POLL).toBe(1);
    // The ledger ends the session (here: through its own RPCs) without the shard hearing of it.
    const ledger = env.BATCH.getByName(batchId);
    expect(await ledger.markAssigned(sessionId, "l_elsewhere", 1, "node-elsewhere")).toBe("assigned");
    const assignment = {
      session_id: sessionId,
      batch_id: batchId,
      task_id: "t",
      attempt: 1,
      instruction: "solve t",
    };
    expect(
      await ledger.submitResult(
        sessionId,
        "l_elsewhere",
        resultFor(assignment as SessionAssignment, "node-elsewhere"),
      ),
    ).toBe("accepted");
    const gw = await gateways.join(queue, "node-idle", { credit: 1 });
    await expect.poll(async () => (await stub.stats()).pending, POLL).toBe(0);
    await shardSettled(stub);
    await gw.expectNothingBeforeReply();
    expect(await stub.stats()).toMatchObject({ pending: 0, leases: 0, gateways: [{ credit: 1 }] });
    expect(await ledger.session(sessionId)).toMatchObject({ status: "COMPLETED", lease_id: "l_elsewhere" });
  });

  it("an enqueue replayed for a session its gateway holds at that attempt adds nothing; the session at the next attempt is added", async () => {
    const queue = uniqueId("replay");
    await submitBatch(queue, [task("t")]);
    const stub = env.QUEUE.getByName(queue);
    const gw = await gateways.join(queue, "node-r", { credit: 1 });
    const assign = await gw.expect("assign");
    expect(await stub.enqueue([assign.session])).toBe(0);
    await shardSettled(stub);
    expect(await stub.stats()).toMatchObject({ pending: 0, leases: 1 });
    expect(await stub.enqueue([{ ...assign.session, attempt: assign.session.attempt + 1 }])).toBe(1);
    expect(await stub.stats()).toMatchObject({ pending: 1, leases: 1 });
  });
});

describe("withdrawal (dispatch.ts, lease-store.ts)", () => {
  it("withdrawing a superseded lease ends only that lease: the session's current lease on the shard is kept and its gateway told nothing", async () => {
    const queue = uniqueId("superseded");
    const batchId = await submitBatch(queue, [task("t")]);
    const stub = env.QUEUE.getByName(queue);
    const gw = await gateways.join(queue, "node-s", { credit: 1 });
    const current = await gw.expect("assign");
    const sessionId = current.session.session_id;
    // A withdrawal goes to every shard of the queue: this one holds the later lease, not the earlier.
    expect(
      await stub.withdraw([{ session_id: sessionId, lease_id: "l_earlier", superseded: true }], "superseded"),
    ).toBe(0);
    await shardSettled(stub);
    await gw.expectNothingBeforeReply();
    expect(await stub.stats()).toMatchObject({ pending: 0, leases: 1 });
    gw.send({
      v: 1,
      type: "result",
      lease_id: current.lease_id,
      result: resultFor(current.session, "node-s"),
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    expect((await env.BATCH.getByName(batchId).session(sessionId))?.status).toBe("COMPLETED");
  });
});
