import { beforeAll, describe, expect, it } from "vitest";
import { contextViolation, SGLANG_CONTRACT } from "../../../protocol/sglang-contract";
import { type ChatTokenizer, loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import {
  buildGenerateRequest,
  collectImageData,
  GenerateResponseError,
  newRid,
  openaiFinishReason,
  parseGenerateResponse,
  SamplingParamError,
  samplingFromRequest,
  visibleOutputText,
} from "./generate";

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadChatTokenizer();
}, 30_000);

describe("request builder", () => {
  it("sends every sampling parameter explicitly, keeps special tokens and stop strings", () => {
    const prompt = tok.encode(tok.render([{ role: "user", content: "Hi" }]));
    const body = buildGenerateRequest({
      inputIds: prompt,
      sampling: samplingFromRequest({ temperature: 0.6, top_p: 0.95, max_tokens: 100, stop: "END", seed: 7 }),
      contextLength: 40_960,
      rid: "s-1-t0-abcd",
    });
    expect(body).toEqual({
      input_ids: prompt,
      rid: "s-1-t0-abcd",
      return_logprob: true,
      logprob_start_len: -1,
      stream: false,
      sampling_params: {
        temperature: 0.6,
        top_p: 0.95,
        top_k: -1,
        min_p: 0,
        max_new_tokens: 100,
        stop: ["END"],
        sampling_seed: 7,
        skip_special_tokens: false,
        spaces_between_special_tokens: false,
        no_stop_trim: true,
      },
    });
  });

  it("prefers max_completion_tokens and clamps max_new_tokens under SGLang's context rule", () => {
    const sampling = samplingFromRequest({
      max_tokens: 10,
      max_completion_tokens: 5000,
      stop_token_ids: [151643],
    });
    expect(sampling).toEqual({ max_tokens: 5000, stop_token_ids: [151643] });
    const body = buildGenerateRequest({
      inputIds: new Array(900).fill(1),
      sampling,
      contextLength: 1000,
      rid: "r",
    });
    // SGLang refuses input + max_new_tokens >= context: 900 + 100 would be an engine 400.
    expect((body.sampling_params as Record<string, unknown>).max_new_tokens).toBe(99);
    expect(
      contextViolation(900, (body.sampling_params as Record<string, number>).max_new_tokens!, 1000),
    ).toBeNull();
    expect((body.sampling_params as Record<string, unknown>).stop_token_ids).toEqual([151643]);
    expect(() =>
      buildGenerateRequest({ inputIds: new Array(1000).fill(1), sampling, contextLength: 1000, rid: "r" }),
    ).toThrow(/messages: prompt is 1000 tokens/);
    // One token short of the context leaves SGLang no room either: the harness's overflow.
    expect(() =>
      buildGenerateRequest({ inputIds: new Array(999).fill(1), sampling, contextLength: 1000, rid: "r" }),
    ).toThrow(/messages: prompt is 999 tokens/);
  });

  it("names the offending field of bad sampling input", () => {
    const field = (body: Record<string, unknown>) => {
      try {
        samplingFromRequest(body);
      } catch (e) {
        expect(e).toBeInstanceOf(SamplingParamError);
        return (e as SamplingParamError).field;
      }
      return null;
    };
    expect(field({ temperature: -1 })).toBe("temperature");
    expect(field({ top_p: 0 })).toBe("top_p");
    expect(field({ max_tokens: 0 })).toBe("max_tokens");
    expect(field({ max_completion_tokens: 1.5 })).toBe("max_completion_tokens");
    expect(field({ n: 2 })).toBe("n");
    expect(field({ stop: [1] })).toBe("stop");
    expect(field({ stop_token_ids: ["x"] })).toBe("stop_token_ids");
    expect(field({ temperature: 0, n: 1, stop: null })).toBeNull();
  });

  it("refuses what SGLang's SamplingParams.verify() refuses, before the engine does", () => {
    const refusal = (body: Record<string, unknown>) => {
      try {
        samplingFromRequest(body);
        return null;
      } catch (e) {
        return (e as SamplingParamError).message;
      }
    };
    expect(refusal({ repetition_penalty: 3 })).toBe(
      "repetition_penalty: must be in (0, 2] (1.0 = no penalty), got 3",
    );
    expect(refusal({ repetition_penalty: 0 })).toMatch(/^repetition_penalty:/);
    expect(refusal({ frequency_penalty: 2.5 })).toMatch(/^frequency_penalty: must be in \[-2, 2\]/);
    expect(refusal({ presence_penalty: -3 })).toMatch(/^presence_penalty:/);
    expect(refusal({ top_k: 0 })).toMatch(/^top_k: must be -1 \(disable\) or at least 1/);
    expect(refusal({ min_p: 1.5 })).toMatch(/^min_p:/);
    expect(refusal({ temperature: Number.POSITIVE_INFINITY })).toMatch(/^temperature:/);
    expect(
      refusal({ repetition_penalty: 2, frequency_penalty: -2, top_k: -1, min_p: 1, top_p: 1 }),
    ).toBeNull();
  });

  it("sends only /generate fields the shared contract lists (what the engines are held to)", () => {
    const body = buildGenerateRequest({
      inputIds: [1, 2, 3],
      sampling: samplingFromRequest({
        temperature: 0.5,
        top_p: 0.9,
        top_k: 20,
        min_p: 0.1,
        max_tokens: 8,
        stop: ["x"],
        stop_token_ids: [7],
        frequency_penalty: 0.1,
        presence_penalty: 0.1,
        repetition_penalty: 1.1,
        seed: 1,
      }),
      contextLength: 100,
      rid: "r",
      imageData: ["u"],
    });
    body.return_prompt_token_ids = true;
    const listed = (xs: readonly string[]) => new Set<string>(xs);
    const request = listed(SGLANG_CONTRACT.generate.request);
    const params = listed(SGLANG_CONTRACT.generate.samplingParams);
    expect(Object.keys(body).filter((k) => !request.has(k))).toEqual([]);
    expect(Object.keys(body.sampling_params as object).filter((k) => !params.has(k))).toEqual([]);
    expect(Object.keys(body.sampling_params as object).sort()).toEqual([...params].sort());
  });

  it("makes unique rids per session and turn", () => {
    const a = newRid("s-1", 3);
    expect(a).toMatch(/^s-1-t3-[0-9a-f]{8}$/);
    expect(newRid("s-1", 3)).not.toBe(a);
  });

  it("collects image_data in prompt order and names a part without url", () => {
    const messages = [
      {
        role: "user",
        content: [
          { type: "text", text: "a" },
          { type: "image_url", image_url: { url: "u1" } },
        ],
      },
      { role: "user", content: [{ type: "image_url", image_url: "u2" }] },
    ];
    expect(collectImageData(messages)).toEqual(["u1", "u2"]);
    expect(() => collectImageData([{ role: "user", content: [{ type: "image_url" }] }])).toThrow(
      "messages[0].content[0].image_url.url",
    );
    const body = buildGenerateRequest({
      inputIds: [1],
      sampling: {},
      contextLength: 10,
      rid: "r",
      imageData: ["u1"],
    });
    expect(body.image_data).toEqual(["u1"]);
  });
});

