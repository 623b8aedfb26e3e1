/**
 * A whole session through the gateway whose harness blows its `runtime.memory_mb`: the session
 * ends ERROR with an `agent` error naming the memory limit, the trajectory of the model call made
 * before the kill is still built, and `/health` says which limit mechanism is active.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { itWith } from "../../test/support/optional-tools";
import type { Gateway } from "../gateway";
import type { FakeControlPlane } from "../testing/fake-control-plane";
import { type GatewayRig, startGatewayRig } from "../testing/gateway-rig";
import { ASK, isResultOf, makeAssign } from "../testing/session-fixtures";
import { detectLimits, releaseLimits } from "./limits";

const support = detectLimits();

let rig: GatewayRig;
let cp: FakeControlPlane;
let gateway: Gateway;

beforeAll(async () => {
  rig = await startGatewayRig({
    nodeId: "gpu-node-1",
    token: "test-gateway-token",
    gateway: {
      runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
      http: { host: "127.0.0.1", port: 0 },
    },
  });
  ({ cp, gateway } = rig);
});
afterAll(async () => {
  await rig?.stop();
  releaseLimits();
});

describe("local runtime limits in a session", { timeout: 60_000 }, () => {
  it("/health names the active limit mechanism", async () => {
    const res = await fetch(`${gateway.httpUrl}/health`);
    const body = (await res.json()) as { local_limits?: { mechanism: string; detail: string } };
    expect(body.local_limits).toEqual({ mechanism: support.mechanism, detail: support.detail });
  });

  itWith(
    ["cgroups"],
    `an OOM-killed harness ends ERROR (agent) naming the memory limit, with its partial trajectory (${support.mechanism})`,
    async () => {
      const a = makeAssign({
        command: `${ASK} && node -e 'const a=[];for(let i=0;i<64;i++){a.push(Buffer.alloc(16<<20,1))}'`,
        runtime: { memory_mb: 96 },
      });
      cp.send(a);
      const { result } = await cp.waitFor(isResultOf(a.lease_id));
      expect(result.status).toBe("ERROR");
      expect(result.error?.kind).toBe("agent");
      expect(result.error?.message).toMatch(/memory limit of 96 MiB/);
      expect(result.trajectory.traces.length).toBeGreaterThan(0);
    },
  );
});
