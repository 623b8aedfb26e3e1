/**
 * Token mode (engine `sglang`) through the proxy with the official SDKs, the real Qwen3 tokenizer
 * and template. The engine is a `/generate` double where a test must force what the model samples
 * (a non-canonical split, a scripted 10-turn tool session); the other cases use the simulated engine.
 */
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject, Trace } from "../../../protocol";
import type { ChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { getBuilder } from "../../builders";
import { type RecordingProxy, startProxy } from "../../server";
import {
  doubleLogprob,
  type GenerateDouble,
  IM_END,
  startGenerateDouble,
} from "../../testing/generate-double";

const MODEL = "Qwen/Qwen3-8B";
const quiet = { info() {}, warn() {}, error() {} };

let tok: ChatTokenizer;
let engine: GenerateDouble;
let proxy: RecordingProxy;
let n = 0;

beforeAll(async () => {
  tok = await loadChatTokenizer();
  engine = await startGenerateDouble();
  proxy = await startProxy({ engine: "sglang", engineUrl: engine.url, modelServed: MODEL, logger: quiet });
}, 30_000);
afterAll(async () => {
  await proxy.close();
  await engine.close();
});

const ids = (text: string) => tok.encode(text);

function session(harness = "test-harness"): { id: string; key: string } {
  const id = `tok-${++n}`;
  return { id, key: proxy.openSession(id, { task_id: "t", harness }).key };
}

function records(id: string): CompletionRecord[] {
  return proxy.completions(id).map((r) => CompletionRecord.parse(r));
}

function conversation(id: string) {
  return getBuilder("conversation")(records(id), { session_id: id, task_id: "t", config: {} });
}

const verdicts = (rs: CompletionRecord[]) => rs.map((r) => (r.metadata.bridge as JsonObject).verdict);

/** Index of `needle` as a contiguous run in `hay`, or -1. */
function indexOfRun(hay: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

describe("BPE drift through the proxy", () => {
  it("keeps the sampled 7640, 287 in the next prompt and the trace, where re-encoding gives 19948", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const out1 = [...ids("I go"), 7640, 287, IM_END];
    const out2 = [...ids("By the lake."), IM_END];
    engine.queue.push({ output: out1 }, { output: out2 });
    const before = engine.generates().length;
    const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "Weekend plans?" }];
    const r1 = await client.chat.completions.create({ model: "any", messages: m1, temperature: 0.7 });
    expect(r1.choices[0]!.message.content).toBe("I go fishing");
    expect(r1.model).toBe("any");
    const m2: OpenAI.ChatCompletionMessageParam[] = [
      ...m1,
      { role: "assistant", content: r1.choices[0]!.message.content },
      { role: "user", content: "Where?" },
    ];
    const r2 = await client.chat.completions.create({ model: "any", messages: m2 });
    expect(r2.choices[0]!.message.content).toBe("By the lake.");

    const [g1, g2] = engine.generates().slice(before) as Array<{
      input_ids: number[];
      rid: string;
      sampling_params: JsonObject;
      return_logprob: boolean;
    }>;
    // The first prompt is the template's render, encoded once.
    expect(g1!.input_ids).toEqual(ids(tok.render(m1 as never)));
    // Explicit sampling, never the server's defaults; our own rid.
    expect(g1!.return_logprob).toBe(true);
    expect(g1!.sampling_params).toMatchObject({
      temperature: 0.7,
      top_p: 1,
      top_k: -1,
      min_p: 0,
      skip_special_tokens: false,
      no_stop_trim: true,
    });
    expect(g1!.rid).toMatch(new RegExp(`^${s.id}-t0-[0-9a-f]{8}$`));
    expect(g2!.sampling_params.temperature).toBe(1);
    // Turn 2 = turn 1's prompt + its sampled ids untouched + the new suffix only.
    expect(g2!.input_ids.slice(0, g1!.input_ids.length + out1.length)).toEqual([...g1!.input_ids, ...out1]);
    expect(g2!.input_ids.slice(g1!.input_ids.length + out1.length)).toEqual(
      ids("\n<|im_start|>user\nWhere?<|im_end|>\n<|im_start|>assistant\n"),
    );
    expect(g2!.input_ids).not.toContain(19948);
    const reencoded = ids(tok.render(m2 as never));
    expect(reencoded).toContain(19948);
    expect(indexOfRun(reencoded, [7640, 287])).toBe(-1);

    const rs = records(s.id);
    expect(verdicts(rs)).toEqual(["new_chain", "extended"]);
    expect(rs[1]!.prompt_ids).toEqual(g2!.input_ids);
    expect(rs[0]!.response_ids).toEqual(out1);
    expect(rs[0]!.response_logprobs).toEqual(out1.map((id, i) => doubleLogprob(id, i)));
    expect(rs[0]!.metadata.bridge).toMatchObject({ turn_id: "t0", parent_turn_id: null, rid: g1!.rid });
    expect(rs[1]!.metadata.bridge).toMatchObject({ parent_turn_id: "t0", rid: g2!.rid });
    expect(rs[0]!.engine).toBe("sglang");
    expect(rs[0]!.weight_version).toBe("w-double");

    const t = conversation(s.id);
    expect(t.status).toBe("COMPLETED");
    expect(t.traces).toHaveLength(1);
    const trace = Trace.parse(t.traces[0]);
    expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([...g2!.input_ids, ...out2]);
    const at = indexOfRun(trace.response_ids, [7640, 287]);
    expect(at).toBeGreaterThanOrEqual(0);
    expect(trace.loss_mask.slice(at, at + 2)).toEqual([1, 1]);
    expect(trace.response_ids).not.toContain(19948);
  });
});

