/**
 * Operator actions from the control plane reach the gateway's real proxy: `pause` fences new model
 * calls (a harness's call waits, it does not fail), `policy_version` is stamped on every later
 * completion, `resume` releases the waiting call; each action is answered with `admin_ack`.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AdminAckMessage,
  type GatewayMessage,
  type ProgressMessage,
  type ResultMessage,
  WIRE_VERSION,
} from "../protocol";
import type { FixtureEngine } from "../proxy/testing/fixture-engine";
import type { FakeControlPlane } from "./testing/fake-control-plane";
import { type GatewayRig, startGatewayRig } from "./testing/gateway-rig";
import { ASK, isResultOf, makeAssign } from "./testing/session-fixtures";

let rig: GatewayRig;
let engine: FixtureEngine;
let cp: FakeControlPlane;

beforeEach(async () => {
  rig = await startGatewayRig({
    nodeId: "gpu-admin",
    token: "test-gateway-token",
    gateway: { runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } } },
  });
  ({ engine, cp } = rig);
});

afterEach(async () => {
  await rig?.stop();
});

function admin(requestId: string, action: "pause" | "resume" | "policy_version", extra: object = {}) {
  cp.send({ v: WIRE_VERSION, type: "admin", request_id: requestId, action, ...extra });
  return cp
    .waitFor((m: GatewayMessage) => m.type === "admin_ack" && m.request_id === requestId)
    .then((m) => AdminAckMessage.parse(m));
}

describe("admin messages on a gateway", { timeout: 40_000 }, () => {
  it("pause holds a harness's model call until resume; the policy version is stamped on its record", async () => {
    const policy = await admin("r1", "policy_version", { policy_version: "step-7" });
    expect(policy).toMatchObject({ ok: true, policy_version: "step-7", paused: false });

    const paused = await admin("r2", "pause", { timeout_seconds: 5 });
    expect(paused).toMatchObject({ ok: true, paused: true, inflight: 0 });

    const a = makeAssign({ command: ASK, prefix: "admin" });
    cp.send(a);
    await cp.waitFor(
      (m: GatewayMessage): m is ProgressMessage =>
        m.type === "progress" && m.lease_id === a.lease_id && m.status === "RUNNING",
    );
    // While paused the call waits at the fence: the engine sees nothing and no result comes.
    await new Promise((r) => setTimeout(r, 700));
    expect(engine.received).toHaveLength(0);
    expect(cp.received.some((r) => r.message.type === "result")).toBe(false);

    const resumed = await admin("r3", "resume");
    expect(resumed).toMatchObject({ ok: true, paused: false });
    const result = (await cp.waitFor(isResultOf(a.lease_id))) as ResultMessage;
    expect(result.result.status).toBe("COMPLETED");
    expect(engine.received).toHaveLength(1);
    const trace = result.result.trajectory.traces[0];
    expect(trace?.metadata).toMatchObject({ policy_version: "step-7" });
  });
});
