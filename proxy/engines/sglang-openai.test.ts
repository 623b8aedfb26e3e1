import { describe, expect, it } from "vitest";
import { EngineContractError, ProxyHttpError } from "../errors";
import {
  buildSglangChatRequest,
  normalizeSglangChatResponse,
  recordableSglangResponse,
  validateChatRequest,
} from "./sglang-openai";

/** SGLang 0.5.13 `/v1/chat/completions` with `return_prompt_token_ids` + `return_meta_info` (Qwen3 ids). */
function sglang0513(): Record<string, unknown> {
  return {
    id: "7d1c5b0e9a7f4f0c8f1e2d3c4b5a6978",
    object: "chat.completion",
    created: 1777000000,
    model: "Qwen/Qwen3-8B",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: "4", reasoning_content: null, tool_calls: null },
        logprobs: {
          content: [
            { token: "4", bytes: [52], logprob: -0.0123, top_logprobs: [] },
            { token: "<|im_end|>", bytes: [], logprob: -0.0004, top_logprobs: [] },
          ],
        },
        finish_reason: "stop",
        matched_stop: 151645,
        prompt_token_ids: [151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198],
        meta_info: {
          id: "7d1c5b0e9a7f4f0c8f1e2d3c4b5a6978",
          finish_reason: { type: "stop", matched: 151645 },
          prompt_tokens: 15,
          weight_version: "step-12",
          num_retractions: 0,
          completion_tokens: 2,
          cached_tokens: 12,
          e2e_latency: 0.031,
          output_token_logprobs: [
            [-0.0123, 19, null],
            [-0.0004, 151645, null],
          ],
        },
      },
    ],
    usage: {
      prompt_tokens: 15,
      total_tokens: 17,
      completion_tokens: 2,
      prompt_tokens_details: null,
      reasoning_tokens: 0,
    },
    metadata: { weight_version: "step-12" },
  };
}

/** Polar's patched SGLang 0.5.10: `input_token_ids` on the choice, `token_id` on each logprob entry. */
function patched0510(): Record<string, unknown> {
  return {
    id: "b0b1b2b3",
    object: "chat.completion",
    created: 1760000000,
    model: "Qwen/Qwen3-8B",
    choices: [
      {
        index: 0,
        message: { role: "assistant", content: "4", reasoning_content: null, tool_calls: null },
        logprobs: {
          content: [
            { token: "4", bytes: [52], logprob: -0.5, top_logprobs: [], token_id: 19 },
            { token: "<|im_end|>", bytes: [], logprob: -0.25, top_logprobs: [], token_id: 151645 },
          ],
        },
        finish_reason: "stop",
        matched_stop: 151645,
        input_token_ids: [151644, 872, 198, 17, 151645, 198, 151644, 77091, 198],
      },
    ],
    usage: {
      prompt_tokens: 9,
      total_tokens: 11,
      completion_tokens: 2,
      prompt_tokens_details: { cached_tokens: 3 },
    },
    metadata: { weight_version: "default" },
  };
}

const choiceOf = (raw: Record<string, unknown>) => (raw.choices as Array<Record<string, unknown>>)[0]!;