const toolDefs = [
  {
    type: "function" as const,
    function: {
      name: "bash",
      description: "Run a shell command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    },
  },
  {
    type: "function" as const,
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: { type: "object", properties: { path: { type: "string" }, limit: { type: "integer" } } },
    },
  },
];

/** A Qwen3 tool call block with Python json.dumps spacing, as the model prints it. */
const call = (name: string, args: Record<string, unknown>) =>
  `<tool_call>\n{"name": "${name}", "arguments": ${JSON.stringify(args).replaceAll('","', '", "').replaceAll('":', '": ').replaceAll(',"', ', "')}}\n</tool_call>`;

/** Ten sampled turns: tool calls (one parallel pair), think blocks, non-canonical splits, an answer. */
function tenTurns(): number[][] {
  return [
    [...ids(call("bash", { cmd: "ls" })), IM_END],
    [
      ...ids("Let me check the"),
      7640,
      287,
      ...ids(` logs.\n${call("read_file", { path: "fishing.log", limit: 20 })}`),
      IM_END,
    ],
    [...ids(`${call("bash", { cmd: "wc -l a.txt" })}\n${call("bash", { cmd: "wc -l b.txt" })}`), IM_END],
    [
      ...ids("<think>\nI should read it.\n</think>\n\n"),
      ...ids(call("read_file", { path: "a.txt" })),
      IM_END,
    ],
    [...ids("Two files"), ...ids(` differ.\n${call("bash", { cmd: "diff a.txt b.txt" })}`), IM_END],
    [...ids(call("bash", { cmd: "cat notes.md" })), IM_END],
    [
      ...ids("<tool_call>\n"),
      ...ids('{"name": "bash", "arguments": {"cmd": "echo'),
      7640,
      287,
      ...ids('"}}\n</tool_call>'),
      IM_END,
    ],
    [...ids(call("read_file", { path: "b.txt", limit: 5 })), IM_END],
    [...ids("<think>\nDone soon.\n</think>\n\n"), ...ids(call("bash", { cmd: "git status" })), IM_END],
    [...ids("All done: the files differ in 3 lines, and the log mentions"), 7640, 287, ...ids("."), IM_END],
  ];
}

