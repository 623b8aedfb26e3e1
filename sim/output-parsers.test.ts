import { describe, expect, it } from "vitest";
import { parseToolCalls, pythonJsonDumps, separateReasoning } from "./output-parsers";
import { PrefixCache } from "./prefix-cache";

describe("separateReasoning (SGLang qwen3 parser)", () => {
  it("splits reasoning and answer", () => {
    expect(separateReasoning("<think>\nhm, 17 * 23\n</think>\n\n391")).toEqual({
      reasoning: "hm, 17 * 23\n",
      text: "391",
    });
  });
  it("leaves text without <think> alone and treats an unclosed block as all reasoning", () => {
    expect(separateReasoning("just text\n")).toEqual({ reasoning: undefined, text: "just text\n" });
    expect(separateReasoning("<think>\nstill thinking")).toEqual({ reasoning: "still thinking", text: "" });
  });
});

describe("parseToolCalls (SGLang qwen25 parser)", () => {
  it("extracts known tools with Python-style argument JSON and the text before the first call", () => {
    const text =
      'Let me compute.\n<tool_call>\n{"name": "calc", "arguments": {"expr":"17*23","n":[1,2]}}\n</tool_call>\n<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>';
    expect(parseToolCalls(text, ["calc"])).toEqual({
      normal: "Let me compute.",
      calls: [{ name: "calc", arguments: '{"expr": "17*23", "n": [1, 2]}' }],
    });
  });
  it("drops malformed blocks and passes text without calls through", () => {
    expect(parseToolCalls("<tool_call>\n{broken\n</tool_call>", ["calc"])).toEqual({ normal: "", calls: [] });
    expect(parseToolCalls("no calls", ["calc"])).toEqual({ normal: "no calls", calls: [] });
  });
  it("dumps JSON like Python's json.dumps", () => {
    expect(pythonJsonDumps({ a: { b: [true, null, "é"] } })).toBe('{"a": {"b": [true, null, "é"]}}');
  });
});

describe("PrefixCache", () => {
  it("reports the longest common prefix, leaving at least one token to compute", () => {
    const cache = new PrefixCache(2);
    expect(cache.cachedTokens([1, 2, 3])).toBe(0);
    cache.insert([1, 2, 3, 4, 5]);
    expect(cache.cachedTokens([1, 2, 3, 9])).toBe(3);
    expect(cache.cachedTokens([1, 2, 3])).toBe(2);
    cache.insert([7, 8]);
    cache.insert([9]);
    // The oldest entry was evicted (bounded at 2).
    expect(cache.size).toBe(2);
    expect(cache.cachedTokens([1, 2, 3, 9])).toBe(0);
    expect(() => new PrefixCache(0)).toThrow(RangeError);
  });
});
