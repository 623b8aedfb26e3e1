/**
 * The diagnostic artifacts a real token-mode gateway uploads for its sessions (the simulated
 * engine's `/generate`, the real Qwen3 tokenizer): the logs of every session that ran — a failed
 * and a timed-out one included — and the text of every token id of a trajectory, aligned one
 * string per id with the ids the trajectory carries.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  expandTokenText,
  LogsUpload,
  type ResultMessage,
  ResultMessage as ResultMessageSchema,
  TokenTextUpload,
} from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type GatewayRig, startGatewayRig, TEST_MODEL } from "./testing/gateway-rig";
import { type AssignOptions, isResultOf, makeAssign } from "./testing/session-fixtures";

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
console.log("three calls done");
`;

let sim: SimEngineHandle;
let rig: GatewayRig;
let tok: ChatTokenizer;

beforeAll(async () => {
  [sim, tok] = await Promise.all([startSimEngine({ model: TEST_MODEL }), loadChatTokenizer()]);
  rig = await startGatewayRig({
    nodeId: "gpu-art",
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

async function run(o: AssignOptions, builder: "per_request" | null = null): Promise<ResultMessage> {
  const assign = makeAssign({ evaluator: null, prefix: "sa", ...o });
  if (builder) assign.session.builder = { strategy: builder, config: {} };
  rig.cp.send(assign);
  return ResultMessageSchema.parse(await rig.cp.waitFor(isResultOf(assign.lease_id), 60_000));
}

function uploaded(m: ResultMessage, kind: "logs" | "tokens"): unknown {
  const ref = m[`${kind}_ref`];
  expect(ref, `${kind}_ref`).toBeDefined();
  const stored = rig.cp.artifacts.find((a) => a.key === ref!.key);
  expect(stored?.lease_id).toBe(m.lease_id);
  return stored!.body;
}

describe("session artifacts of a token-mode gateway", { timeout: 60_000 }, () => {
  it("a failed session uploads its prepare and harness logs, stderr and exit included; no token text", async () => {
    const m = await run({
      command: `echo "working on it"; echo "fatal: config.toml not found" >&2; exit 3`,
      runtime: { backend: "local", prepare: [{ type: "exec", command: "echo prepared the workspace" }] },
    });
    expect(m.result.status).toBe("ERROR");
    const logs = LogsUpload.parse(uploaded(m, "logs"));
    const byName = Object.fromEntries(logs.streams.map((s) => [s.name, s]));
    expect(byName.prepare?.text).toContain("prepared the workspace");
    expect(byName["harness.stdout"]?.text).toContain("working on it");
    expect(byName["harness.stderr"]?.text).toContain("fatal: config.toml not found");
    expect(byName["harness.stderr"]).toMatchObject({ truncated: false });
    expect(m.tokens_ref).toBeUndefined();
  });

  it("a timed-out session uploads the logs written before it was killed", async () => {
    const m = await run({ command: `echo "waiting for the model"; sleep 30`, timeoutSeconds: 1 });
    expect(m.result.status).toBe("TIMEOUT");
    const logs = LogsUpload.parse(uploaded(m, "logs"));
    expect(logs.streams.find((s) => s.name === "harness.stdout")?.text).toContain("waiting for the model");
  });

  it("token text: one string per id of every trace, each id decoded alone, prompts whole again", async () => {
    const m = await run(
      { command: `node --input-type=module -e "$CHAT_SCRIPT"`, env: { CHAT_SCRIPT } },
      "per_request",
    );
    expect(m.result.status, m.result.error?.message).toBe("COMPLETED");
    const traces = m.result.trajectory.traces;
    expect(traces).toHaveLength(3);
    const upload = TokenTextUpload.parse(uploaded(m, "tokens"));
    // Later prompts repeat the conversation: only what is new is stored.
    expect(upload.traces[1]!.prompt_shared).toBeGreaterThan(0);
    const served = expandTokenText(upload, m.result.session_id);
    expect(served.traces).toHaveLength(traces.length);
    served.traces.forEach((t, i) => {
      expect(t.prompt).toHaveLength(traces[i]!.prompt_ids.length);
      expect(t.response).toHaveLength(traces[i]!.response_ids.length);
      expect(t.prompt).toEqual(traces[i]!.prompt_ids.map((id) => tok.decode([id])));
      expect(t.response).toEqual(traces[i]!.response_ids.map((id) => tok.decode([id])));
    });
    const logs = LogsUpload.parse(uploaded(m, "logs"));
    expect(logs.streams.find((s) => s.name === "harness.stdout")?.text).toContain("three calls done");
  });
});