/** The one-trace property of a 10-turn session, checked against what the engine really got. */
function expectOneExactTrace(sessionId: string, outputs: number[][], firstGenerate: number) {
  const rs = records(sessionId);
  expect(rs).toHaveLength(10);
  expect(verdicts(rs)).toEqual(["new_chain", ...new Array(9).fill("extended")]);
  expect(proxy.bridgeVerdicts(sessionId)).toEqual({
    extended: 9,
    template_mismatch: 0,
    new_chain: 1,
    compacted: 0,
    history_rewritten: 0,
  });
  const gens = engine.generates().slice(firstGenerate) as Array<{ input_ids: number[] }>;
  expect(gens).toHaveLength(10);
  for (const [i, g] of gens.entries()) expect(rs[i]!.prompt_ids).toEqual(g.input_ids);
  const t = conversation(sessionId);
  expect(t.traces).toHaveLength(1);
  const trace = Trace.parse(t.traces[0]);
  expect(trace.prompt_ids).toEqual(gens[0]!.input_ids);
  expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([...gens[9]!.input_ids, ...outputs[9]!]);
  // Mask 1 exactly on the sampled ids with their logprobs; every bridged id mask 0, logprob 0.0.
  const ones = trace.loss_mask.flatMap((m, i) => (m === 1 ? [i] : []));
  expect(ones.map((i) => trace.response_ids[i])).toEqual(outputs.flat());
  expect(ones.map((i) => trace.response_logprobs![i])).toEqual(
    outputs.flatMap((o) => o.map((id, i) => doubleLogprob(id, i))),
  );
  expect(trace.response_logprobs).toHaveLength(trace.response_ids.length);
  trace.loss_mask.forEach((m, i) => {
    if (m === 0) expect(trace.response_logprobs![i]).toBe(0);
  });
  const turns = trace.metadata.turns as JsonObject[];
  expect(turns.map((x) => x.verdict)).toEqual(["new_chain", ...new Array(9).fill("extended")]);
  expect(turns.every((x) => x.weight_version === "w-double" && x.replica === engine.url)).toBe(true);
}

describe("10-turn tool-using conversation", () => {
  it("through the OpenAI API (openai SDK) is one trace equal to the last prompt + last sampled ids", async () => {
    const s = session("openai-agent");
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const outputs = tenTurns();
    const first = engine.generates().length;
    engine.queue.push(...outputs.map((output) => ({ output })));
    const messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "You are a helpful agent." },
      { role: "user", content: "Compare a.txt and b.txt and check the logs." },
    ];
    const calls: number[] = [];
    for (let k = 0; k < 10; k++) {
      const r = await client.chat.completions.create({
        model: "gpt-4o",
        messages,
        tools: toolDefs,
      });
      const m = r.choices[0]!.message;
      calls.push(m.tool_calls?.length ?? 0);
      if (k < 9) expect(r.choices[0]!.finish_reason).toBe("tool_calls");
      // A typical harness: echoes content and tool calls, drops the reasoning.
      messages.push({
        role: "assistant",
        content: m.content,
        ...(m.tool_calls ? { tool_calls: m.tool_calls } : {}),
      });
      for (const c of m.tool_calls ?? [])
        messages.push({ role: "tool", tool_call_id: c.id, content: `ok ${k}` });
    }
    expect(calls).toEqual([1, 1, 2, 1, 1, 1, 1, 1, 1, 0]);
    expectOneExactTrace(s.id, outputs, first);
    const row = proxy.status().bridge.find((b) => b.harness === "openai-agent");
    expect(row).toMatchObject({ model: MODEL, counts: { extended: 9, new_chain: 1 } });
  });

  it("through the Anthropic API (@anthropic-ai/sdk, streaming) is one trace too", async () => {
    const s = session("claude-like");
    const client = new Anthropic({ apiKey: s.key, baseURL: proxy.url, maxRetries: 0 });
    const outputs = tenTurns();
    const first = engine.generates().length;
    engine.queue.push(...outputs.map((output) => ({ output })));
    const tools = toolDefs.map((t) => ({
      name: t.function.name,
      description: t.function.description,
      input_schema: t.function.parameters as Anthropic.Tool.InputSchema,
    }));
    const messages: Anthropic.MessageParam[] = [
      { role: "user", content: "Compare a.txt and b.txt and check the logs." },
    ];
    const stops: string[] = [];
    let thinking = 0;
    for (let k = 0; k < 10; k++) {
      const params = {
        model: "claude-test-model",
        max_tokens: 1024,
        system: "You are a helpful agent.",
        messages,
        tools,
      };
      const msg =
        k % 2 === 0
          ? await client.messages.create(params)
          : await client.messages.stream(params).finalMessage();
      stops.push(String(msg.stop_reason));
      thinking += msg.content.filter((b) => b.type === "thinking").length;
      messages.push({ role: "assistant", content: msg.content });
      const uses = msg.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
      if (uses.length > 0) {
        messages.push({
          role: "user",
          content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: `ok ${k}` })),
        });
      }
    }
    expect(stops).toEqual([...new Array(9).fill("tool_use"), "end_turn"]);
    expect(thinking).toBe(2);
    expectOneExactTrace(s.id, outputs, first);
    expect(records(s.id)[0]!.api_type).toBe("anthropic");
  });
});

