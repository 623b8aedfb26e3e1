/**
 * The token bridge with the second model family (DeepSeek V3 and its tool template), driven by
 * scripted `/generate` replies: what the Qwen3 suites prove for the default family, proved here for
 * a vocabulary, end-of-turn token and tool-call format of another family.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { TokenBridge } from "../../../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../../../tokenizer/chat-tokenizer";
import { loadFamilyTokenizer, modelFamily } from "../../../tokenizer/families";
import { DEEPSEEK_V3_TOOL_TOKENS as T } from "../../../tokenizer/parsers";
import { scriptedTurn } from "./testing";

const family = modelFamily("deepseek_v3");
let tok: ChatTokenizer;
let EOS: number;
beforeAll(async () => {
  tok = await loadFamilyTokenizer(family);
  EOS = tok.tokenId("<｜end▁of▁sentence｜>")!;
}, 60_000);

const ids = (t: string) => tok.encode(t);
const tools: ToolDefinition[] = [
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { cmd: { type: "string" } } } },
  },
];
const parsers = { toolCallParser: family.toolCallParser, reasoningParser: family.reasoningParser };
const call = (cmd: string) =>
  `${T.callsBegin}${T.callBegin}function${T.sep}bash\n\`\`\`json\n{"cmd": "${cmd}"}\n\`\`\`${T.callEnd}${T.callsEnd}`;

/** A word the tokenizer writes as one token, sampled instead as two tokens that decode the same. */
function nonCanonicalSplit(): { word: string; split: [number, number] } {
  for (const word of [" fishing", " checking", " something", " between", " another"]) {
    const canonical = ids(word);
    if (canonical.length !== 1) continue;
    for (let i = 2; i < word.length - 1; i++) {
      const [a, b] = [ids(word.slice(0, i)), ids(word.slice(i))];
      if (a.length === 1 && b.length === 1) return { word, split: [a[0]!, b[0]!] };
    }
  }
  throw new Error("no word with a two-token split found");
}

describe("the token bridge with DeepSeek V3", () => {
  it("ends turns on <｜end▁of▁sentence｜>", () => {
    expect(new TokenBridge(tok).endOfTurnId).toBe(EOS);
  });

  it("a non-canonical split sampled in a tool turn survives the next turn: the same ids, extended", () => {
    const { word, split } = nonCanonicalSplit();
    expect(tok.decode(split)).toBe(word);
    expect(ids(word)).not.toEqual(split);
    const bridge = new TokenBridge(tok, { harness: "test", model: family.model });
    const request = (messages: ChatMessage[]) => ({
      messages,
      tools: sglangToolDumps(tools),
      toolDefs: tools,
    });
    const m1: ChatMessage[] = [{ role: "user", content: "What is in the log?" }];
    const out1 = [...ids("Let me look at the"), ...split, ...ids(` log.${call("cat app.log")}`), EOS];
    const t1 = scriptedTurn(tok, bridge, request(m1), out1, parsers);
    expect(t1.message.tool_calls).toEqual([
      {
        id: expect.any(String),
        type: "function",
        function: { name: "bash", arguments: '{"cmd": "cat app.log"}' },
      },
    ]);
    expect(t1.message.content).toBe(`Let me look at the${word} log.`);
    const m2: ChatMessage[] = [
      ...m1,
      t1.message,
      { role: "tool", tool_call_id: t1.message.tool_calls![0]!.id, content: "ok" },
    ];
    const t2 = scriptedTurn(tok, bridge, request(m2), [...ids("The log says ok."), EOS], parsers);
    expect(t2.prepared.verdict).toBe("extended");
    // The next prompt is the first prompt plus the sampled ids, split included, then the tool output.
    const head = [...t1.prepared.promptIds, ...out1];
    expect(t2.prepared.promptIds.slice(0, head.length)).toEqual(head);
    expect(tok.decode(t2.prepared.promptIds.slice(head.length))).toBe(
      "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>ok<｜tool▁output▁end｜><｜tool▁outputs▁end｜>",
    );
    // The template's own render of that history tokenizes the word canonically: only the bridge kept the split.
    const rendered = ids(tok.render(m2, { tools: sglangToolDumps(tools), addGenerationPrompt: true }));
    expect(rendered).not.toEqual(t2.prepared.promptIds);
    expect(tok.decode(rendered)).toBe(tok.decode(t2.prepared.promptIds));
  });
});
