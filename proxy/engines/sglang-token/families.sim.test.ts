/**
 * The second model family end to end in token mode: the simulated engine serving DeepSeek V3 (its
 * tokenizer, the family's tool template, the policy's answers written as DeepSeek samples them) and
 * a proxy started with `modelFamily: "deepseek_v3"`, driven with the OpenAI SDK through a tool turn.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject } from "../../../protocol";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import type { ChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { loadFamilyTokenizer, modelFamily } from "../../../tokenizer/families";
import { type RecordingProxy, startProxy } from "../../server";
import { CALCULATOR_TOOL } from "../../testing/calculator-tool";

const family = modelFamily("deepseek_v3");
const quiet = { info() {}, warn() {}, error() {} };
const tools = [CALCULATOR_TOOL];

let tok: ChatTokenizer;
let sim: SimEngineHandle;
let proxy: RecordingProxy;
beforeAll(async () => {
  tok = await loadFamilyTokenizer(family);
  sim = await startSimEngine({ modelFamily: family.name });
  proxy = await startProxy({
    engine: "sglang",
    engineUrl: sim.url,
    modelServed: family.model,
    modelFamily: family.name,
    logger: quiet,
  });
}, 60_000);
afterAll(async () => {
  await proxy?.close();
  await sim?.close();
});

describe("DeepSeek V3 in token mode against the simulated engine", () => {
  it("the engine says what it serves: the family's model and tokenizer", async () => {
    const info = (await (await fetch(`${sim.url}/model_info`)).json()) as JsonObject;
    expect(info.model_path).toBe(family.model);
    expect(String(info.tokenizer_path)).toContain("tokenizer-deepseek_v3");
  });

  it("a calculator turn comes back as tool_calls; the follow-up extends the chain with the sampled ids", async () => {
    const { key } = proxy.openSession("ds-1", { harness: "scripted" });
    const openai = new OpenAI({ apiKey: key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 17 * 23?" }];
    const r1 = await openai.chat.completions.create({ model: "m", messages: m1, tools, temperature: 0 });
    const c1 = r1.choices[0]!;
    expect(c1.finish_reason).toBe("tool_calls");
    const call = c1.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect([call.function.name, JSON.parse(call.function.arguments)]).toEqual([
      "calculator",
      { expression: "17 * 23" },
    ]);
    const m2: OpenAI.ChatCompletionMessageParam[] = [
      ...m1,
      c1.message,
      { role: "tool", tool_call_id: call.id, content: "391" },
    ];
    const r2 = await openai.chat.completions.create({ model: "m", messages: m2, tools, temperature: 0 });
    expect(r2.choices[0]!.message.content).toContain("391");

    const [a, b] = proxy.completions("ds-1").map((r) => CompletionRecord.parse(r));
    expect((b!.metadata.bridge as JsonObject).verdict).toBe("extended");
    // DeepSeek's ids: the prompt opens with its BOS (0), the sampled call ends with its EOS (1),
    // and the next prompt holds the first prompt and those sampled ids as they were.
    expect(a!.prompt_ids[0]).toBe(0);
    expect(a!.response_ids.at(-1)).toBe(1);
    expect(tok.decode(a!.response_ids)).toContain("<｜tool▁calls▁begin｜>");
    expect(b!.prompt_ids.slice(0, a!.prompt_ids.length + a!.response_ids.length)).toEqual([
      ...a!.prompt_ids,
      ...a!.response_ids,
    ]);
    expect(tok.decode(b!.prompt_ids)).toContain("<｜tool▁output▁begin｜>391<｜tool▁output▁end｜>");
  });
});

describe("DeepSeek V3 with parsing delegated to the simulated engine", () => {
  // The simulator's /parse_function_call knows `deepseekv3` (sim/parse-api.ts): without it the
  // delegated parse is SGLang's 500 for an unknown parser and the turn fails.
  it("the engine's deepseekv3 parser reads the call; the follow-up still extends the chain", async () => {
    const delegated = await startProxy({
      engine: "sglang",
      engineUrl: sim.url,
      modelServed: family.model,
      modelFamily: family.name,
      delegateParsing: true,
      logger: quiet,
    });
    try {
      const { key } = delegated.openSession("ds-delegated", { harness: "scripted" });
      const openai = new OpenAI({ apiKey: key, baseURL: `${delegated.url}/v1`, maxRetries: 0 });
      const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 17 * 23?" }];
      const r1 = await openai.chat.completions.create({ model: "m", messages: m1, tools, temperature: 0 });
      const call = r1.choices[0]!.message.tool_calls![0] as OpenAI.ChatCompletionMessageFunctionToolCall;
      expect([call.function.name, JSON.parse(call.function.arguments)]).toEqual([
        "calculator",
        { expression: "17 * 23" },
      ]);
      const r2 = await openai.chat.completions.create({
        model: "m",
        messages: [...m1, r1.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: "391" }],
        tools,
        temperature: 0,
      });
      expect(r2.choices[0]!.message.content).toContain("391");
      const records = delegated.completions("ds-delegated").map((r) => CompletionRecord.parse(r));
      expect((records[1]!.metadata.bridge as JsonObject).verdict).toBe("extended");
    } finally {
      await delegated.close();
    }
  });
});
