/**
 * The builder a session gets on a real gateway: a task without `builder` on a token-mode gateway
 * (`--engine sglang`, the simulated engine's real `/generate`) comes back as one trace per session
 * (`conversation`), while a task that names `per_request` still gets one trace per model call; the
 * trajectory's `metadata.builder_choice` says which builder ran and why.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { StrategySpec, Trajectory } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type GatewayRig, startGatewayRig, TEST_MODEL } from "./testing/gateway-rig";
import { isResultOf, makeAssign } from "./testing/session-fixtures";

const TOKEN = "test-gateway-token";

/** Three chat calls, each history the previous one plus the answer and a new question. */
const CHAT_SCRIPT = `
const messages = [];
for (const question of ["What is 2 + 2?", "And 3 + 3?", "Thanks, and 4 + 4?"]) {
  messages.push({ role: "user", content: question });
  const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
    method: "POST",
    headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json" },
    body: JSON.stringify({ model: process.env.OPENAI_MODEL, messages }),
  });
  const text = await res.text();
  if (!res.ok) { console.error(res.status, text); process.exit(2); }
  messages.push({ role: "assistant", content: JSON.parse(text).choices[0].message.content });
}
`;
const CHAT = `node --input-type=module -e "$CHAT_SCRIPT"`;

let sim: SimEngineHandle;
let rig: GatewayRig;

beforeAll(async () => {
  sim = await startSimEngine({ model: TEST_MODEL });
  rig = await startGatewayRig({
    nodeId: "gpu-tm",
    token: TOKEN,
    gateway: {
      engine: "sglang",
      engineUrl: sim.url,
      runtimeSettings: { local: { sandbox: "never", bwrapPath: "bwrap" } },
    },
  });
}, 60_000);
afterAll(async () => {
  await rig?.stop();
  await sim?.close();
});

async function run(builder: StrategySpec | null): Promise<Trajectory> {
  const assign = makeAssign({ command: CHAT, env: { CHAT_SCRIPT }, prefix: "bd" });
  assign.session.builder = builder;
  rig.cp.send(assign);
  const message = await rig.cp.waitFor(isResultOf(assign.lease_id), 60_000);
  expect(message.result.status, message.result.error?.message).toBe("COMPLETED");
  return message.result.trajectory;
}

describe("the builder of a token-mode gateway", () => {
  it("a task without builder gets conversation: one trace for the whole session", async () => {
    const t = await run(null);
    expect(t.traces).toHaveLength(1);
    expect(t.metadata.builder).toBe("conversation");
    expect(t.metadata.builder_choice).toEqual({
      strategy: "conversation",
      source: "engine_default",
      engine: "sglang",
    });
    // All three calls are in that one trace: three sampled stretches (mask 1) between bridged ids.
    const mask = t.traces[0]!.loss_mask;
    const stretches = mask.filter((m, i) => m === 1 && (i === 0 || mask[i - 1] === 0)).length;
    expect(stretches).toBe(3);
  });

  it("a task that names per_request still gets one trace per call", async () => {
    const t = await run({ strategy: "per_request", config: {} });
    expect(t.traces).toHaveLength(3);
    expect(t.metadata.builder).toBe("per_request");
    expect(t.metadata.builder_choice).toEqual({ strategy: "per_request", source: "task", engine: "sglang" });
  });
});
