import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { Gateway, POLL, shardSettled, uniqueId } from "../testing/fixtures";
import { armAlarm, checkLiveness, LIVENESS_RECHECK_MS, reconcileAfterRestart } from "./liveness";
import type { QueueDO } from "./queue-do";
import { leaseGraceMs, RESTART_LEASE_GRACE_MS } from "./settings";
import type { Shard } from "./shard";
import { attachmentOf } from "./sockets";
import { STEAL_NUDGE_MS } from "./stealing";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

/** The liveness limit at the default ping interval (15 s): three intervals. */
const LIVENESS_MS = 45_000;

/** What these tests reach inside a QueueDO (private at compile time, there at run time). */
const inside = (obj: unknown) => obj as { env: Env; shard: Shard };

/** Opens a socket on `queue` and completes the hello of `nodeId` (credit 0: nothing is assigned). */
async function connectNode(queue: string, nodeId: string): Promise<Gateway> {
  const gw = await Gateway.connect(queue);
  open.push(gw);
  gw.hello(nodeId, 0);
  await gw.expect("welcome");
  return gw;
}

/**
 * Waits until the shard has been idle for the backlog's gap (backlog.ts): an alarm that starts
 * then counts every frame sent before as handled, so silence is judged as of that moment.
 */
async function caughtUp(stub: DurableObjectStub<QueueDO>): Promise<void> {
  await expect
    .poll(
      () =>
        runInDurableObject(stub, (obj) => {
          const now = Date.now();
          return inside(obj).shard.backlog.asOf(now) === now;
        }),
      POLL,
    )
    .toBe(true);
}

/** Backdates a gateway's hello and last message to `at`, as if nothing had come from it since. */
function lastFrameAt(state: DurableObjectState, nodeId: string, at: number): void {
  state.storage.sql.exec(
    "UPDATE gateways SET connected_at = ?, last_seen_at = ? WHERE node_id = ?",
    at,
    at,
    nodeId,
  );
}

/** A gateway's row as the shard stores it. */
function gatewayRow(state: DurableObjectState, nodeId: string) {
  return state.storage.sql
    .exec<{ connected: number; last_seen_at: number | null; disconnected_at: number | null }>(
      "SELECT connected, last_seen_at, disconnected_at FROM gateways WHERE node_id = ?",
      nodeId,
    )
    .one();
}

const leaseRows = (state: DurableObjectState) =>
  state.storage.sql
    .exec<{ lease_id: string; lost_at: number | null }>(
      "SELECT lease_id, lost_at FROM leases ORDER BY lease_id",
    )
    .toArray();
const addLease = (state: DurableObjectState, leaseId: string, nodeId: string) =>
  state.storage.sql.exec(
    "INSERT INTO leases (lease_id, session_id, batch_id, node_id, attempt, assigned_at) VALUES (?, ?, 'b-1', ?, 1, ?)",
    leaseId,
    `s-${leaseId}`,
    nodeId,
    Date.now(),
  );

