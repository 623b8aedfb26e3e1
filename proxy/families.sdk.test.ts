/**
 * Each API family driven by its official SDK, as a harness would use it, through the proxy to the
 * simulated engine (real Qwen3 tokenizer and template, scripted policy): tools, images, reasoning,
 * streaming and errors, and the records they leave.
 */
import Anthropic from "@anthropic-ai/sdk";
import { GoogleGenAI } from "@google/genai";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord } from "../protocol";
import { type SimEngineHandle, startSimEngine } from "../sim/server";
import { decodeReasoning } from "./json";
import { type RecordingProxy, startProxy } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };
const QUESTION = "What is 17 * 23?";
const PNG_1PX =
  "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
/** Standard base64 with padding: what every family's schema accepts for the reasoning token. */
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const calcSchema = {
  type: "object" as const,
  properties: { expression: { type: "string" } },
  required: ["expression"],
};

let sim: SimEngineHandle;
let proxy: RecordingProxy;
let n = 0;

beforeAll(async () => {
  sim = await startSimEngine({ model: MODEL });
  proxy = await startProxy({
    engine: "sglang-openai",
    engineUrl: sim.url,
    modelServed: MODEL,
    logger: quiet,
  });
});
afterAll(async () => {
  await proxy.close();
  await sim.close();
});

function session(): { id: string; key: string } {
  const id = `sdk-${++n}`;
  return { id, key: proxy.openSession(id, { task_id: "t" }).key };
}

function records(id: string): CompletionRecord[] {
  return proxy.completions(id).map((r) => CompletionRecord.parse(r));
}

describe("OpenAI Chat Completions via the openai SDK", () => {
  it("round-trips a tool call and its result, recording exact ids", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const tools = [{ type: "function" as const, function: { name: "calculator", parameters: calcSchema } }];
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "developer", content: "Use tools." },
      { role: "user", content: QUESTION },
    ];
    const first = await client.chat.completions.create({ model: "gpt-4o", messages, tools, temperature: 0 });
    expect(first.model).toBe("gpt-4o");
    const call = first.choices[0]!.message.tool_calls![0]!;
    expect(first.choices[0]!.finish_reason).toBe("tool_calls");
    expect(call.type === "function" && call.function.name).toBe("calculator");
    messages.push(first.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: "391" });
    const second = await client.chat.completions.create({ model: "gpt-4o", messages, tools, temperature: 0 });
    expect(second.choices[0]!.message.content).toContain("391");
    const recs = records(s.id);
    expect(recs.map((r) => r.api_type)).toEqual(["openai_chat", "openai_chat"]);
    // The served request merged `developer` into the leading system message.
    expect((recs[0]!.request.messages as Array<{ role: string }>)[0]!.role).toBe("system");
    // Turn 2's prompt extends turn 1's prompt (server-side templating of the same history).
    expect(recs[1]!.prompt_ids.slice(0, recs[0]!.prompt_ids.length)).toEqual(recs[0]!.prompt_ids);
    expect(recs[1]!.response_logprobs).toHaveLength(recs[1]!.response_ids.length);
  });

  it("streams chunks that add up to the non-streamed answer, with usage", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const messages = [{ role: "user" as const, content: QUESTION }];
    const whole = await client.chat.completions.create({ model: "m", messages, temperature: 0 });
    const stream = await client.chat.completions.create({
      model: "m",
      messages,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = "";
    let reasoning = "";
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta?.content ?? "";
      reasoning +=
        (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? "";
      if (chunk.usage) usage = chunk.usage;
    }
    expect(text).toBe(whole.choices[0]!.message.content);
    expect(reasoning.length).toBeGreaterThan(0);
    expect(usage?.completion_tokens).toBe(records(s.id)[1]!.response_ids.length);
  });

  it("passes images through as image_url parts", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const url = `data:image/png;base64,${PNG_1PX}`;
    await client.chat.completions.create({
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Describe." },
            { type: "image_url", image_url: { url } },
          ],
        },
      ],
    });
    const served = records(s.id)[0]!.request.messages as Array<{ content: unknown }>;
    expect(served[0]!.content).toEqual([
      { type: "text", text: "Describe." },
      { type: "image_url", image_url: { url } },
    ]);
  });

  it("refuses an unknown key with a 401 the SDK understands, and normalises context-length errors", async () => {
    const bad = new OpenAI({ apiKey: "sk-polar-nope", baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    await expect(
      bad.chat.completions.create({ model: "m", messages: [{ role: "user", content: "hi" }] }),
    ).rejects.toBeInstanceOf(OpenAI.AuthenticationError);
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const err = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "word ".repeat(41_000) }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.BadRequestError);
    expect((err as InstanceType<typeof OpenAI.BadRequestError>).code).toBe("context_length_exceeded");
    expect(records(s.id)).toHaveLength(0);
  });
});

