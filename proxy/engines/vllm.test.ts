import { describe, expect, it } from "vitest";
import { EngineContractError, ProxyHttpError } from "../errors";
import {
  buildVllmChatRequest,
  normalizeVllmChatResponse,
  VllmStreamAccumulator,
  vllmClientCompletion,
} from "./vllm";

/** A vLLM ≥ 0.10.2 chat answer with `return_token_ids` and `top_logprobs: 0`. */
const fixture = () => ({
  id: "chatcmpl-1",
  object: "chat.completion",
  created: 1,
  model: "Qwen/Qwen3-8B",
  prompt_token_ids: [151644, 872, 198],
  choices: [
    {
      index: 0,
      message: { role: "assistant", content: "4", reasoning: "2+2", tool_calls: [] },
      logprobs: {
        content: [
          { token: "4", logprob: -0.1, bytes: [52], top_logprobs: [] },
          { token: "<|im_end|>", logprob: -0.01, bytes: [], top_logprobs: [] },
        ],
      },
      finish_reason: "stop",
      stop_reason: null,
      token_ids: [19, 151645],
    },
  ],
  usage: {
    prompt_tokens: 3,
    completion_tokens: 2,
    total_tokens: 5,
    prompt_tokens_details: { cached_tokens: 2 },
  },
  prompt_logprobs: null,
});

