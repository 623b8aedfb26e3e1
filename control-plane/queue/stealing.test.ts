import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { GatewayPool, POLL, postBatch, resultFor, shardSettled, task, uniqueId } from "../testing/fixtures";
import { gatewayShard, parseShardName, sessionShard, shardName } from "./shards";

/** The vitest config gives queues named `sharded-…` four shards. */
const SHARDS = 4;
const CONFIG = env.POLAR_QUEUE_SHARDS;

/** The env a QueueDO was constructed with, so a test can wrap one of its bindings. */
const envOf = (instance: unknown) => instance as { env: Env };

const gateways = new GatewayPool();
afterEach(() => gateways.closeAll());

/** A node id whose gateway lands on shard `index` of `queue`. */
function nodeOnShard(queue: string, index: number, tag: string): string {
  const target = shardName(queue, index, SHARDS);
  for (let i = 0; ; i++) {
    const node = `${tag}-${i}`;
    if (gatewayShard(queue, node, CONFIG) === target) return node;
  }
}

/** A sharded queue holding one session of a new batch, pending on its home shard (the lender). */
async function oneSessionOnItsShard(extra: Parameters<typeof task>[1] = {}) {
  const queue = uniqueId("sharded");
  const batchId = uniqueId("b");
  expect((await postBatch({ batch_id: batchId, queue, tasks: [task("t", extra)] })).status).toBe(201);
  const sessionId = `${batchId}.0.0`;
  const home = sessionShard(queue, sessionId, CONFIG);
  const homeIndex = parseShardName(home).index;
  const otherIndex = (homeIndex + 1) % SHARDS;
  const lender = env.QUEUE.getByName(home);
  await expect.poll(async () => (await lender.stats()).pending, POLL).toBe(1);
  return {
    queue,
    batchId,
    sessionId,
    homeIndex,
    otherIndex,
    lender,
    thiefName: shardName(queue, otherIndex, SHARDS),
  };
}

/** The lender's pending rows with their loan columns. */
const pendingRows = (stub: DurableObjectStub) =>
  runInDurableObject(stub, (_, state) =>
    state.storage.sql
      .exec<{ session_id: string; attempt: number; loan_token: string | null; lent_to: string | null }>(
        "SELECT session_id, attempt, loan_token, lent_to FROM pending ORDER BY seq",
      )
      .toArray(),
  );

