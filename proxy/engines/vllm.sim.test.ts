/**
 * The `vllm` engine through the proxy against the simulator's vLLM flavors: a multi-turn tool
 * session records the engine's prompt ids, sampled ids and logprobs aligned; a weight-update pause in
 * `abort` mode pauses vLLM itself (`/pause`, `/resume`) where the server has the route and serves
 * the aborted call again after resume; an over-long prompt reaches the harness as
 * `context_length_exceeded`; the records say the weight version is unknown (null), never made up.
 */
import OpenAI from "openai";
import { afterEach, describe, expect, it } from "vitest";
import { CompletionRecord } from "../../protocol";
import { SIM_LIMITS } from "../../sim/engine";
import { type SimEngineHandle, type SimEngineOptions, startSimEngine } from "../../sim/server";
import { type RecordingProxy, startProxy } from "../server";

const MODEL = "Qwen/Qwen3-0.6B";
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const warnings: string[] = [];
const logger = { info() {}, warn: (m: string) => void warnings.push(m), error() {} };

async function sim(opts: SimEngineOptions = {}): Promise<SimEngineHandle> {
  const s = await startSimEngine({ model: MODEL, flavor: "vllm", ...opts });
  cleanups.push(() => s.close());
  return s;
}

async function proxyFor(url: string): Promise<RecordingProxy> {
  const p = await startProxy({
    engine: "vllm",
    engineUrls: [url],
    modelServed: MODEL,
    logger,
    healthIntervalMs: 0,
  });
  cleanups.push(() => p.close());
  return p;
}

let n = 0;
function session(p: RecordingProxy, meta: Record<string, unknown> = {}) {
  const id = `vllm-${++n}`;
  const { key } = p.openSession(id, meta as never);
  return { id, openai: new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 }) };
}

const records = (p: RecordingProxy, id: string) => p.completions(id).map((r) => CompletionRecord.parse(r));

async function isPaused(s: SimEngineHandle): Promise<boolean> {
  return ((await (await fetch(`${s.url}/is_paused`)).json()) as { is_paused: boolean }).is_paused;
}

async function stats(s: SimEngineHandle): Promise<{ running: number; aborted_total: number }> {
  return (await (await fetch(`${s.url}/sim/stats`)).json()) as never;
}