describe("liveness of gateway sockets (QueueDO)", () => {
  it("arms the alarm for the moment a gateway's socket reaches the limit after its newest frame, with or without leases", async () => {
    const queue = uniqueId("live");
    const gw = await Gateway.connect(queue);
    open.push(gw);
    const before = Date.now();
    gw.hello("idle-node", 0);
    await gw.expect("welcome");
    const after = Date.now();
    const stub = env.QUEUE.getByName(queue);
    const alarm = await runInDurableObject(stub, (_, state) => state.storage.getAlarm());
    expect(alarm).not.toBeNull();
    expect(alarm!).toBeGreaterThanOrEqual(before + LIVENESS_MS);
    expect(alarm!).toBeLessThanOrEqual(after + LIVENESS_MS);
  });

  it("closes a socket silent for the limit when the alarm fires and records its last frame as last_seen_at", async () => {
    const queue = uniqueId("silent");
    const gw = await Gateway.connect(queue);
    open.push(gw);
    gw.hello("silent-node", 0);
    await gw.expect("welcome");
    const stub = env.QUEUE.getByName(queue);
    // As if the hello had come exactly one limit ago and nothing since (no ping was sent).
    const last = Date.now() - LIVENESS_MS;
    await runInDurableObject(stub, (_, state) => {
      state.storage.sql.exec("UPDATE gateways SET connected_at = ?, last_seen_at = ?", last, last);
    });
    // Silence is judged as of the last moment the dispatcher had every frame in hand: an idle
    // moment, as a real limit's worth of silence has (backlog.ts).
    await caughtUp(stub);
    await runDurableObjectAlarm(stub);
    await expect.poll(() => gw.closed?.code ?? null, POLL).toBe(4000);
    const row = (await stub.stats()).gateways.find((g) => g.node_id === "silent-node");
    expect(row).toMatchObject({ connected: false, last_seen_at: last });
    expect(row!.disconnected_at! - last).toBeGreaterThanOrEqual(LIVENESS_MS);
  });

  it("when the alarm fires it closes the silent gateway with 4000 'no ping' and keeps connected one that pinged and one that sent a message within the limit", async () => {
    const queue = uniqueId("mixed");
    const stub = env.QUEUE.getByName(queue);
    const silent = await connectNode(queue, "silent-node");
    const pinger = await connectNode(queue, "pinging-node");
    const talker = await connectNode(queue, "talking-node");
    await shardSettled(stub);
    // All three as if their hello came more than a limit ago; then two of them speak up.
    const old = Date.now() - LIVENESS_MS - 1_000;
    await runInDurableObject(stub, (_, state) => {
      for (const node of ["silent-node", "pinging-node", "talking-node"]) lastFrameAt(state, node, old);
    });
    // A ping is answered by the platform without waking the object: only its timestamp tells.
    pinger.send("ping");
    expect(await pinger.nextRaw()).toBe("pong");
    // Any other frame is the gateway's newest sign of life through last_seen_at.
    talker.send({ v: 1, type: "credit", grant: 1 });
    await expect
      .poll(
        async () => (await stub.stats()).gateways.find((g) => g.node_id === "talking-node")?.last_seen_at,
        POLL,
      )
      .toBeGreaterThan(old);
    // Silence is judged as of the last moment the object was caught up: the alarm's check must
    // count the ping and the credit above as handled.
    await caughtUp(stub);
    expect(await runDurableObjectAlarm(stub)).toBe(true);
    await expect.poll(() => silent.closed, POLL).toEqual({ code: 4000, reason: "no ping" });
    // The same check judged the other two: they must still be connected, their sockets open.
    const rows = (await stub.stats()).gateways;
    expect(Object.fromEntries(rows.map((g) => [g.node_id, g.connected]))).toEqual({
      "silent-node": false,
      "pinging-node": true,
      "talking-node": true,
    });
    await pinger.expectNothingBeforeReply();
    await talker.expectNothingBeforeReply();
    expect([pinger.closed, talker.closed]).toEqual([null, null]);
  });

  it("closes a socket silent for exactly the limit and keeps one silent for 1 ms less", async () => {
    const queue = uniqueId("boundary");
    const stub = env.QUEUE.getByName(queue);
    const atLimit = await connectNode(queue, "at-limit");
    const underLimit = await connectNode(queue, "under-limit");
    await shardSettled(stub);
    const seen = await runInDurableObject(stub, (obj, state) => {
      const { shard } = inside(obj);
      const t = Date.now();
      lastFrameAt(state, "at-limit", t);
      lastFrameAt(state, "under-limit", t + 1);
      // Judged as of t + limit: the object is idle, so that moment counts in full (backlog.ts).
      const now = t + LIVENESS_MS;
      const asOf = shard.backlog.asOf(now);
      checkLiveness(shard, now);
      return {
        judgedAsOf: asOf - now,
        atLimit: gatewayRow(state, "at-limit").connected,
        underLimit: gatewayRow(state, "under-limit").connected,
      };
    });
    expect(seen).toEqual({ judgedAsOf: 0, atLimit: 0, underLimit: 1 });
    await expect.poll(() => atLimit.closed, POLL).toEqual({ code: 4000, reason: "no ping" });
    await underLimit.expectNothingBeforeReply();
    expect(underLimit.closed).toBeNull();
  });

  it("a liveness close takes effect at detection: last_seen_at becomes the socket's last ping, the gateway is disconnected and its lease grace started before the socket's close completes", async () => {
    const queue = uniqueId("detect");
    const stub = env.QUEUE.getByName(queue);
    const gw = await connectNode(queue, "pinged-node");
    await shardSettled(stub);
    gw.send("ping");
    expect(await gw.nextRaw()).toBe("pong");
    const seen = await runInDurableObject(stub, (obj, state) => {
      const { shard } = inside(obj);
      addLease(state, "l-1", "pinged-node");
      const [ws] = state.getWebSockets();
      const pinged = state.getWebSocketAutoResponseTimestamp(ws!)!.getTime();
      // Its hello (and any message) a second before its last ping: the ping is its newest frame.
      lastFrameAt(state, "pinged-node", pinged - 1_000);
      const before = Date.now();
      checkLiveness(shard, pinged + LIVENESS_MS + 1_000);
      // Read before this callback returns: the close handshake, and webSocketClose, cannot run yet.
      return {
        pinged,
        before,
        after: Date.now(),
        row: gatewayRow(state, "pinged-node"),
        leases: leaseRows(state),
      };
    });
    // disconnected_at minus last_seen_at is the detection time: last_seen_at must be the ping's.
    expect(seen.row).toMatchObject({ connected: 0, last_seen_at: seen.pinged });
    expect(seen.row.disconnected_at).toBeGreaterThanOrEqual(seen.before);
    expect(seen.row.disconnected_at).toBeLessThanOrEqual(seen.after);
    expect(seen.leases).toEqual([
      { lease_id: "l-1", lost_at: seen.row.disconnected_at! + leaseGraceMs(env) },
    ]);
    await expect.poll(() => gw.closed, POLL).toEqual({ code: 4000, reason: "no ping" });
  });

  it("judges only a gateway's current connection: a socket without attachment, one before its hello, one its node has replaced and one of a gateway already disconnected stay open while a silent gateway is closed", async () => {
    const queue = uniqueId("stale");
    const stub = env.QUEUE.getByName(queue);
    const silent = await connectNode(queue, "silent-node");
    const replaced = await connectNode(queue, "replaced-node");
    const disconnected = await connectNode(queue, "disconnected-node");
    const beforeHello = await Gateway.connect(queue);
    open.push(beforeHello);
    await shardSettled(stub);
    const states = await runInDurableObject(stub, (obj, state) => {
      const { shard } = inside(obj);
      // A socket the object holds with no attachment at all: acceptGateway stores one as it
      // accepts, so this is the guard's case; the check must skip it, not throw on it.
      const bare = new WebSocketPair()[1];
      state.acceptWebSocket(bare, ["gateway"]);
      const t = Date.now();
      for (const node of ["silent-node", "replaced-node", "disconnected-node"]) lastFrameAt(state, node, t);
      // As if replaced-node had said hello again on a newer socket whose close of this one is
      // still under way (a dead link never completes it), and disconnected-node had been judged
      // already: neither socket speaks for its gateway's row any more.
      state.storage.sql.exec("UPDATE gateways SET conn_id = 'c_successor' WHERE node_id = 'replaced-node'");
      state.storage.sql.exec(
        "UPDATE gateways SET connected = 0, disconnected_at = ? WHERE node_id = 'disconnected-node'",
        t,
      );
      checkLiveness(shard, t + LIVENESS_MS + 1_000);
      const result = Object.fromEntries(
        state.getWebSockets().map((ws) => {
          const att = attachmentOf(ws);
          return [att === null ? "bare" : (att.nodeId ?? "before-hello"), ws.readyState];
        }),
      );
      bare.close(1000, "test done");
      return result;
    });
    expect(states).toEqual({
      "silent-node": WebSocket.CLOSING,
      "replaced-node": WebSocket.OPEN,
      "disconnected-node": WebSocket.OPEN,
      "before-hello": WebSocket.OPEN,
      bare: WebSocket.OPEN,
    });
    await expect.poll(() => silent.closed, POLL).toEqual({ code: 4000, reason: "no ping" });
    for (const gw of [replaced, disconnected, beforeHello]) {
      await gw.expectNothingBeforeReply();
      expect(gw.closed).toBeNull();
    }
  });
});

