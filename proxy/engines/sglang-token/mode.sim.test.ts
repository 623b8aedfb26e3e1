/**
 * Token mode against the simulated engine's real `/generate` (ids in; ids and logprobs out; a
 * scripted policy that thinks in `<think>` blocks and calls a calculator tool): Qwen3 thinking kept
 * in the bridged tokens, tool follow-ups extended, compaction → a new chain, images as `image_data`.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, type JsonObject, Trace } from "../../../protocol";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import { type ChatTokenizer, loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { getBuilder } from "../../builders";
import { type RecordingProxy, startProxy } from "../../server";

const MODEL = "Qwen/Qwen3-0.6B";
const quiet = { info() {}, warn() {}, error() {} };

let tok: ChatTokenizer;
let THINK: number;
let sim: SimEngineHandle;
let proxy: RecordingProxy;
let n = 0;

beforeAll(async () => {
  tok = await loadChatTokenizer();
  THINK = tok.tokenId("<think>")!;
  sim = await startSimEngine({ model: MODEL, weightVersion: "v7" });
  proxy = await startProxy({ engine: "sglang", engineUrl: sim.url, modelServed: MODEL, logger: quiet });
  proxy.setPolicyVersion("p42");
}, 30_000);
afterAll(async () => {
  await proxy.close();
  await sim.close();
});

function client(): { id: string; openai: OpenAI } {
  const id = `sim-${++n}`;
  const { key } = proxy.openSession(id, { harness: "scripted" });
  return { id, openai: new OpenAI({ apiKey: key, baseURL: `${proxy.url}/v1`, maxRetries: 0 }) };
}

const records = (id: string) => proxy.completions(id).map((r) => CompletionRecord.parse(r));
const bridgeOf = (r: CompletionRecord) => r.metadata.bridge as JsonObject;
const count = (xs: readonly number[], id: number) => xs.filter((x) => x === id).length;
const startsWith = (xs: readonly number[], p: readonly number[]) =>
  p.length <= xs.length && p.every((x, i) => xs[i] === x);

describe("Qwen3 thinking against the simulated engine", () => {
  it("keeps the first turn's <think> ids in the next prompt though the template drops them", async () => {
    const { id, openai } = client();
    const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 17 * 23?" }];
    const r1 = await openai.chat.completions.create({ model: "m", messages: m1 });
    const msg1 = r1.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string };
    expect(msg1.reasoning_content).toMatch(/17 \* 23/);
    // A harness that keeps only the visible answer, as most do.
    const m2: OpenAI.ChatCompletionMessageParam[] = [
      ...m1,
      { role: "assistant", content: msg1.content },
      { role: "user", content: "Are you sure?" },
    ];
    await openai.chat.completions.create({ model: "m", messages: m2 });
    const [a, b] = records(id);
    expect(count(a!.response_ids, THINK)).toBe(1);
    expect(bridgeOf(b!)).toMatchObject({
      verdict: "template_mismatch",
      parent_turn_id: bridgeOf(a!).turn_id,
    });
    expect(String(bridgeOf(b!).reason)).toMatch(/<think>/);
    expect(startsWith(b!.prompt_ids, [...a!.prompt_ids, ...a!.response_ids])).toBe(true);
    expect(count(b!.prompt_ids, THINK)).toBe(1);
    // What a chat server would have sent: the template strips the block.
    expect(count(tok.encode(tok.render(m2 as never)), THINK)).toBe(0);
    // Provenance on every record.
    expect(a!.weight_version).toBe("v7");
    expect(a!.metadata.policy_version).toBe("p42");
    expect(a!.replica).toBe(sim.url);

    const t = getBuilder("conversation")(records(id), { session_id: id, task_id: "t", config: {} });
    expect(t.traces).toHaveLength(1);
    const trace = Trace.parse(t.traces[0]);
    expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([...b!.prompt_ids, ...b!.response_ids]);
    expect(count(trace.response_ids, THINK)).toBe(2);
    expect(proxy.bridgeVerdicts(id)).toMatchObject({ new_chain: 1, template_mismatch: 1 });
  });

  it("extends the chain on a tool follow-up, where the template keeps the reasoning", async () => {
    const { id, openai } = client();
    const tools: OpenAI.ChatCompletionTool[] = [
      {
        type: "function",
        function: {
          name: "calculator",
          parameters: { type: "object", properties: { expression: { type: "string" } } },
        },
      },
    ];
    const messages: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 6 * 7?" }];
    const r1 = await openai.chat.completions.create({ model: "m", messages, tools });
    const m = r1.choices[0]!.message;
    expect(r1.choices[0]!.finish_reason).toBe("tool_calls");
    expect(m.tool_calls?.[0]).toMatchObject({ function: { name: "calculator" } });
    messages.push(m, { role: "tool", tool_call_id: m.tool_calls![0]!.id, content: "42" });
    const r2 = await openai.chat.completions.create({ model: "m", messages, tools });
    expect(r2.choices[0]!.message.content).toBe("6 * 7 = 42.");
    const [a, b] = records(id);
    expect(bridgeOf(b!).verdict).toBe("extended");
    expect(startsWith(b!.prompt_ids, [...a!.prompt_ids, ...a!.response_ids])).toBe(true);
    expect(count(b!.prompt_ids, THINK)).toBe(1);
  });
});

describe("compaction against the simulated engine", () => {
  it("a summarised history starts a new chain with verdict compacted; the session has two traces", async () => {
    const { id, openai } = client();
    let messages: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Tell me about lakes." },
    ];
    for (let k = 0; k < 2; k++) {
      const r = await openai.chat.completions.create({ model: "m", messages });
      messages = [...messages, r.choices[0]!.message, { role: "user", content: `Continue ${k}.` }];
    }
    const compacted: OpenAI.ChatCompletionMessageParam[] = [
      { role: "system", content: "Be brief." },
      { role: "user", content: "Summary: we talked about lakes. Continue." },
    ];
    await openai.chat.completions.create({ model: "m", messages: compacted });
    const rs = records(id);
    expect(rs.map((r) => bridgeOf(r).verdict)).toEqual(["new_chain", "template_mismatch", "compacted"]);
    expect(bridgeOf(rs[2]!).parent_turn_id).toBeNull();
    const t = getBuilder("conversation")(rs, { session_id: id, task_id: "t", config: {} });
    expect(t.traces).toHaveLength(2);
    expect((t.traces[1]!.metadata.turns as JsonObject[]).map((x) => x.verdict)).toEqual(["compacted"]);
    expect(t.metadata.verdicts).toEqual({ new_chain: 1, template_mismatch: 1, compacted: 1 });
  });
});

describe("images in token mode", () => {
  it("sends image URLs as image_data with the prompt ids, in prompt order", async () => {
    const { id, openai } = client();
    const png =
      "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg==";
    await openai.chat.completions.create({
      model: "m",
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "What is 2 + 2? See" },
            { type: "image_url", image_url: { url: png } },
          ],
        },
      ],
    });
    const [r] = records(id);
    const generate = r!.request.generate as JsonObject;
    expect(generate.image_data).toEqual([png]);
    expect(generate.return_prompt_token_ids).toBe(true);
    expect(generate.input_ids).toBeUndefined();
    // The text-only Qwen3 template renders no image placeholder: the engine returned exactly the
    // ids sent, so they are recorded as run (nothing kept apart, no flag).
    expect(r!.metadata.sent_prompt_ids).toBeUndefined();
    expect(r!.metadata.engine_prompt_ids).toBeUndefined();
    expect(bridgeOf(r!).flags).toEqual([]);
    expect(r!.prompt_ids).toEqual(tok.encode(tok.render([{ role: "user", content: "What is 2 + 2? See" }])));
  });
});

describe("the standalone proxy's trajectory route in token mode", () => {
  it("builds conversation when no ?builder= is given: one trace for a two-turn session", async () => {
    const p = await startProxy({
      engine: "sglang",
      engineUrl: sim.url,
      modelServed: MODEL,
      adminToken: "admin-secret",
      logger: quiet,
    });
    try {
      const admin = (method: string, url: string, body?: unknown) =>
        fetch(`${p.url}${url}`, {
          method,
          headers: { authorization: "Bearer admin-secret", "content-type": "application/json" },
          ...(body ? { body: JSON.stringify(body) } : {}),
        });
      const { key } = (await (await admin("POST", "/sessions", { session_id: "ext-tm" })).json()) as {
        key: string;
      };
      const openai = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
      const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 2 + 2?" }];
      const r1 = await openai.chat.completions.create({ model: "m", messages: m1 });
      const m2: OpenAI.ChatCompletionMessageParam[] = [
        ...m1,
        { role: "assistant", content: r1.choices[0]!.message.content },
        { role: "user", content: "And 3 + 3?" },
      ];
      await openai.chat.completions.create({ model: "m", messages: m2 });
      const t = (await (await admin("GET", `/sessions/${key}/trajectory`)).json()) as {
        traces: unknown[];
        metadata: JsonObject;
      };
      expect(t.metadata.builder).toBe("conversation");
      expect(t.traces).toHaveLength(1);
      const perCall = (await (
        await admin("GET", `/sessions/${key}/trajectory?builder=per_request`)
      ).json()) as {
        traces: unknown[];
      };
      expect(perCall.traces).toHaveLength(2);
    } finally {
      await p.close();
    }
  });
});

describe("an SGLang build whose output_ids begin with prompt tokens (<= 0.5.4, sglang #10896)", () => {
  it("serves every turn from the logprob ids and says so once per replica", async () => {
    const buggy = await startSimEngine({ model: MODEL, outputIds: "sglang-0.5.4-decode-ids" });
    const warnings: Array<{ message: string; fields: unknown }> = [];
    const logger = {
      info() {},
      error() {},
      warn: (message: string, fields?: unknown) => warnings.push({ message, fields }),
    };
    const p = await startProxy({ engine: "sglang", engineUrl: buggy.url, modelServed: MODEL, logger });
    try {
      const { key } = p.openSession("tail-1", { harness: "scripted" });
      const openai = new OpenAI({ apiKey: key, baseURL: `${p.url}/v1`, maxRetries: 0 });
      const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 6 * 7?" }];
      const r1 = await openai.chat.completions.create({ model: "m", messages: m1 });
      const m2: OpenAI.ChatCompletionMessageParam[] = [
        ...m1,
        r1.choices[0]!.message as OpenAI.ChatCompletionMessageParam,
        { role: "user", content: "And 6 * 8?" },
      ];
      await openai.chat.completions.create({ model: "m", messages: m2 });
      const [a, b] = p.completions("tail-1").map((r) => CompletionRecord.parse(r));
      // The recorded ids are the sampled ones (the prompt's tail is not in them), logprob for logprob.
      for (const r of [a!, b!]) {
        expect(r.response_ids.length).toBe(r.response_logprobs?.length);
        expect(r.response_ids.at(-1)).toBe(tok.tokenId("<|im_end|>"));
        expect(r.response_ids.slice(0, 5)).not.toEqual(r.prompt_ids.slice(-5));
      }
      expect(startsWith(b!.prompt_ids, [...a!.prompt_ids, ...a!.response_ids])).toBe(true);
      const notes = warnings.filter((w) => /output_ids begin with prompt tokens/.test(w.message));
      expect(notes).toHaveLength(1);
      expect(notes[0]!.fields).toMatchObject({ replica: buggy.url, prompt_tokens_in_output_ids: 5 });
    } finally {
      await p.close();
      await buggy.close();
    }
  });
});