const tools: OpenAI.ChatCompletionTool[] = [
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

describe("vllm through the proxy", { timeout: 30_000 }, () => {
  it("records a tool session's prompt ids, sampled ids and logprobs, aligned, with no made-up weight version", async () => {
    const engine = await sim();
    const p = await proxyFor(engine.url);
    const s = session(p);
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 17 * 23?" }];
    const first = await s.openai.chat.completions.create({ model: "m", messages, tools });
    const call = first.choices[0]!.message.tool_calls![0]! as OpenAI.ChatCompletionMessageFunctionToolCall;
    expect(call.function.name).toBe("calculator");
    messages.push(
      { role: "assistant", content: null, tool_calls: [call] },
      { role: "tool", tool_call_id: call.id, content: "391" },
    );
    const second = await s.openai.chat.completions.create({ model: "m", messages, tools });
    expect(second.choices[0]!.message.content).toContain("391");
    const recs = records(p, s.id);
    expect(recs).toHaveLength(2);
    for (const [i, rec] of recs.entries()) {
      // The prompt ids are the engine's own rendering of exactly these messages.
      const asked = i === 0 ? messages.slice(0, 1) : messages;
      const tokenized = (await (
        await fetch(`${engine.url}/v1/tokenize`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ messages: asked, tools, add_generation_prompt: true }),
        })
      ).json()) as { tokens: number[] };
      expect(rec.prompt_ids).toEqual(tokenized.tokens);
      expect(rec.response_ids.length).toBeGreaterThan(0);
      expect(rec.response_logprobs).toHaveLength(rec.response_ids.length);
      // vLLM puts no weight version on chat answers: unknown (null), not invented; the version at
      // dispatch is what its `/weight_info` said (vLLM's initial label is "default").
      expect(rec).toMatchObject({ engine: "vllm", weight_version: null, weight_version_start: "default" });
    }
    expect(recs[0]!.finish_reason).toBe("tool_calls");
  });

  it("pauses vLLM itself in abort mode and serves the aborted call again after resume", async () => {
    const engine = await sim({ decodeTokensPerSecond: 8 });
    const p = await proxyFor(engine.url);
    const s = session(p);
    const call = s.openai.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "What is 2 + 3?" }],
    });
    await expect.poll(async () => (await stats(engine)).running, { timeout: 5000 }).toBe(1);
    expect(await p.pause({ timeoutMs: 5_000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
    // When pause returns, the engine itself holds generation, not only the proxy.
    expect(await isPaused(engine)).toBe(true);
    expect((await stats(engine)).aborted_total).toBe(1);
    p.resume();
    expect((await call).choices[0]!.message.content).toContain("5");
    expect(await isPaused(engine)).toBe(false);
    const recs = records(p, s.id);
    expect(recs).toHaveLength(1);
    expect(recs[0]!.finish_reason).toBe("stop");
    expect(p.status().reissued_calls).toBe(1);
  });

  it("a drain pause leaves vLLM running; a server without /pause gets the call cut, and a warning", async () => {
    const engine = await sim({ decodeTokensPerSecond: 8 });
    const p = await proxyFor(engine.url);
    await p.pause({ timeoutMs: 1_000, mode: "drain" });
    expect(await isPaused(engine)).toBe(false);
    p.resume();

    const old = await sim({ flavor: "vllm-0.10.1", decodeTokensPerSecond: 8 });
    const q = await proxyFor(old.url);
    const s = session(q);
    // vLLM 0.10.1 predates return_token_ids: the call fails naming the missing field.
    const err = await s.openai.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 502 });
    expect(String((err as Error).message)).toMatch(/prompt_token_ids/);
    warnings.length = 0;
    const pending = s.openai.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "What is 2 + 3?" }] })
      .catch((e: unknown) => e);
    await expect.poll(async () => (await stats(old)).running, { timeout: 5000 }).toBe(1);
    expect(await q.pause({ timeoutMs: 5_000, mode: "abort" })).toEqual({ drained: true, inflight: 0 });
    await expect.poll(async () => (await stats(old)).aborted_total, { timeout: 10_000 }).toBe(1);
    expect(warnings.some((w) => /no engine-side pause/.test(w))).toBe(true);
    q.resume();
    void pending;
  });

  it("reads the replica's weight version from vLLM's /weight_info, so min_policy_version can be met", async () => {
    const engine = await sim();
    const set = await fetch(`${engine.url}/update_weight_version`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ new_version: "7" }),
    });
    expect(set.status).toBe(200);
    const p = await proxyFor(engine.url);
    const s = session(p, { min_policy_version: 7 });
    await s.openai.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "What is 2 + 3?" }],
    });
    expect(records(p, s.id)[0]).toMatchObject({ weight_version_start: "7", weight_version: null });
    // A server without the route (vLLM without dev mode, or older) leaves the version unknown.
    const old = await sim({ flavor: "vllm-0.10.1" });
    const q = await proxyFor(old.url);
    await q.pause({ timeoutMs: 100 });
    q.resume();
    expect(q.status().replicas[0]!.weight_version).toBeNull();
  });

  it("gives the harness context_length_exceeded for a prompt vLLM refuses as too long", async () => {
    const engine = await sim();
    const p = await proxyFor(engine.url);
    const s = session(p);
    const err = await s.openai.chat.completions
      .create({
        model: "m",
        messages: [{ role: "user", content: "What is 2 + 3?" }],
        max_tokens: SIM_LIMITS.contextLength - 5,
      })
      .catch((e: unknown) => e);
    expect(err).toMatchObject({ status: 400, code: "context_length_exceeded" });
    expect(String((err as Error).message)).toMatch(/maximum input length of 5 tokens/);
    expect(records(p, s.id)).toHaveLength(0);
  });
});