describe("work stealing: loans between shards", { timeout: 30_000 }, () => {
  it("a session requeued at a later attempt while its home shard still holds an unsettled loan of it is dispatched again", async () => {
    const { queue, batchId, sessionId, otherIndex, lender, thiefName } = await oneSessionOnItsShard({
      max_attempts: 2,
    });
    // A thief takes the session and runs it; its settle never reaches the lender.
    const loan = await lender.steal(thiefName, 1);
    expect(loan.payloads).toHaveLength(1);
    await env.QUEUE.getByName(thiefName).enqueue([JSON.parse(loan.payloads[0]!)]);
    const node = nodeOnShard(queue, otherIndex, "thief");
    const gw = await gateways.join(queue, node, { credit: 1 });
    const first = await gw.expect("assign");
    expect(first.session).toMatchObject({ session_id: sessionId, attempt: 1 });
    // The run fails for infrastructure reasons: the ledger requeues it as attempt 2, to its home shard.
    gw.send({
      v: 1,
      type: "result",
      lease_id: first.lease_id,
      result: {
        ...resultFor(first.session, node),
        status: "ERROR",
        error: { kind: "infra", message: "runtime failed to start" },
      },
    });
    expect((await gw.expect("ack")).status).toBe("accepted");
    const ledger = env.BATCH.getByName(batchId);
    await expect.poll(() => ledger.outboxSize(), POLL).toBe(0);
    expect(await ledger.session(sessionId)).toMatchObject({ status: "QUEUED", attempt: 2 });
    // The loan runs out; the thief's gateway asks for more work.
    await runInDurableObject(lender, (_, state) => {
      state.storage.sql.exec("UPDATE pending SET lent_until = 1");
    });
    await runDurableObjectAlarm(lender);
    gw.send({ v: 1, type: "credit", grant: 1 });
    const again = await gw.expect("assign", 15_000);
    expect(again.session).toMatchObject({ session_id: sessionId, attempt: 2 });
  });
  it("a loan lasts 60 s from the steal, lent to the thief that asked, and the lender's dispatch skips it meanwhile", async () => {
    const { lender, thiefName, homeIndex, queue, sessionId } = await oneSessionOnItsShard();
    const before = Date.now();
    const loan = await lender.steal(thiefName, 5);
    const after = Date.now();
    expect(loan.payloads.map((p) => JSON.parse(p).session_id)).toEqual([sessionId]);
    const [row] = await runInDurableObject(lender, (_, state) =>
      state.storage.sql
        .exec<{ loan_token: string; lent_to: string; lent_until: number }>(
          "SELECT loan_token, lent_to, lent_until FROM pending",
        )
        .toArray(),
    );
    expect(row).toMatchObject({ loan_token: loan.token, lent_to: thiefName });
    expect(row!.lent_until).toBeGreaterThanOrEqual(before + 60_000);
    expect(row!.lent_until).toBeLessThanOrEqual(after + 60_000);
    // The lender's alarm finds no loan run out, and its own gateway gets nothing.
    await runInDurableObject(lender, (_, state) => state.storage.setAlarm(Date.now()));
    await runDurableObjectAlarm(lender);
    const gw = await gateways.join(queue, nodeOnShard(queue, homeIndex, "home"), { credit: 1 });
    await shardSettled(lender);
    await gw.expectNothingBeforeReply();
    expect(await pendingRows(lender)).toEqual([
      { session_id: sessionId, attempt: 1, loan_token: loan.token, lent_to: thiefName },
    ]);
  });

  it("a loan that ran out while its ledger does not answer stays lent, neither dispatched nor dropped, until the ledger answers", async () => {
    const { batchId, sessionId, lender, thiefName } = await oneSessionOnItsShard();
    const loan = await lender.steal(thiefName, 1);
    expect(loan.payloads).toHaveLength(1);
    // The lender cannot reach the ledger (its answers are lost) when the loan runs out.
    const asked: string[] = [];
    const real = await runInDurableObject(lender, (instance, state) => {
      const holder = envOf(instance);
      const saved = holder.env;
      const batches = {
        getByName: (name: string) =>
          new Proxy(saved.BATCH.getByName(name), {
            get: (t, key) =>
              key === "sessionState"
                ? async (id: string) => {
                    asked.push(id);
                    throw new Error("ledger unavailable");
                  }
                : Reflect.get(t, key),
          }),
      };
      holder.env = { ...saved, BATCH: batches as unknown as Env["BATCH"] };
      state.storage.sql.exec("UPDATE pending SET lent_until = 1");
      return saved;
    });
    try {
      await runInDurableObject(lender, (_, state) => state.storage.setAlarm(Date.now()));
      await runDurableObjectAlarm(lender);
      // The alarm may have fired on its own first: wait until it asked the ledger.
      await expect.poll(() => asked.includes(sessionId), POLL).toBe(true);
      await shardSettled(lender);
      expect(await pendingRows(lender)).toEqual([
        { session_id: sessionId, attempt: 1, loan_token: loan.token, lent_to: thiefName },
      ]);
    } finally {
      await runInDurableObject(lender, (instance) => {
        envOf(instance).env = real;
      });
    }
    // The ledger answers: the session is still queued at that attempt, so the lender takes it back.
    expect(await env.BATCH.getByName(batchId).sessionState(sessionId)).toMatchObject({
      status: "QUEUED",
      attempt: 1,
    });
    await runInDurableObject(lender, (_, state) => state.storage.setAlarm(Date.now()));
    await runDurableObjectAlarm(lender);
    // (Or the alarm fired on its own just before: either way the row comes back.)
    await expect
      .poll(() => pendingRows(lender), POLL)
      .toEqual([{ session_id: sessionId, attempt: 1, loan_token: null, lent_to: null }]);
  });
});