describe("what a gateway's disconnect starts (QueueDO)", () => {
  it("answers a drain waiting for the gateway's ack with 'gateway disconnected' when its socket closes", async () => {
    const queue = uniqueId("drain");
    const stub = env.QUEUE.getByName(queue);
    const gw = await connectNode(queue, "draining-node");
    const answer = stub.drain("draining-node");
    expect(await gw.expect("admin")).toMatchObject({ action: "drain" });
    gw.close();
    expect(await answer).toMatchObject({
      node_id: "draining-node",
      ok: false,
      error: "gateway disconnected",
    });
  });

  it("arms the alarm for the end of the lease grace of a gateway whose socket closed", async () => {
    const queue = uniqueId("grace-alarm");
    const stub = env.QUEUE.getByName(queue);
    const gw = await connectNode(queue, "leaving-node");
    await shardSettled(stub);
    const armed = await runInDurableObject(stub, (obj, state) => {
      // A grace (5 s) that ends before the liveness alarm armed at the hello (45 s).
      const o = inside(obj);
      o.env = { ...o.env, POLAR_LEASE_GRACE_SECONDS: "5" };
      addLease(state, "l-1", "leaving-node");
      return state.storage.getAlarm();
    });
    expect(armed! - Date.now()).toBeGreaterThan(5_000);
    gw.close();
    await expect
      .poll(
        async () => (await runInDurableObject(stub, (_, state) => leaseRows(state)))[0]?.lost_at ?? null,
        POLL,
      )
      .not.toBeNull();
    const [lease] = await runInDurableObject(stub, (_, state) => leaseRows(state));
    await expect
      .poll(() => runInDurableObject(stub, (_, state) => state.storage.getAlarm()), POLL)
      .toBe(lease!.lost_at);
    // The lease's batch does not exist: do not let the alarm ask its ledger after this test.
    await runInDurableObject(stub, async (_, state) => {
      state.storage.sql.exec("DELETE FROM leases");
      await state.storage.deleteAlarm();
    });
  });
});