describe("vllm engine", () => {
  it("asks for token ids and logprobs, renames reasoning_content to reasoning", () => {
    const served = buildVllmChatRequest(
      {
        model: "gpt",
        messages: [{ role: "assistant", content: "a", reasoning_content: "r" }],
        max_completion_tokens: 9,
      },
      { modelServed: "Q", sessionId: "s1" },
    );
    expect(served.body).toMatchObject({
      model: "Q",
      logprobs: true,
      top_logprobs: 0,
      return_token_ids: true,
      stream: false,
      max_tokens: 9,
    });
    expect(served.body.messages).toEqual([{ role: "assistant", content: "a", reasoning: "r" }]);
    expect(served.headers["X-SMG-Routing-Key"]).toBe("s1");
    const streamed = buildVllmChatRequest(
      { messages: [], top_logprobs: 3 },
      { modelServed: "Q", sessionId: "s", stream: true },
    );
    expect(streamed.body).toMatchObject({
      stream: true,
      stream_options: { include_usage: true },
      top_logprobs: 3,
    });
  });

  it("normalises ids, aligned logprobs, finish reason and cached tokens", () => {
    const n = normalizeVllmChatResponse(fixture());
    expect(n).toMatchObject({
      prompt_ids: [151644, 872, 198],
      response_ids: [19, 151645],
      response_logprobs: [-0.1, -0.01],
      finish_reason: "stop",
      weight_version: null,
      cached_tokens: 2,
    });
    expect(n.message).toMatchObject({ reasoning_content: "2+2" });
  });

  it("drops logprobs that do not line up (never a mixed list) and names missing ids", () => {
    const short = fixture();
    short.choices[0]!.logprobs.content.pop();
    expect(normalizeVllmChatResponse(short).response_logprobs).toBeNull();
    const wrongId = fixture();
    wrongId.choices[0]!.logprobs.content[0]!.token = "token_id:7";
    expect(normalizeVllmChatResponse(wrongId).response_logprobs).toBeNull();
    const { prompt_token_ids: _p, ...noPrompt } = fixture();
    expect(() => normalizeVllmChatResponse(noPrompt)).toThrow(/prompt_token_ids/);
    const noIds = fixture();
    (noIds.choices[0] as { token_ids?: number[] }).token_ids = undefined;
    expect(() => normalizeVllmChatResponse(noIds)).toThrow(EngineContractError);
  });

  it("hides the ids from the client and names reasoning the internal way", () => {
    const c = vllmClientCompletion(fixture());
    expect(c.prompt_token_ids).toBeUndefined();
    const choice = (c.choices as Array<Record<string, unknown>>)[0]!;
    expect(choice.token_ids).toBeUndefined();
    expect(choice.message).toMatchObject({ reasoning_content: "2+2" });
  });

  it("accumulates a stream into the equivalent whole answer", () => {
    const acc = new VllmStreamAccumulator();
    const deltas = [
      ...acc.push({
        id: "x",
        prompt_token_ids: [1, 2],
        choices: [
          {
            delta: { role: "assistant", reasoning: "hm" },
            token_ids: [5],
            logprobs: { content: [{ logprob: -1 }] },
          },
        ],
      }),
      ...acc.push({
        id: "x",
        choices: [{ delta: { content: "ok" }, token_ids: [6], logprobs: { content: [{ logprob: -2 }] } }],
      }),
      ...acc.push({
        id: "x",
        choices: [
          {
            delta: { tool_calls: [{ index: 0, id: "c1", function: { name: "f", arguments: '{"a"' } }] },
            token_ids: [7],
            logprobs: { content: [{ logprob: -3 }] },
          },
        ],
      }),
      ...acc.push({
        id: "x",
        choices: [
          {
            delta: { tool_calls: [{ index: 0, function: { arguments: ":1}" } }] },
            token_ids: [8],
            logprobs: { content: [{ logprob: -4 }] },
          },
        ],
      }),
      ...acc.push({ id: "x", choices: [{ delta: {}, finish_reason: "tool_calls", token_ids: [] }] }),
      ...acc.push({ id: "x", choices: [], usage: { prompt_tokens: 2, completion_tokens: 4 } }),
    ];
    expect(deltas).toEqual([
      { kind: "reasoning", text: "hm" },
      { kind: "text", text: "ok" },
    ]);
    expect(acc.toolCalls()).toEqual([{ id: "c1", name: "f", arguments: '{"a":1}' }]);
    const n = normalizeVllmChatResponse(acc.result());
    expect(n).toMatchObject({
      prompt_ids: [1, 2],
      response_ids: [5, 6, 7, 8],
      response_logprobs: [-1, -2, -3, -4],
      finish_reason: "tool_calls",
    });
  });

  it("refuses what vLLM's sampling validation refuses, naming the field", () => {
    const build = (extra: Record<string, unknown>) =>
      buildVllmChatRequest(
        { messages: [{ role: "user", content: "hi" }], ...extra },
        { modelServed: "Q", sessionId: "s" },
      );
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ temperature: -0.1 }, "temperature"],
      [{ temperature: 2.5 }, "temperature"],
      [{ top_p: 0 }, "top_p"],
      [{ top_p: 1.01 }, "top_p"],
      [{ top_k: -2 }, "top_k"],
      [{ top_k: 1.5 }, "top_k"],
      [{ min_p: 1.5 }, "min_p"],
      [{ presence_penalty: 2.5 }, "presence_penalty"],
      [{ frequency_penalty: -3 }, "frequency_penalty"],
      [{ repetition_penalty: 0 }, "repetition_penalty"],
      [{ max_tokens: 0 }, "max_tokens"],
      [{ max_completion_tokens: 0 }, "max_completion_tokens"],
      [{ min_tokens: 5, max_tokens: 4 }, "min_tokens"],
      [{ top_logprobs: 21 }, "top_logprobs"],
      [{ top_logprobs: -2 }, "top_logprobs"],
      [{ prompt_logprobs: 1, stream: true }, "prompt_logprobs"],
      [{ stop: ["a", ""] }, "stop"],
      [{ temperature: "hot" }, "temperature"],
    ];
    for (const [extra, field] of cases) {
      let err: unknown;
      try {
        build(extra);
      } catch (e) {
        err = e;
      }
      expect(err, JSON.stringify(extra)).toBeInstanceOf(ProxyHttpError);
      expect(err).toMatchObject({ status: 400, param: field });
    }
    // vLLM accepts these: -1 disables top_k; repetition_penalty has no upper bound; 0 and -1 logprobs.
    expect(() =>
      build({
        top_k: -1,
        repetition_penalty: 3,
        top_logprobs: -1,
        temperature: 0,
        min_tokens: 2,
        max_tokens: 2,
      }),
    ).not.toThrow();
  });

  it("never records an answer vLLM aborted: the harness is told to retry", () => {
    const aborted = fixture();
    aborted.choices[0]!.finish_reason = "abort";
    let err: unknown;
    try {
      normalizeVllmChatResponse(aborted);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProxyHttpError);
    expect(err).toMatchObject({ status: 503, code: "engine_aborted" });
  });
});
