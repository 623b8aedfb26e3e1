/**
 * MoE routing replay against a real model: the reference engine serves a tiny Qwen3-MoE
 * checkpoint with `--enable-return-routed-experts`, a proxy in token mode records the routes of
 * two chained turns (`routedExperts`), and the conversation builder's stitched trace must hold, for
 * every position but the last, exactly the experts the checkpoint's routers pick in a trainer's
 * plain forward pass over the trace's tokens. Needs the torch venv (`bash scripts/install-torch.sh`);
 * without it the suite is skipped with a summary line.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  initTinyModel,
  type ReferenceEngine,
  startReferenceEngine,
  torchPython,
} from "../../cli/reference-engine";
import { CompletionRecord, routedExpertRows, Trace } from "../../protocol";
import { buildConversationTraces, conversationTurnFromRecord } from "../../proxy/builders/conversation";
import { type RecordingProxy, startProxy } from "../../proxy/server";
import { forwardPassRoutedExperts } from "../support/forward-pass";
import { describeWith, probe } from "../support/optional-tools";

const ready = probe("torch") === null;
const SHAPE = { layers: 2, topK: 2, experts: 8 };
const quiet = { info() {}, warn() {}, error() {} };
let root = "";
let engine: ReferenceEngine | undefined;
let proxy: RecordingProxy | undefined;

beforeAll(async () => {
  if (!ready) return;
  root = mkdtempSync(join(tmpdir(), "polar-ref-moe-e2e-"));
  const python = torchPython();
  await initTinyModel(python, join(root, "moe"), {
    hidden: 16,
    layers: SHAPE.layers,
    contextLength: 256,
    seed: 4,
    favor: ["red", "blue", "<|im_end|>"],
    moeExperts: SHAPE.experts,
    moeTopK: SHAPE.topK,
  });
  engine = await startReferenceEngine({
    python,
    modelPath: join(root, "moe"),
    contextLength: 256,
    enableReturnRoutedExperts: true,
  });
  proxy = await startProxy({
    engine: "sglang",
    engineUrl: engine.url,
    modelServed: "polar-reference-tiny",
    contextLength: 256,
    routedExperts: { layers: SHAPE.layers, topK: SHAPE.topK },
    logger: quiet,
  });
}, 180_000);

afterAll(async () => {
  await proxy?.close();
  await engine?.process.stop();
  if (root) rmSync(root, { recursive: true, force: true });
});

async function chat(key: string, messages: Array<{ role: string; content: string }>): Promise<string> {
  const res = await fetch(`${proxy!.url}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ messages, temperature: 1, max_tokens: 8 }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]!.message
    .content;
}

describeWith(["torch"], "the reference engine's MoE routes through token mode", () => {
  it("two chained turns stitch into a trace whose routes are the routers' top-k of a plain forward pass", {
    timeout: 120_000,
  }, async () => {
    const info = (await (await fetch(`${engine!.url}/server_info`)).json()) as Record<string, unknown>;
    expect(info.enable_return_routed_experts).toBe(true);
    const { key } = proxy!.openSession("moe-1", { harness: "scripted" });
    const m1 = [{ role: "user", content: "Name a colour." }];
    const a1 = await chat(key, m1);
    await chat(key, [...m1, { role: "assistant", content: a1 }, { role: "user", content: "Another one." }]);
    const records = proxy!.completions("moe-1").map((r) => CompletionRecord.parse(r));
    expect(records).toHaveLength(2);
    const [a, b] = records;
    const held = a!.prompt_ids.length + a!.response_ids.length;
    expect(a!.routed_experts).toMatchObject({
      start: 0,
      rows: held - 1,
      layers: SHAPE.layers,
      top_k: SHAPE.topK,
    });
    // The second turn continues the first: its rows start at the first turn's last sampled token.
    expect(b!.routed_experts).toMatchObject({ start: held - 1 });
    const [trace] = buildConversationTraces(records.map(conversationTurnFromRecord));
    const sequence = [...trace!.prompt_ids, ...trace!.response_ids];
    expect(Trace.parse(trace).routed_experts).toMatchObject({ start: 0, rows: sequence.length - 1 });
    const expected = await forwardPassRoutedExperts(join(root, "moe"), sequence);
    expect(routedExpertRows(trace!.routed_experts!)).toEqual(expected);
  });
});
