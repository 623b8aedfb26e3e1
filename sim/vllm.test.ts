/**
 * The simulator's vLLM flavors against vLLM's contract (main as of 2026-11): what the chat endpoint
 * refuses and in which words, the context rule, the response fields, and the RLHF dev routes
 * (`/pause`, `/resume`, `/is_paused`, `/abort_requests`, `/update_weight_version`, `/weight_info`).
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { starImage } from "../examples/count_stars/stars.mjs";
import { SIM_LIMITS } from "./engine";
import { type SimEngineHandle, startSimEngine } from "./server";

const MODEL = "Qwen/Qwen3-0.6B";
let fast: SimEngineHandle;
let slow: SimEngineHandle;
let old: SimEngineHandle;

beforeAll(async () => {
  [fast, slow, old] = await Promise.all([
    startSimEngine({ model: MODEL, flavor: "vllm" }),
    startSimEngine({ model: MODEL, flavor: "vllm", decodeTokensPerSecond: 10 }),
    startSimEngine({ model: MODEL, flavor: "vllm-0.10.1" }),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([fast, slow, old].map((s) => s?.close()));
});

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

const messages = [{ role: "user", content: "What is 2 + 3?" }];

async function chat(
  s: SimEngineHandle,
  body: Record<string, unknown>,
  headers: Record<string, string> = {},
): Promise<{ status: number; json: Record<string, Json> }> {
  const res = await fetch(`${s.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, messages, ...body }),
  });
  return { status: res.status, json: (await res.json()) as Record<string, Json> };
}

const post = (s: SimEngineHandle, path: string, body?: unknown) =>
  fetch(`${s.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });

async function isPaused(s: SimEngineHandle): Promise<boolean> {
  return ((await (await fetch(`${s.url}/is_paused`)).json()) as { is_paused: boolean }).is_paused;
}

async function running(s: SimEngineHandle): Promise<number> {
  return ((await (await fetch(`${s.url}/sim/stats`)).json()) as { running: number }).running;
}

describe("vllm flavor: the chat contract", { timeout: 20_000 }, () => {
  it("refuses the sampling values SamplingParams._verify_args refuses, in vLLM's words", async () => {
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ temperature: 2.5 }, /temperature must be in \[0, 2\], got 2.5\. \(parameter=temperature/],
      [{ top_p: 0 }, /top_p must be in \(0, 1\], got 0\./],
      [{ top_k: -2 }, /top_k must be 0 \(disable\), or at least 1, got -2\./],
      [{ min_p: 2 }, /min_p must be in \[0, 1\]/],
      [{ presence_penalty: 3 }, /presence_penalty must be in \[-2, 2\]/],
      [{ repetition_penalty: 0 }, /repetition_penalty must be greater than zero, got 0\./],
      [{ max_tokens: 0 }, /max_tokens must be at least 1, got 0\./],
      [{ min_tokens: 9, max_tokens: 3 }, /min_tokens must be less than or equal to max_tokens=3/],
      [{ top_logprobs: 2 }, /when using `top_logprobs`, `logprobs` must be set to true/],
      [{ logprobs: true, top_logprobs: 21 }, /greater than max allowed: 20/],
      [{ prompt_logprobs: 1, stream: true }, /`prompt_logprobs` are not available when `stream=True`/],
      [{ stream_options: { include_usage: true } }, /Stream options can only be defined when `stream=True`/],
      [{ stop: [""] }, /stop cannot contain an empty string/],
    ];
    for (const [extra, message] of cases) {
      const { status, json } = await chat(fast, extra);
      expect(status, JSON.stringify(extra)).toBe(400);
      expect(json.error.message, JSON.stringify(extra)).toMatch(message);
      expect(json.error.type).toBe("BadRequestError");
    }
    // vLLM accepts a repetition_penalty above 2 (it has no upper bound) and top_k -1.
    expect((await chat(fast, { repetition_penalty: 3, top_k: -1, max_tokens: 8 })).status).toBe(200);
  });

  it("lets prompt + max_tokens fill the context exactly, and refuses one token more", async () => {
    const tokenized = (await (
      await post(fast, "/v1/tokenize", { messages, add_generation_prompt: true })
    ).json()) as { count: number };
    const room = SIM_LIMITS.contextLength - tokenized.count;
    expect((await chat(fast, { max_tokens: room })).status).toBe(200);
    const over = await chat(fast, { max_tokens: room + 1 });
    expect(over.status).toBe(400);
    expect(over.json.error.message).toBe(
      `You passed ${tokenized.count} input tokens and requested ${room + 1} output tokens. However, the model's context length is only ${SIM_LIMITS.contextLength} tokens, resulting in a maximum input length of ${tokenized.count - 1} tokens. Please reduce the length of the input prompt. (parameter=input_tokens, value=${tokenized.count})`,
    );
    const huge = await chat(fast, { max_tokens: SIM_LIMITS.contextLength + 1 });
    expect(huge.json.error.message).toMatch(/cannot be greater than max_model_len=/);
  });

  it("returns the ids with return_token_ids, logprobs by default, and the request id as id", async () => {
    const { json } = await chat(fast, { logprobs: true, return_token_ids: true }, { "x-request-id": "abc" });
    expect(json.id).toBe("chatcmpl-abc");
    const choice = json.choices[0];
    expect(json.prompt_token_ids.length).toBeGreaterThan(0);
    expect(choice.token_ids.length).toBeGreaterThan(0);
    // top_logprobs defaults to 0: logprobs: true alone fills logprobs.content, one entry per id.
    expect(choice.logprobs.content).toHaveLength(choice.token_ids.length);
    const none = await chat(fast, { logprobs: true, top_logprobs: null });
    expect(none.json.choices[0].logprobs).toBeNull();
  });

  it("vllm-0.10.1 ignores return_token_ids (unknown to it) instead of refusing it", async () => {
    const { status, json } = await chat(old, { logprobs: true, return_token_ids: true });
    expect(status).toBe(200);
    // Still vLLM's shape (stop_reason beside finish_reason), only without the ids.
    expect(json.choices[0]).toHaveProperty("stop_reason");
    expect(json.prompt_token_ids).toBeUndefined();
    expect(json.choices[0].token_ids).toBeUndefined();
  });
});

describe("vllm flavor: control routes", { timeout: 30_000 }, () => {
  it("pause in abort mode ends the call in flight with finish_reason abort; new calls wait for resume", async () => {
    const inflight = chat(slow, { max_tokens: 200 });
    await expect.poll(() => running(slow), { timeout: 5000 }).toBe(1);
    const paused = await post(slow, "/pause");
    expect(paused.status).toBe(200);
    expect(await paused.json()).toEqual({ status: "paused" });
    const cut = await inflight;
    expect(cut.status).toBe(200);
    expect(cut.json.choices[0].finish_reason).toBe("abort");
    expect(await isPaused(slow)).toBe(true);
    let done = false;
    const stats = async () => (await (await fetch(`${slow.url}/sim/stats`)).json()) as Json;
    const before = await stats();
    // The held call carries an image: the sim counts it when it reads the request, before the
    // pause gate, so its arrival is seen before the check that it waits.
    const png = starImage({ stars: 1, seed: 1 }).png.toString("base64");
    const withImage = [
      {
        role: "user",
        content: [
          { type: "text", text: "What is 2 + 3?" },
          { type: "image_url", image_url: { url: `data:image/png;base64,${png}` } },
        ],
      },
    ];
    const waiting = chat(slow, { max_tokens: 3, messages: withImage }).then((r) => {
      done = true;
      return r;
    });
    await expect
      .poll(async () => (await stats()).images.chat_total, { timeout: 10_000 })
      .toBe(before.images.chat_total + 1);
    // Arrived, not admitted: nothing runs and the scheduler has not counted it.
    expect(await stats()).toMatchObject({ running: 0, requests_total: before.requests_total });
    expect(done).toBe(false);
    expect(await (await post(slow, "/resume")).json()).toEqual({ status: "resumed" });
    expect((await waiting).json.choices[0].finish_reason).toBe("length");
    expect(await isPaused(slow)).toBe(false);
  });

  it("pause in wait mode lets the call in flight finish first", async () => {
    const inflight = chat(slow, { max_tokens: 6 });
    await expect.poll(() => running(slow), { timeout: 5000 }).toBe(1);
    expect((await post(slow, "/pause?mode=wait&clear_cache=false")).status).toBe(200);
    expect(await running(slow)).toBe(0);
    expect((await inflight).json.choices[0].finish_reason).toBe("length");
    await post(slow, "/resume");
    const keep = await post(slow, "/pause?mode=keep");
    expect(keep.status).toBe(400);
    expect(((await keep.json()) as { error: string }).error).toMatch(/not simulated/);
    expect((await post(slow, "/pause?mode=later")).status).toBe(422);
    expect(await isPaused(slow)).toBe(false);
  });

  it("/abort_requests aborts one request by its vLLM request id", async () => {
    const inflight = chat(slow, { max_tokens: 200 }, { "x-request-id": "one" });
    await expect.poll(() => running(slow), { timeout: 5000 }).toBe(1);
    const res = await post(slow, "/abort_requests", { request_ids: ["chatcmpl-one"] });
    expect(await res.json()).toEqual({ status: "aborted", aborted: 1 });
    expect((await inflight).json.choices[0].finish_reason).toBe("abort");
    expect(await isPaused(slow)).toBe(false);
  });

  it("reports the weight version at /weight_info and has none of SGLang's control routes", async () => {
    expect(await (await fetch(`${fast.url}/weight_info`)).json()).toEqual({ weight_version: "default" });
    const set = await post(fast, "/update_weight_version", { new_version: "step-3" });
    expect(await set.json()).toEqual({ success: true, new_version: "step-3" });
    expect(await (await fetch(`${fast.url}/weight_info`)).json()).toEqual({ weight_version: "step-3" });
    for (const path of ["/pause_generation", "/continue_generation", "/abort_request", "/flush_cache"])
      expect((await post(fast, path, {})).status, path).toBe(404);
  });
});