describe("normalizeSglangChatResponse", () => {
  it("reads the 0.5.13 shape: prompt_token_ids + meta_info.output_token_logprobs", () => {
    const n = normalizeSglangChatResponse(sglang0513());
    expect(n.prompt_ids).toEqual([
      151644, 872, 198, 3838, 374, 220, 17, 10, 17, 30, 151645, 198, 151644, 77091, 198,
    ]);
    expect(n.response_ids).toEqual([19, 151645]);
    expect(n.response_logprobs).toEqual([-0.0123, -0.0004]);
    expect(n.finish_reason).toBe("stop");
    expect(n.weight_version).toBe("step-12");
    expect(n.cached_tokens).toBe(12);
    expect(n.message).toEqual({ role: "assistant", content: "4", reasoning_content: null, tool_calls: null });
  });

  it("reads the patched 0.5.10 shape: input_token_ids + logprobs.content[].token_id", () => {
    const n = normalizeSglangChatResponse(patched0510());
    expect(n.prompt_ids).toEqual([151644, 872, 198, 17, 151645, 198, 151644, 77091, 198]);
    expect(n.response_ids).toEqual([19, 151645]);
    expect(n.response_logprobs).toEqual([-0.5, -0.25]);
    expect(n.weight_version).toBe("default");
    expect(n.cached_tokens).toBe(3);
  });

  it("accepts dict entries in output_token_logprobs and meta_info.input_token_ids for the prompt", () => {
    const raw = sglang0513();
    const c = choiceOf(raw);
    const meta = c.meta_info as Record<string, unknown>;
    meta.input_token_ids = c.prompt_token_ids;
    delete c.prompt_token_ids;
    meta.output_token_logprobs = [
      { logprob: -1, token_id: 5 },
      { logprob: -2, token_id: 6 },
    ];
    const n = normalizeSglangChatResponse(raw);
    expect(n.prompt_ids).toHaveLength(15);
    expect(n.response_ids).toEqual([5, 6]);
    expect(n.response_logprobs).toEqual([-1, -2]);
  });

  it("uses choices[0].token_ids with logprobs.content when aligned, null when the lengths differ", () => {
    const raw = patched0510();
    const c = choiceOf(raw);
    c.token_ids = [19, 151645];
    expect(normalizeSglangChatResponse(raw).response_logprobs).toEqual([-0.5, -0.25]);
    (c.logprobs as { content: unknown[] }).content.pop();
    const n = normalizeSglangChatResponse(raw);
    expect(n.response_ids).toEqual([19, 151645]);
    expect(n.response_logprobs).toBeNull();
  });

  it("drops logprobs whose token_id disagrees with token_ids (never mixed)", () => {
    const raw = patched0510();
    const c = choiceOf(raw);
    c.token_ids = [19, 151643];
    expect(normalizeSglangChatResponse(raw).response_logprobs).toBeNull();
  });

  it("keeps the ids but nulls the logprobs when one output_token_logprobs entry has no logprob", () => {
    const raw = sglang0513();
    const otl = (choiceOf(raw).meta_info as { output_token_logprobs: unknown[][] }).output_token_logprobs;
    otl[1]![0] = null;
    const n = normalizeSglangChatResponse(raw);
    expect(n.response_ids).toEqual([19, 151645]);
    expect(n.response_logprobs).toBeNull();
  });

  it("names the missing prompt-id field", () => {
    const raw = sglang0513();
    delete choiceOf(raw).prompt_token_ids;
    expect(() => normalizeSglangChatResponse(raw)).toThrow(EngineContractError);
    expect(() => normalizeSglangChatResponse(raw)).toThrow(/choices\[0\]\.prompt_token_ids/);
  });

  it("names the missing output-id field (stock SGLang without token extensions)", () => {
    const raw = sglang0513();
    delete choiceOf(raw).meta_info;
    expect(() => normalizeSglangChatResponse(raw)).toThrow(/output_token_logprobs/);
  });

  it("refuses ids that are not token ids, naming the position", () => {
    const raw = sglang0513();
    (choiceOf(raw).prompt_token_ids as unknown[])[3] = "x";
    expect(() => normalizeSglangChatResponse(raw)).toThrow(/choices\[0\]\.prompt_token_ids\[3\]/);
  });
});

describe("buildSglangChatRequest", () => {
  it("forces model, non-streaming and the token flags; aliases max_completion_tokens; sets the routing key", () => {
    const original = {
      model: "gpt-4o",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 64,
      temperature: 0.7,
    };
    const served = buildSglangChatRequest(original, { modelServed: "Qwen/Qwen3-8B", sessionId: "b1.t1.0" });
    expect(served.body).toEqual({
      model: "Qwen/Qwen3-8B",
      messages: [{ role: "user", content: "hi" }],
      stream: false,
      max_tokens: 64,
      temperature: 0.7,
      logprobs: true,
      return_prompt_token_ids: true,
      return_meta_info: true,
    });
    expect(served.headers["X-SMG-Routing-Key"]).toBe("b1.t1.0");
    expect(original.model).toBe("gpt-4o"); // the harness's request is kept as sent
  });
});

describe("validateChatRequest", () => {
  it.each([
    [[], "(body)"],
    [{}, "messages"],
    [{ messages: "hi" }, "messages"],
    [{ messages: [{ content: "x" }] }, "messages[0].role"],
    [{ messages: [{ role: "user", content: "x" }], n: 2 }, "n"],
  ])("refuses %j naming %s", (body, field) => {
    try {
      validateChatRequest(body);
      expect.unreachable();
    } catch (err) {
      expect(err).toBeInstanceOf(ProxyHttpError);
      expect((err as ProxyHttpError).status).toBe(400);
      expect((err as ProxyHttpError).message.startsWith(`${field}:`)).toBe(true);
    }
  });
});

describe("recordableSglangResponse", () => {
  it("drops the id arrays but keeps the rest of meta_info", () => {
    const out = recordableSglangResponse(sglang0513());
    const c = choiceOf(out);
    expect(c.prompt_token_ids).toBeUndefined();
    expect(c.meta_info).toMatchObject({ cached_tokens: 12, weight_version: "step-12" });
    expect((c.meta_info as Record<string, unknown>).output_token_logprobs).toBeUndefined();
  });
});
