import { beforeAll, describe, expect, it } from "vitest";
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

  it("prefers max_completion_tokens and clamps max_new_tokens to the context", () => {
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
    expect((body.sampling_params as Record<string, unknown>).max_new_tokens).toBe(100);
    expect((body.sampling_params as Record<string, unknown>).stop_token_ids).toEqual([151643]);
    expect(() =>
      buildGenerateRequest({ inputIds: new Array(1000).fill(1), sampling, contextLength: 1000, rid: "r" }),
    ).toThrow(/messages: prompt is 1000 tokens/);
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
