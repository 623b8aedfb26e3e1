/**
 * Parallel tool calls end to end in token mode: the simulated engine emits two `<tool_call>` blocks
 * in one turn when the user asks for "two tool calls at once"; each official SDK (OpenAI Chat,
 * Anthropic Messages, OpenAI Responses) sees both calls with distinct ids, sends both results back
 * under those ids, and the follow-up turn is bridged (`extended`) with the recorded ids exactly
 * the engine's.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const ASK = "Make two tool calls at once: what is 12 + 30 and what is 7 * 6?";
const schema = { type: "object" as const, properties: { expression: { type: "string" } } };

let tok: ChatTokenizer;
let TOOL_CALL: number;
let sim: SimEngineHandle;
let proxy: RecordingProxy;

beforeAll(async () => {
  tok = await loadChatTokenizer();
  TOOL_CALL = tok.tokenId("<tool_call>")!;
  sim = await startSimEngine({ model: MODEL });
  proxy = await startProxy({ engine: "sglang", engineUrl: sim.url, modelServed: MODEL, logger: quiet });
}, 30_000);
afterAll(async () => {
  await proxy.close();
  await sim.close();
});

const records = (id: string) => proxy.completions(id).map((r) => CompletionRecord.parse(r));
const bridgeOf = (r: CompletionRecord) => r.metadata.bridge as JsonObject;

/** The engine's own answer to the recorded prompt ids and sampling: what the record must hold. */
async function engineAnswer(
  sessionId: string,
  rec: CompletionRecord,
): Promise<{ ids: number[]; lps: number[] }> {
  const { rid: _rid, ...generate } = rec.request.generate as JsonObject;
  const res = await fetch(`${sim.url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-smg-routing-key": sessionId },
    body: JSON.stringify({ ...generate, input_ids: rec.prompt_ids }),
  });
  expect(res.status).toBe(200);
  const body = (await res.json()) as { meta_info: { output_token_logprobs: Array<[number, number]> } };
  return {
    ids: body.meta_info.output_token_logprobs.map((e) => e[1]),
    lps: body.meta_info.output_token_logprobs.map((e) => e[0]),
  };
}

/**
 * The checks every family shares: two calls sampled in the first turn, the second turn extends the
 * first exactly, the recorded ids are the engine's, and the ids the harness saw and sent back are
 * the ones the internal chat form carries.
 */
async function checkRoundTrip(sessionId: string, callIds: string[]): Promise<void> {
  const [a, b] = records(sessionId);
  expect(records(sessionId)).toHaveLength(2);
  expect(a!.response_ids.filter((x) => x === TOOL_CALL)).toHaveLength(2);
  expect(a!.finish_reason).toBe("tool_calls");
  expect(bridgeOf(a!).verdict).toBe("new_chain");
  expect(bridgeOf(b!)).toMatchObject({ verdict: "extended", parent_turn_id: bridgeOf(a!).turn_id });
  expect(b!.prompt_ids.slice(0, a!.prompt_ids.length + a!.response_ids.length)).toEqual([
    ...a!.prompt_ids,
    ...a!.response_ids,
  ]);
  for (const rec of [a!, b!]) {
    const direct = await engineAnswer(sessionId, rec);
    expect(rec.response_ids).toEqual(direct.ids);
    expect(rec.response_logprobs).toEqual(direct.lps);
  }
  // The ids survive the family transform into the internal form, in order.
  const messages = b!.request.messages as JsonObject[];
  const assistant = messages.find((m) => m.role === "assistant")!;
  expect((assistant.tool_calls as JsonObject[]).map((c) => c.id)).toEqual(callIds);
  expect(messages.filter((m) => m.role === "tool").map((m) => m.tool_call_id)).toEqual(callIds);
  expect(tok.decode(b!.response_ids)).toMatch(/12 \+ 30 = 42 and 7 \* 6 = 42\./);
}

describe("parallel tool calls through the official SDKs (token mode, simulated engine)", () => {
  it("OpenAI Chat Completions", async () => {
    const id = "par-chat";
    const client = new OpenAI({
      apiKey: proxy.openSession(id).key,
      baseURL: `${proxy.url}/v1`,
      maxRetries: 0,
    });
    const tools: OpenAI.ChatCompletionTool[] = [
      { type: "function", function: { name: "calculator", parameters: schema } },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: ASK }];
    const first = await client.chat.completions.create({ model: "gpt-x", messages, tools });
    const msg = first.choices[0]!.message;
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    const calls = (msg.tool_calls ?? []) as OpenAI.ChatCompletionMessageFunctionToolCall[];
    expect(calls.map((c) => JSON.parse(c.function.arguments))).toEqual([
      { expression: "12 + 30" },
      { expression: "7 * 6" },
    ]);
    expect(new Set(calls.map((c) => c.id)).size).toBe(2);
    messages.push(msg, ...calls.map((c) => ({ role: "tool" as const, tool_call_id: c.id, content: "42" })));
    const second = await client.chat.completions.create({ model: "gpt-x", messages, tools });
    expect(second.choices[0]!.message.content).toBe("12 + 30 = 42 and 7 * 6 = 42.");
    await checkRoundTrip(
      id,
      calls.map((c) => c.id),
    );
  });

  it("Anthropic Messages", async () => {
    const id = "par-anthropic";
    const client = new Anthropic({ apiKey: proxy.openSession(id).key, baseURL: proxy.url, maxRetries: 0 });
    const tools: Anthropic.Tool[] = [{ name: "calculator", input_schema: schema }];
    const messages: Anthropic.MessageParam[] = [{ role: "user", content: ASK }];
    const first = await client.messages.create({ model: "claude-x", max_tokens: 512, messages, tools });
    expect(first.stop_reason).toBe("tool_use");
    const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
    expect(uses.map((u) => u.input)).toEqual([{ expression: "12 + 30" }, { expression: "7 * 6" }]);
    expect(new Set(uses.map((u) => u.id)).size).toBe(2);
    messages.push(
      { role: "assistant", content: first.content },
      {
        role: "user",
        content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: "42" })),
      },
    );
    const second = await client.messages.create({ model: "claude-x", max_tokens: 512, messages, tools });
    const text = second.content.find((b) => b.type === "text");
    expect(text?.type === "text" && text.text).toBe("12 + 30 = 42 and 7 * 6 = 42.");
    await checkRoundTrip(
      id,
      uses.map((u) => u.id),
    );
  });

  it("OpenAI Responses", async () => {
    const id = "par-responses";
    const client = new OpenAI({
      apiKey: proxy.openSession(id).key,
      baseURL: `${proxy.url}/v1`,
      maxRetries: 0,
    });
    const tools: OpenAI.Responses.Tool[] = [
      { type: "function", name: "calculator", parameters: schema, strict: false },
    ];
    const input: OpenAI.Responses.ResponseInputItem[] = [{ role: "user", content: ASK }];
    const first = await client.responses.create({ model: "gpt-x", input, tools, store: false });
    const calls = first.output.filter(
      (o): o is OpenAI.Responses.ResponseFunctionToolCall => o.type === "function_call",
    );
    expect(calls.map((c) => JSON.parse(c.arguments))).toEqual([
      { expression: "12 + 30" },
      { expression: "7 * 6" },
    ]);
    expect(new Set(calls.map((c) => c.call_id)).size).toBe(2);
    input.push(
      ...(first.output as OpenAI.Responses.ResponseInputItem[]),
      ...calls.map((c) => ({ type: "function_call_output" as const, call_id: c.call_id, output: "42" })),
    );
    const second = await client.responses.create({ model: "gpt-x", input, tools, store: false });
    expect(second.output_text).toBe("12 + 30 = 42 and 7 * 6 = 42.");
    await checkRoundTrip(
      id,
      calls.map((c) => c.call_id),
    );
  });
});
