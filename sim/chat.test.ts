import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type ChatTokenizer, loadChatTokenizer, sglangToolDumps } from "../tokenizer/chat-tokenizer";
import { decideAnswer } from "./policy";
import { type SimEngineHandle, startSimEngine } from "./server";

let sim: SimEngineHandle;
let tok: ChatTokenizer;
const SEED = 11;

beforeAll(async () => {
  tok = await loadChatTokenizer();
  sim = await startSimEngine({ port: 0, seed: SEED, weightVersion: "step-3" });
}, 30_000);
afterAll(async () => {
  await sim.close();
});

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

async function chat(
  body: unknown,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${sim.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

const messages = [
  { role: "system", content: "You are a careful assistant." },
  { role: "user", content: "What is 17 * 23?" },
];

describe("POST /v1/chat/completions", () => {
  it("returns prompt ids, meta_info and logprobs that agree with the template and the answer", async () => {
    const { status, json } = await chat(
      {
        model: "Qwen/Qwen3-0.6B",
        messages,
        logprobs: true,
        return_prompt_token_ids: true,
        return_meta_info: true,
      },
      { "X-SMG-Routing-Key": "session-a" },
    );
    expect(status).toBe(200);
    expect(json.object).toBe("chat.completion");
    expect(json.system_fingerprint).toBe("polar-sim-engine");
    const choice = json.choices[0];
    const rendered = tok.render(messages);
    expect(tok.decode(choice.prompt_token_ids)).toBe(rendered);
    expect(choice.prompt_token_ids).toEqual(tok.encode(rendered));

    const meta = choice.meta_info;
    expect(meta).toMatchObject({
      finish_reason: { type: "stop", matched: 151645 },
      prompt_tokens: choice.prompt_token_ids.length,
      weight_version: "step-3",
      simulator: "polar-sim-engine",
      id: json.id,
    });
    const outputIds: number[] = meta.output_token_logprobs.map((e: [number, number, string]) => e[1]);
    expect(outputIds.at(-1)).toBe(151645);
    expect(meta.completion_tokens).toBe(outputIds.length);
    const expected = decideAnswer({ seed: SEED, routingKey: "session-a", prompt: rendered }).text;
    expect(tok.decode(outputIds)).toBe(`${expected}<|im_end|>`);
    // The reasoning parser split the same text.
    const { content, reasoning_content } = choice.message;
    expect(tok.decode(outputIds)).toBe(`<think>\n${reasoning_content}</think>\n\n${content}<|im_end|>`);
    expect(content).toMatch(/\d+\.?$/);

    expect(choice.logprobs.content).toHaveLength(outputIds.length);
    choice.logprobs.content.forEach((entry: Json, i: number) => {
      expect(entry.logprob).toBe(meta.output_token_logprobs[i][0]);
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.logprob).toBeGreaterThan(-3);
      expect(entry.token).toBe(tok.decode([outputIds[i]!]));
      expect(entry.bytes).toEqual([...Buffer.from(entry.token, "utf8")]);
      expect(entry.top_logprobs).toEqual([]);
    });
    expect(choice.finish_reason).toBe("stop");
    expect(choice.matched_stop).toBe(151645);
    expect(json.usage).toMatchObject({
      prompt_tokens: choice.prompt_token_ids.length,
      completion_tokens: outputIds.length,
      total_tokens: choice.prompt_token_ids.length + outputIds.length,
    });
  });

  it("leaves the extensions out unless asked", async () => {
    const { json } = await chat({ messages });
    expect(json.choices[0].prompt_token_ids).toBeUndefined();
    expect(json.choices[0].meta_info).toBeUndefined();
    expect(json.choices[0].logprobs).toBeNull();
  });

  it("truncates at max_tokens with finish_reason length and no end-of-turn token", async () => {
    const { json } = await chat({ messages, max_tokens: 5, logprobs: true, return_meta_info: true });
    const choice = json.choices[0];
    expect(choice.finish_reason).toBe("length");
    expect(choice.meta_info.finish_reason).toEqual({ type: "length", length: 5 });
    expect(choice.meta_info.output_token_logprobs).toHaveLength(5);
    expect(choice.meta_info.output_token_logprobs.map((e: Json) => e[1])).not.toContain(151645);
    expect(json.usage.completion_tokens).toBe(5);
    // max_completion_tokens wins over max_tokens, as in the OpenAI API.
    const both = await chat({ messages, max_tokens: 5, max_completion_tokens: 2 });
    expect(both.json.usage.completion_tokens).toBe(2);
  });

  it("is deterministic per routing key, and different keys give different samples", async () => {
    const key = (k: string) => chat({ messages, rid: undefined }, { "X-SMG-Routing-Key": k });
    const [a1, a2] = await Promise.all([key("same"), key("same")]);
    expect(a1.json.choices[0].message).toEqual(a2.json.choices[0].message);
    const contents = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        key(`k${i}`).then((r) => r.json.choices[0].message.content as string),
      ),
    );
    expect(new Set(contents).size).toBeGreaterThan(1);
    // `user` is the fallback routing key when no header is sent.
    const byUser = await Promise.all([
      chat({ messages, user: "u1" }),
      chat({ messages }, { "X-SMG-Routing-Key": "u1" }),
    ]);
    expect(byUser[0].json.choices[0].message).toEqual(byUser[1].json.choices[0].message);
  });

  it("reports cached tokens from the previous turn's prompt", async () => {
    const first = await chat({ messages, return_meta_info: true }, { "X-SMG-Routing-Key": "cache-test" });
    const second = await chat(
      {
        messages: [
          ...messages,
          { role: "assistant", content: first.json.choices[0].message.content },
          { role: "user", content: "Are you sure?" },
        ],
        return_meta_info: true,
      },
      { "X-SMG-Routing-Key": "cache-test" },
    );
    expect(second.json.choices[0].meta_info.cached_tokens).toBe(first.json.usage.prompt_tokens);
    expect(second.json.usage.prompt_tokens_details.cached_tokens).toBe(first.json.usage.prompt_tokens);
    expect(second.json.choices[0].message.content).toMatch(/17 \* 23 = \d+/);
  });

  it("returns tool calls like SGLang's qwen25 parser and renders tools as SGLang does", async () => {
    const tools = [
      {
        type: "function",
        function: {
          name: "calculator",
          description: "Evaluate an arithmetic expression",
          parameters: {
            type: "object",
            properties: { expression: { type: "string" } },
            required: ["expression"],
          },
        },
      },
    ];
    const { json } = await chat({ messages, tools, return_prompt_token_ids: true });
    const choice = json.choices[0];
    expect(tok.decode(choice.prompt_token_ids)).toBe(tok.render(messages, { tools: sglangToolDumps(tools) }));
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls[0];
    expect(call).toMatchObject({
      type: "function",
      index: 0,
      function: { name: "calculator", arguments: '{"expression": "17 * 23"}' },
    });
    expect(call.id).toMatch(/^call_[0-9a-f]{24}$/);

    const followUp = await chat({
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "391" },
      ],
      tools,
    });
    expect(followUp.json.choices[0].message.content).toBe("17 * 23 = 391.");
    expect(followUp.json.choices[0].finish_reason).toBe("stop");
  });

  it("passes chat_template_kwargs: enable_thinking=false gives no reasoning", async () => {
    const { json } = await chat({
      messages,
      chat_template_kwargs: { enable_thinking: false },
      temperature: 0,
    });
    expect(json.choices[0].message.reasoning_content).toBeNull();
    // Greedy: the right result, in one of the policy's phrasings, with no think block at all.
    expect(json.choices[0].message.content).toMatch(/^(17 \* 23 (=|equals)|The answer is) 391\.$/);
  });

  it("streams SSE chunks that add up to the non-streaming answer", async () => {
    const headers = { "content-type": "application/json", "X-SMG-Routing-Key": "stream-key" };
    const res = await fetch(`${sim.url}/v1/chat/completions`, {
      method: "POST",
      headers,
      body: JSON.stringify({ messages, stream: true, stream_options: { include_usage: true } }),
    });
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    const lines = (await res.text()).split("\n\n").filter((l) => l.length > 0);
    expect(lines.at(-1)).toBe("data: [DONE]");
    const chunks = lines.slice(0, -1).map((l) => JSON.parse(l.replace(/^data: /, "")));
    const deltas = chunks.flatMap((c) => c.choices.map((ch: Json) => ch.delta));
    const content = deltas.map((d) => d.content ?? "").join("");
    const reasoning = deltas.map((d) => d.reasoning_content ?? "").join("");
    expect(chunks.at(-1).usage.completion_tokens).toBeGreaterThan(0);
    expect(chunks.some((c) => c.choices[0]?.finish_reason === "stop")).toBe(true);
    const plain = await chat({ messages }, { "X-SMG-Routing-Key": "stream-key" });
    expect(content).toBe(plain.json.choices[0].message.content);
    expect(reasoning).toBe(plain.json.choices[0].message.reasoning_content);
  });
});

