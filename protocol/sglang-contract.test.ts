/**
 * The shared `/generate` contract: SGLang's sampling bounds and messages, its context-limit rule,
 * the prompt-tail form of `output_ids`, and the reference engine's JSON copy kept fresh.
 */
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import {
  contextViolation,
  maxNewTokensRoom,
  promptTailPrefix,
  SGLANG_CONTRACT_COPY_PATH,
  samplingBoundViolation,
  samplingParamsViolation,
  sglangContractJson,
} from "./sglang-contract";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..");

describe("sampling bounds (SamplingParams.verify)", () => {
  it.each([
    ["temperature", -0.1],
    ["temperature", Number.POSITIVE_INFINITY],
    ["top_p", 0],
    ["top_p", 1.01],
    ["min_p", -0.01],
    ["min_p", 1.5],
    ["top_k", 0],
    ["top_k", -2],
    ["top_k", 2.5],
    ["frequency_penalty", 2.5],
    ["presence_penalty", -2.5],
    ["repetition_penalty", 0],
    ["repetition_penalty", 2.01],
    ["min_new_tokens", -1],
    ["max_new_tokens", -1],
    ["temperature", "hot"],
    // npm run test:fuzz: an object whose toString is no function was a 500 (String() threw).
    ["top_k", { toString: 1 }],
    ["top_p", [0.5]],
  ])("refuses %s = %s", (field, value) => {
    expect(samplingBoundViolation(field, value)?.field).toBe(field);
  });

  it.each([
    ["temperature", 0],
    ["temperature", 100],
    ["top_p", 1],
    ["min_p", 0],
    ["min_p", 1],
    ["top_k", -1],
    ["top_k", 1],
    ["frequency_penalty", -2],
    ["presence_penalty", 2],
    ["repetition_penalty", 2],
    ["repetition_penalty", 0.01],
    ["max_new_tokens", 0],
    ["temperature", null],
  ])("accepts %s = %s", (field, value) => {
    expect(samplingBoundViolation(field, value)).toBeNull();
  });

  it("words its messages as SGLang does, and checks fields in verify()'s order", () => {
    expect(samplingBoundViolation("repetition_penalty", 3)?.message).toBe(
      "repetition_penalty must be in (0, 2] (1.0 = no penalty), got 3.",
    );
    expect(samplingParamsViolation({ repetition_penalty: 3, top_p: 0 })?.message).toBe(
      "top_p must be in (0, 1], got 0.",
    );
    expect(samplingParamsViolation({ top_k: 0 })?.message).toBe(
      "top_k must be -1 (disable) or at least 1, got 0.",
    );
  });

  it("refuses min_new_tokens above max_new_tokens, out-of-vocabulary logit_bias keys, two grammars", () => {
    expect(samplingParamsViolation({ min_new_tokens: 9, max_new_tokens: 4 })?.message).toBe(
      "min_new_tokens must be in [0, max_new_tokens(4)], got 9.",
    );
    expect(samplingParamsViolation({ min_new_tokens: 4, max_new_tokens: 4 })).toBeNull();
    expect(samplingParamsViolation({ logit_bias: { "151936": 1 } }, 151936)?.message).toBe(
      "logit_bias must has keys in [0, 151935], got 151936.",
    );
    expect(samplingParamsViolation({ logit_bias: { "7": -100 } }, 151936)).toBeNull();
    expect(samplingParamsViolation({ regex: "a+", json_schema: "{}" })?.message).toBe(
      "Only one of regex, json_schema, or ebnf can be set.",
    );
    expect(samplingParamsViolation({ regex: "a+" })).toBeNull();
  });
});

describe("context limit (_validate_one_request)", () => {
  it("refuses a prompt filling the context and input + max_new_tokens reaching it", () => {
    expect(contextViolation(1000, null, 1000)?.message).toBe(
      "The input (1000 tokens) is longer than the model's context length (1000 tokens).",
    );
    expect(contextViolation(999, null, 1000)).toBeNull();
    const total = contextViolation(900, 100, 1000);
    expect(total?.field).toBe("max_new_tokens");
    expect(total?.message).toMatch(
      /^Requested token count exceeds the model's maximum context length of 1000 tokens\. You requested a total of 1000 tokens: 900 tokens from the input messages and 100 tokens for the completion\./,
    );
    expect(contextViolation(900, 99, 1000)).toBeNull();
    expect(maxNewTokensRoom(900, 1000)).toBe(99);
    expect(contextViolation(900, maxNewTokensRoom(900, 1000), 1000)).toBeNull();
  });
});

describe("output_ids with the prompt's tail in front", () => {
  it("recognises 1 to 5 tail tokens followed by exactly the sampled ids", () => {
    const prompt = [1, 2, 3, 4, 5, 6, 7];
    expect(promptTailPrefix(prompt, [40, 41], [40, 41])).toBe(0);
    expect(promptTailPrefix(prompt, [7, 40, 41], [40, 41])).toBe(1);
    expect(promptTailPrefix(prompt, [3, 4, 5, 6, 7, 40, 41], [40, 41])).toBe(5);
    expect(promptTailPrefix(prompt, [2, 3, 4, 5, 6, 7, 40, 41], [40, 41])).toBe(0);
    expect(promptTailPrefix(prompt, [6, 40, 41], [40, 41])).toBe(0);
    expect(promptTailPrefix(prompt, [7, 40, 42], [40, 41])).toBe(0);
    expect(promptTailPrefix([9], [9, 40], [40])).toBe(1);
  });
});

describe("the reference engine's copy", () => {
  it("is what npm run gen:sglang-contract writes (run it when this fails)", () => {
    expect(readFileSync(join(ROOT, SGLANG_CONTRACT_COPY_PATH), "utf8")).toBe(sglangContractJson());
  });
});