describe("armAlarm (QueueDO)", () => {
  it("re-arms one recheck interval (1 s) ahead, not at once, when a socket's limit came due while the object was behind", async () => {
    const queue = uniqueId("behind");
    const stub = env.QUEUE.getByName(queue);
    await connectNode(queue, "quiet-node");
    await shardSettled(stub);
    const seen = await runInDurableObject(stub, async (obj, state) => {
      const { shard } = inside(obj);
      const due = Date.now() - 10;
      lastFrameAt(state, "quiet-node", due - LIVENESS_MS);
      // An event in progress, and the object last caught up before the limit came due: frames
      // from before `due` may still be waiting, so the socket cannot be judged yet.
      shard.backlog.begin(Date.now());
      try {
        shard.backlog.caughtUpAt = due - 1;
        const before = Date.now();
        await armAlarm(shard);
        const after = Date.now();
        const alarm = await state.storage.getAlarm();
        // The gateway's row is backdated: no recheck after this test, which would close it.
        await state.storage.deleteAlarm();
        return { before, after, alarm };
      } finally {
        shard.backlog.end(Date.now());
      }
    });
    expect(seen.alarm).toBeGreaterThanOrEqual(seen.before + LIVENESS_RECHECK_MS);
    expect(seen.alarm).toBeLessThanOrEqual(seen.after + LIVENESS_RECHECK_MS);
  });

  it("arms a steal nudge 5 s ahead for pending sessions on a shard with siblings, and nothing for them on an unsharded queue", async () => {
    // The vitest config gives queues named sharded-… four shards; a plain name has one.
    const arm = (name: string) =>
      runInDurableObject(env.QUEUE.getByName(name), async (obj, state) => {
        const { shard } = inside(obj);
        const initial = await state.storage.getAlarm();
        state.storage.sql.exec(
          "INSERT INTO pending (session_id, batch_id, attempt, priority, payload, enqueued_at) VALUES ('b-1.0.0', 'b-1', 1, 0, '{}', ?)",
          Date.now(),
        );
        const before = Date.now();
        await armAlarm(shard);
        const alarm = await state.storage.getAlarm();
        const after = Date.now();
        // Leave no alarm to dispatch a session nobody submitted.
        state.storage.sql.exec("DELETE FROM pending");
        await state.storage.deleteAlarm();
        return { siblings: shard.siblings.length, initial, before, after, alarm };
      });
    const sharded = await arm(`${uniqueId("sharded-nudge")}#0`);
    expect(sharded).toMatchObject({ siblings: 3, initial: null });
    expect(sharded.alarm).toBeGreaterThanOrEqual(sharded.before + STEAL_NUDGE_MS);
    expect(sharded.alarm).toBeLessThanOrEqual(sharded.after + STEAL_NUDGE_MS);
    expect(await arm(uniqueId("plain-nudge"))).toMatchObject({ siblings: 0, initial: null, alarm: null });
  });
});

