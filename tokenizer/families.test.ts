import { beforeAll, describe, expect, it } from "vitest";
import { CALCULATOR_TOOL } from "../proxy/testing/calculator-tool";
import { type ChatMessage, type ChatTokenizer, sglangToolDumps } from "./chat-tokenizer";
import { loadFamilyTokenizer, MODEL_FAMILIES, modelFamily, UnknownModelFamilyError } from "./families";
import { parseAssistantOutput, DEEPSEEK_V3_TOOL_TOKENS as T } from "./parsers";

const tools = [
  CALCULATOR_TOOL,
  { type: "function", function: { name: "bash", parameters: { type: "object" } } },
];

describe("model families", () => {
  it("knows qwen3 and deepseek_v3, and names the field of an unknown one", () => {
    expect(MODEL_FAMILIES).toEqual(["qwen3", "deepseek_v3"]);
    expect(modelFamily("deepseek_v3")).toMatchObject({
      toolCallParser: "deepseekv3",
      reasoningParser: "none",
    });
    expect(modelFamily("qwen3")).toMatchObject({ toolCallParser: "qwen3", reasoningParser: "qwen3" });
    const err = (() => {
      try {
        modelFamily("llama");
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(UnknownModelFamilyError);
    expect(err).toMatchObject({ field: "model_family" });
    expect((err as Error).message).toContain('"llama" (known: qwen3, deepseek_v3)');
  });
});

describe("DeepSeek V3 with its tool template", () => {
  let tok: ChatTokenizer;
  beforeAll(async () => {
    tok = await loadFamilyTokenizer(modelFamily("deepseek_v3"));
  }, 60_000);
  const EOS = "<｜end▁of▁sentence｜>";
  const render = (messages: ChatMessage[], gen: boolean) =>
    tok.render(messages, { tools: sglangToolDumps(tools), addGenerationPrompt: gen });
  /** What the model samples after `<｜Assistant｜>`: text, a call list, the end of the turn. */
  const reply = (text: string, calls: Array<[string, string]>) =>
    `${text}${calls.length ? `${T.callsBegin}${calls.map(([n, a]) => `${T.callBegin}function${T.sep}${n}\n\`\`\`json\n${a}\n\`\`\`${T.callEnd}`).join("\n")}${T.callsEnd}` : ""}${EOS}`;
  /** The harness's message for a sampled reply, as the proxy returns it. */
  const asMessage = (sampled: string): ChatMessage => {
    const view = parseAssistantOutput(sampled.slice(0, -EOS.length), {
      toolCallParser: "deepseekv3",
      reasoningParser: "none",
      tools,
      makeId: (i) => `call_${i}`,
    });
    return { role: "assistant", content: view.content, tool_calls: view.tool_calls.map((c) => ({ ...c })) };
  };

  it("ends a turn with <｜end▁of▁sentence｜> (id 1), starts with the BOS token, lists each tool once", () => {
    expect(tok.eosTokenIds).toContain(1);
    const prompt = render(
      [
        { role: "system", content: "Be brief." },
        { role: "user", content: "2+2?" },
      ],
      true,
    );
    expect(prompt.startsWith("<｜begin▁of▁sentence｜>Be brief.\n\n## Tools")).toBe(true);
    expect(prompt.endsWith("<｜User｜>2+2?<｜Assistant｜>")).toBe(true);
    for (const t of tools)
      expect(prompt.split(`"name": "${t.function.name}"`).length - 1, t.function.name).toBe(1);
    expect(tok.encode(prompt)[0]).toBe(0);
    // Without tools, nothing of the tool section.
    expect(tok.render([{ role: "user", content: "hi" }], { addGenerationPrompt: true })).toBe(
      "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜>",
    );
  });

  it("a tool session renders append-only: each prompt is the last one plus what the model sampled", () => {
    const m0: ChatMessage[] = [{ role: "user", content: "What is 17 * 23, and list the folder." }];
    const p0 = render(m0, true);
    const r1 = reply("Let me work it out.", [
      ["calculator", '{"expression": "17 * 23"}'],
      ["bash", '{"cmd": "ls"}'],
    ]);
    const a1 = asMessage(r1);
    expect(a1.tool_calls).toHaveLength(2);
    expect(render([...m0, a1], false)).toBe(p0 + r1);
    const m1: ChatMessage[] = [
      ...m0,
      a1,
      { role: "tool", tool_call_id: "call_0", content: "391" },
      { role: "tool", tool_call_id: "call_1", content: "a.txt" },
    ];
    const p1 = render(m1, true);
    expect(p1.startsWith(p0 + r1)).toBe(true);
    expect(p1.slice((p0 + r1).length)).toBe(
      `${T.callsBegin.replace("calls", "outputs")}<｜tool▁output▁begin｜>391<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>a.txt<｜tool▁output▁end｜><｜tool▁outputs▁end｜>`,
    );
    const r2 = reply("It is 391; the folder holds a.txt.", []);
    expect(render([...m1, asMessage(r2)], false)).toBe(p1 + r2);
    const p2 = render([...m1, asMessage(r2), { role: "user", content: "Thanks." }], true);
    expect(p2).toBe(`${p1 + r2}<｜User｜>Thanks.<｜Assistant｜>`);
  });

  it("a single call is closed like several (the model's own template leaves it open)", () => {
    const r = reply("", [["bash", '{"cmd": "pwd"}']]);
    const m: ChatMessage[] = [{ role: "user", content: "where?" }];
    expect(render([...m, asMessage(r)], false)).toBe(render(m, true) + r);
  });

  it("arguments sent back as a compact JSON string render as the model wrote them (json.dumps spacing)", () => {
    const m: ChatMessage[] = [
      { role: "user", content: "x" },
      {
        role: "assistant",
        content: null,
        tool_calls: [{ id: "c", type: "function", function: { name: "bash", arguments: '{"cmd":"ls"}' } }],
      },
    ];
    expect(render(m, false)).toContain('```json\n{"cmd": "ls"}\n```');
  });
});