describe("chat request errors", () => {
  it("refuses malformed JSON and missing messages with an OpenAI-style 400", async () => {
    const bad = await chat("{not json");
    expect(bad.status).toBe(400);
    expect(bad.json.error).toMatchObject({ type: "BadRequestError", code: 400 });
    expect(bad.json.error.message).toMatch(/not valid JSON/);
    const missing = await chat({ model: "x" });
    expect(missing.status).toBe(400);
    expect(missing.json.error.message).toMatch(/^messages: /);
    const empty = await chat({ messages: [] });
    expect(empty.json.error.message).toMatch(/messages: must contain at least one message/);
  });

  it("names the offending field", async () => {
    const r = await chat({ messages, max_tokens: -1 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toMatch(/^max_tokens: /);
    const args = await chat({
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: "{x" } }] },
      ],
    });
    expect(args.status).toBe(400);
    expect(args.json.error.message).toMatch(
      /messages\[2\]\.tool_calls\[0\]\.function\.arguments: not valid JSON/,
    );
    const ids = await chat({ messages, input_ids: [1, 999999] });
    expect(ids.json.error.message).toMatch(/input_ids\[1\]: token id 999999 is outside the vocabulary/);
  });

  it("refuses what SGLang's SamplingParams.verify() refuses, with its message; vLLM's flavor does not", async () => {
    const r = await chat({ messages, repetition_penalty: 3 });
    expect(r.status).toBe(400);
    expect(r.json.error.message).toBe("repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3.");
    const k = await chat({ messages, top_k: 0 });
    expect(k.json.error.message).toBe("top_k must be -1 (disable) or at least 1, got 0.");
    const minTokens = await chat({ messages, min_tokens: 9, max_tokens: 4 });
    expect(minTokens.json.error.message).toBe("min_new_tokens must be in [0, max_new_tokens(4)], got 9.");
    expect((await chat({ messages, repetition_penalty: 2, top_k: -1, max_tokens: 8 })).status).toBe(200);
    const vllm = await startSimEngine({ port: 0, flavor: "vllm" });
    try {
      const res = await fetch(`${vllm.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ messages, repetition_penalty: 3, max_tokens: 8 }),
      });
      expect(res.status).toBe(200);
    } finally {
      await vllm.close();
    }
  });

  it("refuses the TITO extensions with stream=true, as SGLang does", async () => {
    for (const flag of ["return_prompt_token_ids", "return_meta_info"]) {
      const r = await chat({ messages, stream: true, [flag]: true });
      expect(r.status).toBe(400);
      expect(r.json.error.message).toBe(
        `${flag} is not supported with streaming. Please set stream=false when using ${flag}=true.`,
      );
    }
  });
});

describe("info endpoints", () => {
  it("serve /v1/models, /health, /health_generate and /model_info, all marked as the simulator", async () => {
    const models = (await (await fetch(`${sim.url}/v1/models`)).json()) as Json;
    expect(models.data[0]).toMatchObject({
      id: "Qwen/Qwen3-0.6B",
      owned_by: "polar-sim-engine",
      max_model_len: 40960,
    });
    const health = await fetch(`${sim.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe("");
    expect((await fetch(`${sim.url}/health_generate`)).status).toBe(200);
    const info = (await (await fetch(`${sim.url}/model_info`)).json()) as Json;
    expect(info).toMatchObject({
      model_path: "Qwen/Qwen3-0.6B",
      is_generation: true,
      weight_version: "step-3",
      simulator: true,
    });
    expect(info.tokenizer_path).toBe(tok.dir);
  });

  it("answers unknown routes with 404 and wrong methods with 405", async () => {
    const missing = await fetch(`${sim.url}/nope`);
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as Json).error.code).toBe(404);
    const wrong = await fetch(`${sim.url}/v1/chat/completions`);
    expect(wrong.status).toBe(405);
    expect(((await wrong.json()) as Json).error.message).toMatch(/use POST/);
  });
});