describe("aborts, errors and parameters", () => {
  it("aborts its rid on the engine when the harness hangs up, and records nothing", async () => {
    const s = session();
    engine.queue.push({ output: [...ids("slow"), IM_END], delayMs: 5_000 });
    const before = engine.generates().length;
    const ac = new AbortController();
    const pending = fetch(`${proxy.url}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      signal: ac.signal,
    });
    while (engine.generates().length === before) await new Promise((r) => setTimeout(r, 10));
    ac.abort();
    await expect(pending).rejects.toThrow();
    const rid = String(engine.generates()[before]!.rid);
    for (let i = 0; i < 200 && !engine.aborted().includes(rid); i++)
      await new Promise((r) => setTimeout(r, 10));
    expect(engine.aborted()).toContain(rid);
    expect(records(s.id)).toHaveLength(0);
  });

  it("aborts its rid and answers 504 when the call times out", async () => {
    const short = await startProxy({
      engine: "sglang",
      engineUrl: engine.url,
      modelServed: MODEL,
      requestTimeoutMs: 200,
      logger: quiet,
    });
    try {
      const { key } = short.openSession("timeout-1");
      engine.queue.push({ output: [IM_END], delayMs: 3_000 });
      const before = engine.generates().length;
      const r = await fetch(`${short.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
      });
      expect(r.status).toBe(504);
      const rid = String(engine.generates()[before]!.rid);
      for (let i = 0; i < 200 && !engine.aborted().includes(rid); i++)
        await new Promise((res) => setTimeout(res, 10));
      expect(engine.aborted()).toContain(rid);
      expect(short.completions("timeout-1")).toHaveLength(0);
    } finally {
      await short.close();
    }
  });

  it("answers 503 on an engine-aborted generation and commits no turn", async () => {
    const s = session();
    engine.queue.push({ output: [], abort: true });
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    const err = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OpenAI.APIError);
    expect((err as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect(records(s.id)).toHaveLength(0);
    expect(proxy.bridgeVerdicts(s.id)).toEqual({
      extended: 0,
      template_mismatch: 0,
      new_chain: 0,
      compacted: 0,
      history_rewritten: 0,
    });
  });

  it("refuses bad sampling fields and a prompt with no room, naming the field", async () => {
    const s = session();
    const post = (body: unknown) =>
      fetch(`${proxy.url}/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      }).then(async (r) => ({ status: r.status, json: (await r.json()) as { error: JsonObject } }));
    const bad = await post({ messages: [{ role: "user", content: "hi" }], top_p: 5 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.param).toBe("top_p");
    expect(String(bad.json.error.message)).toMatch(/^top_p: /);
    const big = await post({ messages: [{ role: "user", content: "word ".repeat(41_000) }] });
    expect(big.status).toBe(400);
    expect(big.json.error.code).toBe("context_length_exceeded");
    expect(records(s.id)).toHaveLength(0);
  });

  it("passes stop, max_tokens and penalties explicitly and clamps max_new_tokens to the context", async () => {
    const s = session();
    const before = engine.generates().length;
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      max_completion_tokens: 77,
      stop: ["END"],
      presence_penalty: 0.5,
      seed: 3,
      top_p: 0.9,
    });
    await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "again" }],
      max_tokens: 1_000_000,
    });
    const [a, b] = engine.generates().slice(before) as Array<{
      input_ids: number[];
      sampling_params: JsonObject;
    }>;
    expect(a!.sampling_params).toMatchObject({
      max_new_tokens: 77,
      stop: ["END"],
      presence_penalty: 0.5,
      sampling_seed: 3,
      top_p: 0.9,
    });
    // SGLang refuses input + max_new_tokens >= context: one token of room stays unused.
    expect(b!.sampling_params.max_new_tokens).toBe(40_960 - b!.input_ids.length - 1);
  });
});

describe("other families and streams in token mode", () => {
  it("streams OpenAI chunks with tool calls and answers Responses and Gemini from the same turn loop", async () => {
    const s = session();
    const client = new OpenAI({ apiKey: s.key, baseURL: `${proxy.url}/v1`, maxRetries: 0 });
    engine.queue.push({
      output: [...ids(`<think>\nls first\n</think>\n\n${call("bash", { cmd: "ls" })}`), IM_END],
    });
    const stream = await client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "list files" }],
      tools: toolDefs,
      stream: true,
    });
    let reasoning = "";
    const names: string[] = [];
    let finish: string | null = null;
    for await (const chunk of stream) {
      const d = chunk.choices[0]?.delta as {
        reasoning_content?: string;
        tool_calls?: Array<{ function?: { name?: string } }>;
      };
      if (d?.reasoning_content) reasoning += d.reasoning_content;
      for (const c of d?.tool_calls ?? []) if (c.function?.name) names.push(c.function.name);
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(reasoning).toBe("ls first\n");
    expect(names).toEqual(["bash"]);
    expect(finish).toBe("tool_calls");

    engine.queue.push({ output: [...ids("Hello there."), IM_END] });
    const resp = await fetch(`${proxy.url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.key}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "m", input: "greet me", store: false }),
    }).then((r) => r.json() as Promise<JsonObject>);
    expect(JSON.stringify(resp.output)).toContain("Hello there.");

    engine.queue.push({ output: [...ids("Gemini says hi."), IM_END] });
    const gem = await fetch(`${proxy.url}/v1beta/models/gemini-2.5-pro:generateContent`, {
      method: "POST",
      headers: { "x-goog-api-key": s.key, "content-type": "application/json" },
      body: JSON.stringify({ contents: [{ role: "user", parts: [{ text: "hi" }] }] }),
    }).then((r) => r.json() as Promise<JsonObject>);
    expect(JSON.stringify(gem.candidates)).toContain("Gemini says hi.");
    const rs = records(s.id);
    expect(rs.map((r) => r.api_type)).toEqual(["openai_chat", "openai_responses", "google"]);
    expect(rs.every((r) => r.engine === "sglang" && (r.metadata.bridge as JsonObject).turn_id)).toBe(true);
  });

  it("delegates parsing to SGLang's /separate_reasoning and /parse_function_call when asked", async () => {
    const delegating = await startProxy({
      engine: "sglang",
      engineUrl: engine.url,
      modelServed: MODEL,
      delegateParsing: true,
      toolCallParser: "qwen25",
      logger: quiet,
    });
    engine.parsers.separate = (b) => ({
      reasoning_text: "server reasoning",
      text: String(b.text).split("</think>").at(-1),
    });
    engine.parsers.functionCall = () => ({
      normal_text: "",
      calls: [{ tool_index: 0, name: "bash", parameters: '{"cmd":"pwd"}' }],
    });
    try {
      const { key } = delegating.openSession("delegated");
      const client = new OpenAI({ apiKey: key, baseURL: `${delegating.url}/v1`, maxRetries: 0 });
      engine.queue.push({
        output: [...ids(`<think>\nx\n</think>\n\n${call("bash", { cmd: "pwd" })}`), IM_END],
      });
      const before = engine.received.length;
      const r = await client.chat.completions.create({
        model: "m",
        messages: [{ role: "user", content: "where am I" }],
        tools: toolDefs,
      });
      const m = r.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
      expect(m.reasoning_content).toBe("server reasoning");
      expect(m.tool_calls?.[0]).toMatchObject({ function: { name: "bash", arguments: '{"cmd": "pwd"}' } });
      const paths = engine.received.slice(before).map((x) => x.path);
      expect(paths).toEqual(["/generate", "/separate_reasoning", "/parse_function_call"]);
      expect(engine.received.at(-1)!.body).toMatchObject({ tool_call_parser: "qwen25" });
    } finally {
      engine.parsers = {};
      await delegating.close();
    }
  });

  it("refuses unknown parsers and a bad tokenizer folder at start, naming the option", async () => {
    await expect(
      startProxy({
        engine: "sglang",
        engineUrl: engine.url,
        modelServed: MODEL,
        toolCallParser: "nope",
        logger: quiet,
      }),
    ).rejects.toThrow(/^toolCallParser: /);
    await expect(
      startProxy({
        engine: "sglang",
        engineUrl: engine.url,
        modelServed: MODEL,
        reasoningParser: "nope",
        logger: quiet,
      }),
    ).rejects.toThrow(/^reasoningParser: /);
    await expect(
      startProxy({
        engine: "sglang",
        engineUrl: engine.url,
        modelServed: MODEL,
        tokenizerPath: "/nonexistent-dir",
        logger: quiet,
      }),
    ).rejects.toThrow(/tokenizer\.json/);
  });
});
