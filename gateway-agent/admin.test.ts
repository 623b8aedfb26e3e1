/**
 * Operator actions from the control plane reach the gateway's real proxy: `pause` fences new model
 * calls (a harness's call waits, it does not fail), `policy_version` is stamped on every later
 * completion, `resume` releases the waiting call; each action is answered with `admin_ack`. The v2
 * `fence` action carries the whole state (drain or abort), and the fence in `welcome` pauses a
 * gateway that (re)connects during a pause before any session of that connection runs. A task's
 * `min_policy_version` no engine reaches ends its session, within the proxy's bound, as an ERROR
 * that names the gap.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import {
  AdminAckMessage,
  type FenceState,
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
    gateway: {
      runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
      // Its /metrics tells when a harness's call waits at the fence.
      http: { host: "127.0.0.1", port: 0 },
      // Short, so a held call fails within the test; no other test here sets min_policy_version.
      policyVersionWaitMs: 800,
    },
  });
  ({ engine, cp } = rig);
});

afterEach(async () => {
  await rig?.stop();
});

/** Model calls the gateway's proxy holds at a paused fence (`polar_proxy_calls{state="waiting"}`). */
async function waitingCalls(): Promise<number> {
  const text = await (await fetch(`${rig.gateway.httpUrl}/metrics`)).text();
  const m = /^polar_proxy_calls\{state="waiting"[^}]*\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : -1;
}

/** Chat calls that reached the engine (its health probes aside). */
const chatCalls = () => engine.received.filter((r) => r.path === "/v1/chat/completions");

function admin(
  requestId: string,
  action: "pause" | "resume" | "policy_version" | "fence" | "status",
  extra: object = {},
) {
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
    await expect.poll(waitingCalls, { timeout: 15_000 }).toBe(1);
    expect(chatCalls()).toHaveLength(0);
    expect(cp.received.some((r) => r.message.type === "result")).toBe(false);

    const resumed = await admin("r3", "resume");
    expect(resumed).toMatchObject({ ok: true, paused: false });
    const result = (await cp.waitFor(isResultOf(a.lease_id))) as ResultMessage;
    expect(result.result.status).toBe("COMPLETED");
    expect(chatCalls()).toHaveLength(1);
    const trace = result.result.trajectory.traces[0];
    expect(trace?.metadata).toMatchObject({ policy_version: "step-7" });
  });
});

function fence(seq: number, paused: boolean, extra: Partial<FenceState> = {}): FenceState {
  return {
    queue: "default",
    paused,
    mode: paused ? "drain" : null,
    policy_version: null,
    fence_seq: seq,
    paused_at: paused ? Date.now() : null,
    updated_at: Date.now(),
    ...extra,
  };
}

describe("the v2 fence on a gateway", { timeout: 40_000 }, () => {
  it("abort mode aborts the call at the engine by its rid; the harness gets its answer after resume", async () => {
    engine.behaviour = { delayMs: 4000 };
    const a = makeAssign({ command: ASK, prefix: "abort" });
    cp.send(a);
    // The session's runtime and harness start first (as a session user of its own when root).
    await expect
      .poll(() => engine.received.filter((r) => r.path === "/v1/chat/completions").length, {
        timeout: 15_000,
      })
      .toBe(1);
    const started = Date.now();
    const paused = await admin("f1", "fence", {
      fence: fence(1, true, { mode: "abort", policy_version: "2" }),
      timeout_seconds: 10,
    });
    expect(paused).toMatchObject({ ok: true, paused: true, inflight: 0, policy_version: "2", fence_seq: 1 });
    expect(Date.now() - started).toBeLessThan(3000);
    const chat = engine.received.find((r) => r.path === "/v1/chat/completions")!;
    expect(chat.body.rid).toEqual(expect.any(String));
    expect(engine.received.find((r) => r.path === "/abort_request")?.body).toEqual({ rid: chat.body.rid });
    engine.behaviour = {};
    const resumed = await admin("f2", "fence", { fence: fence(2, false, { policy_version: "3" }) });
    expect(resumed).toMatchObject({ ok: true, paused: false, policy_version: "3", fence_seq: 2 });
    const result = (await cp.waitFor(isResultOf(a.lease_id))) as ResultMessage;
    expect(result.result.status).toBe("COMPLETED");
    // The aborted try is not recorded; the answer is, under the version after resume.
    expect(result.result.trajectory.traces).toHaveLength(1);
    expect(result.result.trajectory.traces[0]?.metadata).toMatchObject({ policy_version: "3" });
    // A stale fence (older seq) is refused, and changes nothing.
    expect(await admin("f3", "fence", { fence: fence(1, true) })).toMatchObject({ ok: false, paused: false });
  });

  it("a gateway that reconnects during a pause starts paused with the current version", async () => {
    cp.fence = fence(5, true, { policy_version: "8" });
    cp.drop();
    await cp.waitFor((m: GatewayMessage, r) => m.type === "hello" && r.connection === 1);
    const a = makeAssign({ command: ASK, prefix: "late" });
    cp.send(a);
    await cp.waitFor(
      (m: GatewayMessage): m is ProgressMessage =>
        m.type === "progress" && m.lease_id === a.lease_id && m.status === "RUNNING",
    );
    // The harness's call waits at the fence the welcome carried.
    await expect.poll(waitingCalls, { timeout: 15_000 }).toBe(1);
    expect(chatCalls()).toHaveLength(0);
    expect(await admin("s1", "status")).toMatchObject({
      ok: true,
      paused: true,
      policy_version: "8",
      fence_seq: 5,
    });
    await admin("f6", "fence", { fence: fence(6, false, { policy_version: "8" }) });
    const result = (await cp.waitFor(isResultOf(a.lease_id))) as ResultMessage;
    expect(result.result.trajectory.traces[0]?.metadata).toMatchObject({ policy_version: "8" });
  });
});

describe("min_policy_version on a gateway", { timeout: 40_000 }, () => {
  it("no engine at the version within the bound: the session ends at once as a configuration ERROR naming the gap", async () => {
    // The harness gets the proxy's 400, then would sit for 30 s: the gateway does not wait for it.
    const a = makeAssign({ command: `${ASK}; sleep 30`, prefix: "gap" });
    a.session.min_policy_version = 5;
    const started = Date.now();
    cp.send(a);
    const result = (await cp.waitFor(isResultOf(a.lease_id), 20_000)) as ResultMessage;
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(result.result).toMatchObject({ status: "ERROR", reward: null, error: { kind: "configuration" } });
    expect(result.result.error?.message).toMatch(
      /^min_policy_version: needs policy version 5; replicas report 0 \(http:\/\/127\.0\.0\.1:\d+: "default"\); held /,
    );
    expect(engine.received.filter((r) => r.path === "/v1/chat/completions")).toHaveLength(0);
  });
});
