import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SGLANG_CONTRACT } from "../protocol/sglang-contract";
import { type ChatTokenizer, loadChatTokenizer } from "../tokenizer/chat-tokenizer";
import { type SimEngineHandle, startSimEngine } from "./server";

let sim: SimEngineHandle;
let tok: ChatTokenizer;
let prompt: string;

beforeAll(async () => {
  tok = await loadChatTokenizer();
  sim = await startSimEngine({ port: 0, seed: 5 });
  prompt = tok.render([{ role: "user", content: "What is 12 * 34?" }]);
}, 30_000);
afterAll(async () => {
  await sim.close();
});

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;

async function generate(body: unknown): Promise<{ status: number; json: Json }> {
  const res = await fetch(`${sim.url}/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, json: await res.json() };
}

describe("POST /generate", () => {
  it("takes input_ids and returns aligned output ids, logprobs and the SGLang meta_info", async () => {
    const inputIds = tok.encode(prompt);
    const { status, json } = await generate({
      input_ids: inputIds,
      rid: "req-1",
      sampling_params: { temperature: 0.7, max_new_tokens: 256 },
      return_logprob: true,
      return_prompt_token_ids: true,
    });
    expect(status).toBe(200);
    expect(json.prompt_token_ids).toEqual(inputIds);
    const { meta_info: meta, output_ids: outputIds } = json;
    expect(meta).toMatchObject({
      id: "req-1",
      finish_reason: { type: "stop", matched: 151645 },
      prompt_tokens: inputIds.length,
      completion_tokens: outputIds.length,
      weight_version: "default",
      simulator: "polar-sim-engine",
    });
    expect(meta.e2e_latency).toBeGreaterThanOrEqual(0);
    expect(meta.output_token_logprobs).toHaveLength(outputIds.length);
    meta.output_token_logprobs.forEach((entry: [number, number, null], i: number) => {
      expect(entry[1]).toBe(outputIds[i]);
      expect(entry[2]).toBeNull();
    });
    expect(outputIds.at(-1)).toBe(151645);
    // Default skip_special_tokens=true and stop trimming: the text is the answer without <|im_end|>.
    expect(json.text).toBe(tok.decode(outputIds.slice(0, -1)));
    expect(json.text).toMatch(/^<think>\n[\s\S]*\n<\/think>\n\n[\s\S]*\d+\.?$/);
  });

  it("gives the same answer for the same prompt as text or as ids (same rid = same routing key)", async () => {
    const byIds = await generate({ input_ids: tok.encode(prompt), rid: "same" });
    const byText = await generate({ text: prompt, rid: "same" });
    expect(byText.json.output_ids).toEqual(byIds.json.output_ids);
    expect(byText.json.meta_info.output_token_logprobs).toBeUndefined();
    expect(byText.json.prompt_token_ids).toBeUndefined();
  });

  it("reads the routing key header before rid", async () => {
    const headers = { "content-type": "application/json", "x-smg-routing-key": "sticky" };
    const send = (rid: string) =>
      fetch(`${sim.url}/generate`, {
        method: "POST",
        headers,
        body: JSON.stringify({ text: prompt, rid }),
      }).then((r) => r.json() as Promise<Json>);
    const [a, b] = await Promise.all([send("r1"), send("r2")]);
    expect(a.output_ids).toEqual(b.output_ids);
    expect(a.meta_info.id).toBe("r1");
  });

  it("truncates at max_new_tokens with a length finish", async () => {
    const { json } = await generate({ text: prompt, sampling_params: { max_new_tokens: 3 } });
    expect(json.meta_info.finish_reason).toEqual({ type: "length", length: 3 });
    expect(json.output_ids).toHaveLength(3);
  });

  it("stops on a stop string (trimmed unless no_stop_trim) and on stop token ids", async () => {
    const base = { text: prompt, rid: "stops", sampling_params: {} };
    const trimmed = await generate({
      ...base,
      sampling_params: { stop: ["</think>"], skip_special_tokens: false },
    });
    expect(trimmed.json.meta_info.finish_reason).toEqual({ type: "stop", matched: "</think>" });
    expect(trimmed.json.text.startsWith("<think>\n")).toBe(true);
    expect(trimmed.json.text).not.toContain("</think>");
    const kept = await generate({ ...base, sampling_params: { stop: "</think>", no_stop_trim: true } });
    expect(kept.json.text.endsWith("</think>")).toBe(true);
    expect(kept.json.output_ids).toEqual(trimmed.json.output_ids);

    const byId = await generate({ ...base, sampling_params: { stop_token_ids: [151668] } });
    expect(byId.json.meta_info.finish_reason).toEqual({ type: "stop", matched: 151668 });
    expect(byId.json.output_ids.at(-1)).toBe(151668);
  });

  it("keeps special tokens with skip_special_tokens=false and no_stop_trim", async () => {
    const { json } = await generate({
      text: prompt,
      sampling_params: { skip_special_tokens: false, no_stop_trim: true },
      return_logprob: true,
      return_text_in_logprobs: true,
    });
    expect(json.text.endsWith("<|im_end|>")).toBe(true);
    expect(json.meta_info.output_token_logprobs.at(-1)[2]).toBe("<|im_end|>");
  });

  it("refuses bad requests with 400 naming the field", async () => {
    const both = await generate({ text: "a", input_ids: [1] });
    expect(both.status).toBe(400);
    expect(both.json.error.message).toMatch(/exactly one of text or input_ids/);
    expect((await generate({})).status).toBe(400);
    const vocab = await generate({ input_ids: [1, 200000] });
    expect(vocab.json.error.message).toMatch(/^input_ids\[1\]: token id 200000 is outside the vocabulary/);
    const batch = await generate({ text: ["a", "b"] });
    expect(batch.json.error.message).toMatch(/batch requests/);
    const sp = await generate({ text: "a", sampling_params: { max_new_tokens: "many" } });
    expect(sp.json.error.message).toMatch(/^sampling_params\.max_new_tokens: /);
    const long = await generate({ input_ids: new Array(40_960).fill(9707) });
    expect(long.status).toBe(400);
    expect(long.json.error.message).toMatch(/longer than the model's context length \(40960 tokens\)/);
    const tooBig = await fetch(`${sim.url}/generate`, {
      method: "POST",
      body: "x".repeat(16 * 1024 * 1024 + 1),
    });
    expect(tooBig.status).toBe(413);
  });
});

describe("the engine's own checks (SGLang 0.5 / main as of 2026-11)", () => {
  it("refuses what SamplingParams.verify() refuses, with SGLang's message", async () => {
    const ids = tok.encode(prompt);
    const refused = async (sampling_params: Record<string, unknown>) => {
      const r = await generate({ input_ids: ids, sampling_params });
      expect(r.status).toBe(400);
      return r.json.error.message as string;
    };
    expect(await refused({ repetition_penalty: 3 })).toBe(
      "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3.",
    );
    expect(await refused({ top_p: 0 })).toBe("top_p must be in (0, 1], got 0.");
    expect(await refused({ top_k: 0 })).toBe("top_k must be -1 (disable) or at least 1, got 0.");
    expect(await refused({ min_p: 2 })).toBe("min_p must be in [0, 1], got 2.");
    expect(await refused({ frequency_penalty: -3 })).toMatch(/^frequency_penalty must be in \[-2, 2\]/);
    expect(await refused({ presence_penalty: 3 })).toMatch(/^presence_penalty must be in \[-2, 2\]/);
    expect(await refused({ temperature: -1 })).toMatch(/^temperature must be a non-negative finite number/);
    expect(await refused({ max_new_tokens: -1 })).toBe("max_new_tokens must be at least 0, got -1.");
    expect(await refused({ min_new_tokens: 8, max_new_tokens: 4 })).toBe(
      "min_new_tokens must be in [0, max_new_tokens(4)], got 8.",
    );
    expect(await refused({ logit_bias: { "999999": 1 } })).toMatch(/^logit_bias must has keys in \[0, /);
    expect(await refused({ regex: "a", ebnf: "b" })).toBe(
      "Only one of regex, json_schema, or ebnf can be set.",
    );
    // In range but not honoured by the script: accepted.
    const ok = await generate({
      input_ids: ids,
      sampling_params: {
        repetition_penalty: 2,
        top_k: -1,
        top_p: 1,
        min_p: 0,
        frequency_penalty: 2,
        max_new_tokens: 8,
      },
    });
    expect(ok.status).toBe(200);
  });

  it("answers with every /generate field the shared contract lists", async () => {
    const r = await generate({
      input_ids: tok.encode(prompt),
      sampling_params: { max_new_tokens: 8, sampling_seed: 3, spaces_between_special_tokens: false },
      rid: "contract-1",
      return_logprob: true,
      logprob_start_len: -1,
      stream: false,
      return_prompt_token_ids: true,
    });
    expect(r.status).toBe(200);
    const g = SGLANG_CONTRACT.generate;
    expect(Object.keys(r.json)).toEqual(expect.arrayContaining([...g.response, ...g.responseWithPromptIds]));
    expect(Object.keys(r.json.meta_info)).toEqual(expect.arrayContaining([...g.metaInfo]));
  });

  it("refuses input + max_new_tokens reaching the context length, as SGLang does", async () => {
    const small = await startSimEngine({ port: 0, contextLength: 64 });
    try {
      const post = (body: unknown) =>
        fetch(`${small.url}/generate`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(body),
        }).then(async (r) => ({ status: r.status, json: (await r.json()) as Json }));
      const ids = new Array(40).fill(9707);
      const full = await post({ input_ids: ids, sampling_params: { max_new_tokens: 24 } });
      expect(full.status).toBe(400);
      expect(full.json.error.message).toMatch(
        /^Requested token count exceeds the model's maximum context length of 64 tokens\. You requested a total of 64 tokens: 40 tokens from the input messages and 24 tokens for the completion\./,
      );
      const fits = await post({ input_ids: ids, sampling_params: { max_new_tokens: 23 } });
      expect(fits.status).toBe(200);
      const long = await post({ input_ids: new Array(64).fill(9707) });
      expect(long.json.error.message).toBe(
        "The input (64 tokens) is longer than the model's context length (64 tokens).",
      );
      const models = (await (await fetch(`${small.url}/v1/models`)).json()) as Json;
      expect(models.data[0].max_model_len).toBe(64);
      const info = (await (await fetch(`${small.url}/server_info`)).json()) as Json;
      expect(info.context_length).toBe(64);
    } finally {
      await small.close();
    }
  });

  it("puts the prompt's last 5 ids in front of output_ids when mirroring SGLang <= 0.5.4", async () => {
    const buggy = await startSimEngine({ port: 0, outputIds: "sglang-0.5.4-decode-ids" });
    try {
      const ids = tok.encode(prompt);
      const res = await fetch(`${buggy.url}/generate`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          input_ids: ids,
          sampling_params: { max_new_tokens: 16 },
          return_logprob: true,
        }),
      });
      const json = (await res.json()) as Json;
      const sampled = json.meta_info.output_token_logprobs.map((e: [number, number]) => e[1]);
      expect(json.output_ids).toEqual([...ids.slice(-5), ...sampled]);
      expect(json.meta_info.completion_tokens).toBe(sampled.length);
    } finally {
      await buggy.close();
    }
  });
});

describe("latency model", () => {
  it("waits for simulated decode time and reports it in e2e_latency", async () => {
    const slow = await startSimEngine({ port: 0, decodeTokensPerSecond: 100 });
    try {
      const res = await fetch(`${slow.url}/generate`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ text: "What is 2 + 2?", sampling_params: { max_new_tokens: 10 } }),
      });
      const json = (await res.json()) as Json;
      expect(json.meta_info.completion_tokens).toBe(10);
      expect(json.meta_info.e2e_latency).toBeGreaterThanOrEqual(0.09);
    } finally {
      await slow.close();
    }
  });
});