describe("Anthropic Messages via @anthropic-ai/sdk", () => {
  const tools = [{ name: "calculator", description: "Evaluates arithmetic.", input_schema: calcSchema }];

  it("round-trips thinking, tool_use and tool_result", async () => {
    const s = session();
    const client = new Anthropic({ apiKey: s.key, baseURL: proxy.url, maxRetries: 0 });
    const first = await client.messages.create({
      model: "claude-harness",
      max_tokens: 512,
      system: [{ type: "text", text: "x-anthropic-billing-header: cc_version=1\nYou are careful." }],
      messages: [{ role: "user", content: QUESTION }],
      tools,
    });
    expect(first.model).toBe("claude-harness");
    expect(first.stop_reason).toBe("tool_use");
    expect(first.content.map((b) => b.type)).toEqual(["thinking", "tool_use"]);
    const use = first.content.find((b) => b.type === "tool_use")!;
    expect(use.type === "tool_use" && use.input).toEqual({ expression: "17 * 23" });
    const second = await client.messages.create({
      model: "claude-harness",
      max_tokens: 512,
      messages: [
        { role: "user", content: QUESTION },
        { role: "assistant", content: first.content },
        {
          role: "user",
          content: [
            { type: "tool_result", tool_use_id: use.type === "tool_use" ? use.id : "", content: "391" },
          ],
        },
      ],
      tools,
    });
    expect(second.stop_reason).toBe("end_turn");
    expect(second.content.find((b) => b.type === "text")).toMatchObject({
      text: expect.stringContaining("391"),
    });
    const [r1, r2] = records(s.id);
    expect(r1!.api_type).toBe("anthropic");
    const sys = (r1!.request.messages as Array<{ role: string; content: string }>)[0]!;
    expect(sys).toEqual({ role: "system", content: "You are careful." });
    const served = r2!.request.messages as Array<Record<string, unknown>>;
    const thinking = first.content[0]!.type === "thinking" ? first.content[0]!.thinking : "";
    expect(served[1]).toMatchObject({ role: "assistant", reasoning_content: thinking });
    expect(served[1]!.tool_calls).toHaveLength(1);
    expect(served[2]).toMatchObject({ role: "tool", content: "391" });
    expect(first.usage.output_tokens).toBe(r1!.response_ids.length);
  });

  it("streams the ordered event sequence into the same message", async () => {
    const s = session();
    const client = new Anthropic({ apiKey: s.key, baseURL: proxy.url, maxRetries: 0 });
    const params = {
      model: "claude",
      max_tokens: 512,
      messages: [{ role: "user" as const, content: QUESTION }],
      tools,
    };
    const whole = await client.messages.create(params);
    const stream = client.messages.stream(params);
    const types: string[] = [];
    stream.on("streamEvent", (ev) => types.push(ev.type));
    const streamed = await stream.finalMessage();
    expect(types[0]).toBe("message_start");
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(streamed.content.map((b) => b.type)).toEqual(whole.content.map((b) => b.type));
    expect(streamed.content[1]).toMatchObject({ type: "tool_use", input: { expression: "17 * 23" } });
    expect(streamed.stop_reason).toBe("tool_use");
  });

  it("converts images and documents, counts tokens, and answers errors in Anthropic's shape", async () => {
    const s = session();
    const client = new Anthropic({ apiKey: s.key, baseURL: proxy.url, maxRetries: 0 });
    await client.messages.create({
      model: "claude",
      max_tokens: 64,
      messages: [
        {
          role: "user",
          content: [
            { type: "image", source: { type: "base64", media_type: "image/png", data: PNG_1PX } },
            { type: "document", source: { type: "text", media_type: "text/plain", data: "A note." } },
            { type: "text", text: "Read both." },
          ],
        },
      ],
    });
    const served = records(s.id)[0]!.request.messages as Array<{ content: unknown }>;
    expect(served[0]!.content).toEqual([
      { type: "image_url", image_url: { url: `data:image/png;base64,${PNG_1PX}` } },
      { type: "text", text: "A note." },
      { type: "text", text: "Read both." },
    ]);
    const count = await client.messages.countTokens({
      model: "claude",
      messages: [{ role: "user", content: "hello there" }],
    });
    expect(count.input_tokens).toBeGreaterThan(0);
    const bad = new Anthropic({ apiKey: "nope", baseURL: proxy.url, maxRetries: 0 });
    const err = await bad.messages
      .create({ model: "c", max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError);
    expect((err as InstanceType<typeof Anthropic.AuthenticationError>).error).toMatchObject({
      type: "error",
      error: { type: "authentication_error" },
    });
    const missing = await client.messages
      .create({ model: "c", max_tokens: 8, messages: [{ role: "robot" as "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(Anthropic.BadRequestError);
    expect((missing as Error).message).toContain("messages[0].role");
  });
  it("keeps a system message sent inside `messages` (Claude Code 2.1) in place as a system turn", async () => {
    const s = session();
    const client = new Anthropic({ apiKey: s.key, baseURL: proxy.url, maxRetries: 0 });
    await client.messages.create({
      model: "claude",
      max_tokens: 64,
      system: "Be brief.",
      messages: [
        { role: "user", content: QUESTION },
        // Not in the SDK's types (the CLI builds its bodies itself), but on the wire it is this.
        {
          role: "system",
          content: [{ type: "text", text: "Agents: none." }],
        } as unknown as Anthropic.MessageParam,
      ],
    });
    // No `thinking` switch: the template's default. Claude Code's `adaptive` turns thinking on.
    expect(records(s.id)[0]!.request.chat_template_kwargs).toBeUndefined();
    await client.messages.create({
      model: "claude",
      max_tokens: 64,
      messages: [{ role: "user", content: QUESTION }],
      thinking: { type: "adaptive" } as unknown as Anthropic.ThinkingConfigParam,
    });
    expect(records(s.id)[1]!.request.chat_template_kwargs).toEqual({ enable_thinking: true });
    expect(records(s.id)[0]!.request.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: QUESTION },
      { role: "system", content: "Agents: none." },
    ]);
  });
});

describe("OpenAI Responses via the openai SDK", () => {
  const tools = [{ type: "function" as const, name: "calculator", parameters: calcSchema, strict: false }];

  it("round-trips function calls and reasoning through encrypted_content", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const first = await client.responses.create({
      model: "gpt-5",
      instructions: "Use tools.",
      input: QUESTION,
      tools,
      temperature: 0,
      store: false,
      include: ["reasoning.encrypted_content"],
    });
    expect(first.model).toBe("gpt-5");
    expect(first.status).toBe("completed");
    const reasoning = first.output.find((o) => o.type === "reasoning");
    const call = first.output.find((o) => o.type === "function_call");
    // The opaque token is standard base64 of the proxy's own bytes, carrying the reasoning text.
    const token = reasoning?.type === "reasoning" ? reasoning.encrypted_content : null;
    expect(token).toMatch(BASE64);
    // The item carries its text as the summary only (no `reasoning_text` content a client would echo).
    const summary = reasoning?.type === "reasoning" ? reasoning.summary[0]?.text : undefined;
    expect(summary).toBeTruthy();
    expect(reasoning?.type === "reasoning" && reasoning.content).toBeFalsy();
    expect(decodeReasoning(token)).toBe(summary);
    expect(call?.type === "function_call" && JSON.parse(call.arguments)).toEqual({ expression: "17 * 23" });
    // Send back only the opaque reasoning (as Codex does with store: false) plus the call and its output.
    const second = await client.responses.create({
      model: "gpt-5",
      input: [
        { role: "user", content: QUESTION },
        {
          type: "reasoning",
          id: reasoning!.id,
          summary: [],
          encrypted_content: (reasoning as { encrypted_content: string }).encrypted_content,
        },
        call as OpenAI.Responses.ResponseFunctionToolCall,
        {
          type: "function_call_output",
          call_id: (call as OpenAI.Responses.ResponseFunctionToolCall).call_id,
          output: "391",
        },
      ],
      tools,
      temperature: 0,
      store: false,
    });
    expect(second.output_text).toContain("391");
    const served = records(s.id)[1]!.request.messages as Array<Record<string, unknown>>;
    expect(served[1]).toMatchObject({ role: "assistant", reasoning_content: summary });
    expect(served[2]).toMatchObject({ role: "tool", content: "391" });
    expect(records(s.id)[0]!.api_type).toBe("openai_responses");
  });

  it("streams typed events ending in response.completed", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const stream = await client.responses.create({
      model: "gpt-5",
      input: QUESTION,
      temperature: 0,
      stream: true,
    });
    const types: string[] = [];
    let text = "";
    let done: OpenAI.Responses.Response | null = null;
    for await (const ev of stream) {
      types.push(ev.type);
      if (ev.type === "response.output_text.delta") text += ev.delta;
      if (ev.type === "response.completed") done = ev.response;
    }
    expect(types[0]).toBe("response.created");
    expect(types.at(-1)).toBe("response.completed");
    expect(text).toContain("391");
    const message = done!.output.find((o) => o.type === "message");
    expect(message?.type === "message" && message.content[0]).toMatchObject({ type: "output_text", text });
    expect(done!.usage?.output_tokens).toBe(records(s.id)[0]!.response_ids.length);
    // Both details are required in the SDKs' types (openai-python 3.x added cache_write_tokens).
    expect(done!.usage?.input_tokens_details).toEqual({
      cached_tokens: records(s.id)[0]!.cached_tokens ?? 0,
      cache_write_tokens: 0,
    });
  });
});

describe("Google Gemini via @google/genai", () => {
  it("round-trips functionCall and functionResponse, and streams", async () => {
    const s = session();
    const ai = new GoogleGenAI({ apiKey: s.key, httpOptions: { baseUrl: proxy.url } });
    const config = {
      temperature: 0,
      tools: [{ functionDeclarations: [{ name: "calculator", parametersJsonSchema: calcSchema }] }],
    };
    const first = await ai.models.generateContent({ model: "gemini-2.5-pro", contents: QUESTION, config });
    expect(first.modelVersion).toBe("gemini-2.5-pro");
    expect(first.functionCalls?.[0]).toMatchObject({ name: "calculator", args: { expression: "17 * 23" } });
    // Gemini's thoughtSignature is a bytes field: the token must be standard base64.
    const signature = first.candidates![0]!.content!.parts!.find((p) => p.thoughtSignature)?.thoughtSignature;
    expect(signature).toMatch(BASE64);
    expect(decodeReasoning(signature)).toContain("calculator");
    const second = await ai.models.generateContent({
      model: "gemini-2.5-pro",
      contents: [
        { role: "user", parts: [{ text: QUESTION }] },
        first.candidates![0]!.content!,
        { role: "user", parts: [{ functionResponse: { name: "calculator", response: { result: 391 } } }] },
      ],
      config,
    });
    expect(second.text).toContain("391");
    const served = records(s.id)[1]!.request.messages as Array<Record<string, unknown>>;
    const callId = (served[1]!.tool_calls as Array<{ id: string }>)[0]!.id;
    expect(served[2]).toMatchObject({ role: "tool", tool_call_id: callId });
    // The thought signature carried the reasoning back although the client never saw the thought text.
    expect(String(served[1]!.reasoning_content)).toContain("calculator");

    let streamed = "";
    for await (const chunk of await ai.models.generateContentStream({
      model: "gemini-2.5-pro",
      contents: QUESTION,
      config: { temperature: 0 },
    })) {
      streamed += chunk.text ?? "";
    }
    expect(streamed).toContain("391");
    expect(records(s.id).map((r) => r.api_type)).toEqual(["google", "google", "google"]);
  });

  it("refuses an unknown key in Google's error shape", async () => {
    const ai = new GoogleGenAI({ apiKey: "nope", httpOptions: { baseUrl: proxy.url } });
    const err = (await ai.models
      .generateContent({ model: "g", contents: "hi" })
      .catch((e: unknown) => e)) as { status?: number; message: string };
    expect(err.status).toBe(401);
    expect(err.message).toContain("UNAUTHENTICATED");
  });
});