describe("response parser", () => {
  const meta = (extra: Record<string, unknown>) => ({
    id: "r1",
    finish_reason: { type: "stop", matched: 151645 },
    prompt_tokens: 12,
    completion_tokens: 3,
    cached_tokens: 8,
    weight_version: "v7",
    ...extra,
  });

  it("reads ids and logprobs from [logprob, id, text] triples and checks output_ids", () => {
    const r = parseGenerateResponse({
      text: " fishing<|im_end|>",
      output_ids: [7640, 287, 151645],
      meta_info: meta({
        output_token_logprobs: [
          [-0.5, 7640, null],
          [-0.25, 287, null],
          [-0.01, 151645, null],
        ],
      }),
    });
    expect(r).toEqual({
      rid: "r1",
      outputIds: [7640, 287, 151645],
      logprobs: [-0.5, -0.25, -0.01],
      finish: { type: "stop", matched: 151645, message: null },
      weightVersion: "v7",
      cachedTokens: 8,
      promptTokens: 12,
      completionTokens: 3,
      promptTokenIds: null,
      outputIdsPromptTail: 0,
    });
    expect(openaiFinishReason(r.finish, false)).toBe("stop");
    expect(openaiFinishReason(r.finish, true)).toBe("tool_calls");
  });

  it("accepts dict entries and parallel _val/_idx arrays", () => {
    const a = parseGenerateResponse({
      meta_info: meta({
        completion_tokens: 2,
        finish_reason: { type: "length", length: 2 },
        output_token_logprobs: [
          { logprob: -1, token_id: 5 },
          { logprob: -2, token_id: 6 },
        ],
      }),
    });
    expect([a.outputIds, a.logprobs, a.finish.type]).toEqual([[5, 6], [-1, -2], "length"]);
    const b = parseGenerateResponse({
      meta_info: meta({
        completion_tokens: 2,
        output_token_logprobs_val: [-1, -2],
        output_token_logprobs_idx: [5, 6],
      }),
    });
    expect(b.outputIds).toEqual([5, 6]);
  });

  it("fails hard on length mismatch, missing logprobs, unfinished or batch replies", () => {
    const lp = [[-0.5, 7640, null]];
    expect(() =>
      parseGenerateResponse({
        output_ids: [7640, 287],
        meta_info: meta({ completion_tokens: 1, output_token_logprobs: lp }),
      }),
    ).toThrow(GenerateResponseError);
    expect(() => parseGenerateResponse({ meta_info: meta({ output_token_logprobs: lp }) })).toThrow(
      /completion_tokens/,
    );
    expect(() => parseGenerateResponse({ meta_info: meta({}) })).toThrow(/output_token_logprobs/);
    expect(() =>
      parseGenerateResponse({
        meta_info: meta({ completion_tokens: 1, finish_reason: null, output_token_logprobs: lp }),
      }),
    ).toThrow(/did not finish/);
    expect(() =>
      parseGenerateResponse({
        meta_info: meta({ output_token_logprobs_val: [-1], output_token_logprobs_idx: [] }),
      }),
    ).toThrow(/_val/);
    expect(() => parseGenerateResponse([])).toThrow(/batch/);
    expect(() =>
      parseGenerateResponse({
        meta_info: meta({ completion_tokens: 1, output_token_logprobs: [[null, 5, null]] }),
      }),
    ).toThrow(/logprob/);
  });

  it("takes the logprob ids when output_ids carry the prompt's tail (sglang #10896, #17240)", () => {
    const lp = [
      [-0.1, 7640, null],
      [-0.2, 287, null],
    ];
    const prompt = [151644, 77091, 198];
    const r = parseGenerateResponse(
      {
        output_ids: [77091, 198, 7640, 287],
        meta_info: meta({ completion_tokens: 2, output_token_logprobs: lp }),
      },
      prompt,
    );
    expect([r.outputIds, r.outputIdsPromptTail]).toEqual([[7640, 287], 2]);
    // The server's own prompt ids (image pads expanded) are the ones whose tail counts.
    const served = parseGenerateResponse(
      {
        output_ids: [9, 7640, 287],
        prompt_token_ids: [1, 9],
        meta_info: meta({ completion_tokens: 2, output_token_logprobs: lp }),
      },
      prompt,
    );
    expect(served.outputIdsPromptTail).toBe(1);
    const plain = parseGenerateResponse(
      { output_ids: [7640, 287], meta_info: meta({ completion_tokens: 2, output_token_logprobs: lp }) },
      prompt,
    );
    expect(plain.outputIdsPromptTail).toBe(0);
    // Anything else is still a broken contract: ids that are not the prompt's tail, or a changed sample.
    const bad = (output_ids: number[]) => () =>
      parseGenerateResponse(
        { output_ids, meta_info: meta({ completion_tokens: 2, output_token_logprobs: lp }) },
        prompt,
      );
    expect(bad([151644, 7640, 287])).toThrow(/output_ids/);
    expect(bad([198, 7640, 288])).toThrow(/output_ids/);
    expect(bad([1, 2, 3, 4, 5, 6, 7640, 287])).toThrow(/output_ids/);
  });

  it("maps abort and keeps its message", () => {
    const r = parseGenerateResponse({
      meta_info: meta({
        completion_tokens: 0,
        finish_reason: { type: "abort", message: "weights updated" },
        output_token_logprobs: [],
      }),
    });
    expect(r.finish).toEqual({ type: "abort", matched: null, message: "weights updated" });
    expect(openaiFinishReason(r.finish, true)).toBe("abort");
  });
});

describe("visible text", () => {
  it("drops the end-of-turn token and a matched stop string, keeps other special tokens", () => {
    const ids = [...tok.encode("<think>\nx\n</think>\n\nI like"), 7640, 287, 151645];
    expect(visibleOutputText(tok, ids, { type: "stop", matched: 151645, message: null })).toBe(
      "<think>\nx\n</think>\n\nI like fishing",
    );
    const stopped = tok.encode("answer: 4 END");
    expect(visibleOutputText(tok, stopped, { type: "stop", matched: " END", message: null })).toBe(
      "answer: 4",
    );
    expect(visibleOutputText(tok, [7640, 287], { type: "length", matched: null, message: null })).toBe(
      " fishing",
    );
  });
});