describe("lease grace after a restart of the shard (QueueDO)", () => {
  it("gives the leases of a gateway whose socket did not survive at least 30 s over a configured 5 s; a socket that closes keeps the 5 s", async () => {
    const queue = uniqueId("restart");
    const stub = env.QUEUE.getByName(queue);
    const gateways: Gateway[] = [];
    for (const node of ["restarted-node", "leaving-node"]) {
      const gw = await Gateway.connect(queue);
      open.push(gw);
      gateways.push(gw);
      gw.hello(node, 0);
      await gw.expect("welcome");
    }
    const marks = await runInDurableObject(stub, (obj, state) => {
      // A short configured grace, as the fault matrix runs with (read through the object's env).
      const o = obj as unknown as { env: Env; shard: Shard };
      o.env = { ...o.env, POLAR_LEASE_GRACE_SECONDS: "5" };
      addLease(state, "l-1", "restarted-node");
      addLease(state, "l-2", "leaving-node");
      // As after a restart: the row of restarted-node names the socket of the instance that died.
      state.storage.sql.exec(
        "UPDATE gateways SET conn_id = 'conn-of-the-old-instance' WHERE node_id = 'restarted-node'",
      );
      const before = Date.now();
      reconcileAfterRestart(o.shard);
      return { before, after: Date.now() };
    });
    const closedAt = Date.now();
    gateways[1]!.close();
    await expect
      .poll(
        async () => (await runInDurableObject(stub, (_, state) => leaseRows(state)))[1]?.lost_at ?? null,
        POLL,
      )
      .not.toBeNull();
    const [restarted, leaving] = await runInDurableObject(stub, (_, state) => leaseRows(state));
    expect(restarted!.lost_at).toBeGreaterThanOrEqual(marks.before + RESTART_LEASE_GRACE_MS);
    expect(restarted!.lost_at).toBeLessThanOrEqual(marks.after + RESTART_LEASE_GRACE_MS);
    expect(leaving!.lost_at! - closedAt).toBeGreaterThanOrEqual(5_000 - 50);
    expect(leaving!.lost_at! - Date.now()).toBeLessThanOrEqual(5_000);
  });
});
