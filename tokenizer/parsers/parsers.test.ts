import { beforeAll, describe, expect, it } from "vitest";
import { type ChatTokenizer, loadChatTokenizer, type ToolDefinition } from "../chat-tokenizer";
import {
  parseAssistantOutput,
  separateThinking,
  toolCallParser,
  toolCallParserNames,
  typeXmlValue,
  UnknownParserError,
} from "./index";

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadChatTokenizer();
}, 30_000);

const tools: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "get_weather",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string" },
          days: { type: "integer" },
          metric: { type: "boolean" },
          threshold: { type: "number" },
          tags: { type: "array", items: { type: "string" } },
          zip: { type: "string" },
        },
      },
    },
  },
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { cmd: { type: "string" } } } },
  },
];
const ids = (i: number) => `call_${i}`;

/**
 * What a real Qwen3 turn looks like to the parser: encoded to ids (as sampled), decoded back
 * (the end-of-turn token that stopped it is not part of the text).
 */
function sampled(text: string): string {
  return tok.decode(tok.encode(text));
}

describe("reasoning", () => {
  it("splits a Qwen3 think block the way SGLang's qwen3 parser does", () => {
    const text = sampled("<think>\nThe user wants 2+2. That is 4.\n</think>\n\nThe answer is 4.");
    expect(parseAssistantOutput(text)).toEqual({
      reasoning_content: "The user wants 2+2. That is 4.\n",
      content: "The answer is 4.",
      tool_calls: [],
    });
  });

  it("handles an output that starts inside thinking (template opened <think>)", () => {
    expect(separateThinking("Let me think.\n</think>\n\nDone.")).toEqual({
      reasoning: "Let me think.\n",
      text: "Done.",
    });
    expect(parseAssistantOutput("still thinking", { startsInReasoning: true })).toEqual({
      reasoning_content: "still thinking",
      content: "",
      tool_calls: [],
    });
    expect(parseAssistantOutput("a\n</think>\nb", { reasoningParser: "qwen3-thinking" }).content).toBe("b");
  });

  it("treats an unclosed think block (cut by length) as all reasoning, and plain text as content", () => {
    expect(separateThinking("<think>\nhalf a tho")).toEqual({ reasoning: "half a tho", text: "" });
    expect(separateThinking("no thinking here")).toEqual({ reasoning: null, text: "no thinking here" });
    expect(parseAssistantOutput("<think>\nx\n</think>\n\ny", { reasoningParser: "none" })).toEqual({
      reasoning_content: null,
      content: "<think>\nx\n</think>\n\ny",
      tool_calls: [],
    });
  });
});

describe("qwen3 / hermes JSON tool calls", () => {
  it("parses thinking + several parallel calls with Python-style argument JSON", () => {
    const text = sampled(
      "<think>\nTwo cities.\n</think>\n\n" +
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}\n</tool_call>\n' +
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    );
    expect(parseAssistantOutput(text, { tools, makeId: ids })).toEqual({
      reasoning_content: "Two cities.\n",
      content: null,
      tool_calls: [
        {
          id: "call_0",
          type: "function",
          function: { name: "get_weather", arguments: '{"city": "Paris", "days": 2}' },
        },
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city": "Oslo"}' } },
      ],
    });
  });

  it("keeps text before a call as content and accepts compact Hermes blocks", () => {
    const out = parseAssistantOutput(
      'Checking.<tool_call>{"name":"bash","arguments":{"cmd":"ls -la"}}</tool_call>',
      { tools, toolCallParser: "hermes", makeId: ids },
    );
    expect(out.content).toBe("Checking.");
    expect(out.tool_calls.map((c) => c.function)).toEqual([{ name: "bash", arguments: '{"cmd": "ls -la"}' }]);
  });

  it("keeps malformed, unknown-tool and unclosed blocks as text without throwing", () => {
    const bad =
      '<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"\n</tool_call>\n' +
      '<tool_call>\n{"name": "rm_rf", "arguments": {}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "bash", "arguments": {"cmd": "pwd"}}\n</tool_call>\n' +
      '<tool_call>\n{"name": "bash", "argu';
    const out = parseAssistantOutput(sampled(bad), { tools, makeId: ids });
    expect(out.tool_calls.map((c) => c.function)).toEqual([{ name: "bash", arguments: '{"cmd": "pwd"}' }]);
    expect(out.content).toContain('{"cmd": "ls"\n</tool_call>');
    expect(out.content).toContain('"rm_rf"');
    expect(out.content).toContain('<tool_call>\n{"name": "bash", "argu');
    expect(out.content).not.toContain('"pwd"');
  });

  it("does not parse tool calls when the request had no tools", () => {
    const text = '<tool_call>\n{"name": "bash", "arguments": {}}\n</tool_call>';
    expect(parseAssistantOutput(text).tool_calls).toEqual([]);
    expect(parseAssistantOutput(text).content).toBe(text);
  });
});

