/**
 * Whole sessions through the gateway that hit their runtime limits: a harness that blows its
 * `runtime.memory_mb` (or `storage_mb`) ends ERROR with an `agent` error naming the limit, the
 * trajectory of the model call made before the kill is still built, and `/health` says which
 * limit mechanism is active; a prepare step over the limit, or `storage_mb` on a runtime that
 * cannot measure its storage, is a configuration error.
 */
import path from "node:path";
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

describe("runtime.storage_mb in a session", { timeout: 60_000 }, () => {
  const CUSTOM_RUNTIME = `${path.join(import.meta.dirname, "..", "testing", "modules", "custom-runtime.mjs")}:create`;

  it("a harness that writes past the limit ends ERROR (agent) naming the limit, ungraded, with its trajectory", async () => {
    const a = makeAssign({
      command: `${ASK} && for i in $(seq 1 100); do dd if=/dev/zero of=f$i bs=1M count=1 status=none; sleep 0.05; done`,
      runtime: { storage_mb: 4 },
    });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.status).toBe("ERROR");
    expect(result.error?.kind).toBe("agent");
    expect(result.error?.message).toMatch(
      /^harness 'shell' step 0 stopped: storage limit of 4 MiB \(runtime\.storage_mb\) hit: the session holds \d+ MiB$/,
    );
    expect(result.trajectory.traces.length).toBeGreaterThan(0); // the call before the writes
    expect(result.reward).toBeNull(); // not graded: the session's storage is full
    expect(result.trajectory.metadata.evaluation).toBeUndefined();
  });

  it("a prepare step past the limit is a configuration error (another attempt would hit it again)", async () => {
    const a = makeAssign({
      command: ASK,
      runtime: {
        storage_mb: 2,
        prepare: [
          { type: "exec", command: "dd if=/dev/zero of=data bs=1M count=5 status=none", max_attempts: 3 },
        ],
      },
    });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.error).toEqual({
      kind: "configuration",
      message: expect.stringMatching(
        /^runtime\.prepare\[0\] \(exec\) stopped: storage limit of 2 MiB \(runtime\.storage_mb\) hit/,
      ),
    });
    expect(result.trajectory.traces).toEqual([]); // the harness never ran
  });

  it("a runtime that cannot measure its storage refuses storage_mb at INIT, naming the field and the runtime", async () => {
    const a = makeAssign({ command: ASK, runtime: { import_path: CUSTOM_RUNTIME, storage_mb: 100 } });
    cp.send(a);
    const { result } = await cp.waitFor(isResultOf(a.lease_id));
    expect(result.status).toBe("ERROR");
    expect(result.error).toEqual({
      kind: "configuration",
      message: `runtime.storage_mb: the custom runtime '${CUSTOM_RUNTIME}' (runtime.import_path) cannot enforce it (it has no storageBytes()); drop runtime.storage_mb or use a runtime that measures its storage`,
    });
    // The same task without storage_mb runs on that runtime.
    const b = makeAssign({ command: ASK, runtime: { import_path: CUSTOM_RUNTIME } });
    cp.send(b);
    expect((await cp.waitFor(isResultOf(b.lease_id))).result.status).toBe("COMPLETED");
  });
});
