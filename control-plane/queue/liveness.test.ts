import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { Gateway, POLL, uniqueId } from "../testing/fixtures";
import { IDLE_GAP_MS } from "./backlog";
import { reconcileAfterRestart } from "./liveness";
import { RESTART_LEASE_GRACE_MS } from "./settings";
import type { Shard } from "./shard";

const open: Gateway[] = [];
afterEach(() => {
  for (const gw of open.splice(0)) gw.close();
});

/** The liveness limit at the default ping interval (15 s): three intervals. */
const LIVENESS_MS = 45_000;

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
    await new Promise((r) => setTimeout(r, IDLE_GAP_MS * 2));
    await runDurableObjectAlarm(stub);
    await expect.poll(() => gw.closed?.code ?? null, POLL).toBe(4000);
    const row = (await stub.stats()).gateways.find((g) => g.node_id === "silent-node");
    expect(row).toMatchObject({ connected: false, last_seen_at: last });
    expect(row!.disconnected_at! - last).toBeGreaterThanOrEqual(LIVENESS_MS);
  });
});

describe("lease grace after a restart of the shard (QueueDO)", () => {
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