describe("qwen3_coder XML tool calls", () => {
  it("parses parameters and types them with the tool's JSON schema", () => {
    const text = sampled(
      "I will look it up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nNew York\n</parameter>\n" +
        "<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n<parameter=threshold>\n0.5\n</parameter>\n" +
        '<parameter=tags>\n["a", "b"]\n</parameter>\n<parameter=zip>\n02134\n</parameter>\n</function>\n</tool_call>',
    );
    const out = parseAssistantOutput(text, { tools, toolCallParser: "qwen3_coder", makeId: ids });
    expect(out.content).toBe("I will look it up.");
    expect(out.tool_calls).toHaveLength(1);
    expect(out.tool_calls[0]!.function.name).toBe("get_weather");
    expect(JSON.parse(out.tool_calls[0]!.function.arguments)).toEqual({
      city: "New York",
      days: 3,
      metric: true,
      threshold: 0.5,
      tags: ["a", "b"],
      zip: "02134",
    });
  });

  it("keeps multi-line string values verbatim and parses parallel calls", () => {
    const text =
      "<tool_call>\n<function=bash>\n<parameter=cmd>\ncat <<EOF\nline 1\nEOF\n</parameter>\n</function>\n</tool_call>\n" +
      "<tool_call>\n<function=bash>\n<parameter=cmd>\npwd\n</function>\n</tool_call>";
    const out = parseAssistantOutput(text, { tools, toolCallParser: "qwen3_coder", makeId: ids });
    expect(out.tool_calls.map((c) => JSON.parse(c.function.arguments))).toEqual([
      { cmd: "cat <<EOF\nline 1\nEOF" },
      { cmd: "pwd" },
    ]);
  });

  it("keeps a block without a function, or with an unknown function, as text", () => {
    const text =
      "<tool_call>\n<parameter=cmd>\nls\n</parameter>\n</tool_call>\n" +
      "<tool_call>\n<function=nope>\n</function>\n</tool_call>";
    const out = parseAssistantOutput(text, { tools, toolCallParser: "qwen3_coder" });
    expect(out.tool_calls).toEqual([]);
    expect(out.content).toBe(text);
  });

  it("types values: wrong-typed values stay strings, null is null where allowed", () => {
    expect(typeXmlValue("3.5", { type: "integer" })).toBe("3.5");
    expect(typeXmlValue("null", { type: ["integer", "null"] })).toBeNull();
    expect(typeXmlValue('{"a": 1}', {})).toEqual({ a: 1 });
    expect(typeXmlValue("7", undefined)).toBe("7");
    expect(typeXmlValue("[1]", { type: "object" })).toBe("[1]");
    expect(typeXmlValue("2", { anyOf: [{ type: "integer" }, { type: "boolean" }] })).toBe(2);
  });
});

describe("registry", () => {
  it("knows qwen3, hermes and qwen3_coder and names the field of an unknown parser", () => {
    expect(toolCallParserNames()).toEqual(expect.arrayContaining(["qwen3", "hermes", "qwen3_coder"]));
    expect(toolCallParser("qwen3_coder").name).toBe("qwen3_coder");
    expect(() => toolCallParser("llama9")).toThrow(UnknownParserError);
    expect(() => parseAssistantOutput("x", { reasoningParser: "nope" })).toThrow(/reasoning_parser/);
  });
});
