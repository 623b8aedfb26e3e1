import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { afterEach, describe, expect, it } from "vitest";
import { Gateway, uniqueId } from "../testing/fixtures";

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
    await runDurableObjectAlarm(stub);
    await expect.poll(() => gw.closed?.code ?? null).toBe(4000);
    const row = (await stub.stats()).gateways.find((g) => g.node_id === "silent-node");
    expect(row).toMatchObject({ connected: false, last_seen_at: last });
    expect(row!.disconnected_at! - last).toBeGreaterThanOrEqual(LIVENESS_MS);
  });
});
