import { beforeAll, describe, expect, it } from "vitest";
import { CALCULATOR_TOOL } from "../../proxy/testing/calculator-tool";
import { type ChatMessage, type ChatTokenizer, sglangToolDumps } from "../../tokenizer/chat-tokenizer";
import { loadFamilyTokenizer, modelFamily } from "../../tokenizer/families";
import { parseAssistantOutput } from "../../tokenizer/parsers";
import { parseOfferedTools } from "../agent-tools";
import { decideAnswer, readTurns } from "../policy";
import { chatmlAnswerAsDeepseek, deepseekPromptAsChatml } from "./deepseek-v3";

const tools = [
  CALCULATOR_TOOL,
  {
    type: "function",
    function: { name: "bash", parameters: { type: "object", properties: { cmd: { type: "string" } } } },
  },
];

let tok: ChatTokenizer;
beforeAll(async () => {
  tok = await loadFamilyTokenizer(modelFamily("deepseek_v3"));
}, 60_000);
const render = (messages: ChatMessage[]) =>
  tok.render(messages, { tools: sglangToolDumps(tools), addGenerationPrompt: true });
/** What the proxy hands the harness for a DeepSeek V3 answer. */
const asMessage = (sampled: string): ChatMessage => {
  const view = parseAssistantOutput(sampled, {
    toolCallParser: "deepseekv3",
    reasoningParser: "none",
    tools,
    makeId: (i) => `call_${i}`,
  });
  return { role: "assistant", content: view.content, tool_calls: view.tool_calls.map((c) => ({ ...c })) };
};

describe("a DeepSeek V3 prompt read as ChatML", () => {
  it("keeps the system text, the tools, every turn in order, calls and tool outputs", () => {
    const prompt = render([
      { role: "system", content: "Be brief." },
      { role: "user", content: "List and add." },
      {
        role: "assistant",
        content: "On it.",
        tool_calls: [
          { id: "a", type: "function", function: { name: "bash", arguments: '{"cmd": "ls"}' } },
          { id: "b", type: "function", function: { name: "calculator", arguments: '{"expression": "1+2"}' } },
        ],
      },
      { role: "tool", tool_call_id: "a", content: "a.txt" },
      { role: "tool", tool_call_id: "b", content: "3" },
      { role: "assistant", content: "a.txt; 3." },
      { role: "user", content: "Thanks" },
    ]);
    const chatml = deepseekPromptAsChatml(prompt);
    expect(chatml.endsWith("<|im_start|>assistant\n")).toBe(true);
    const turns = readTurns(chatml);
    expect(turns.map((t) => t.role)).toEqual(["system", "user", "assistant", "user", "assistant", "user"]);
    expect(turns[0]!.content.startsWith("Be brief.\n\n# Tools\n\n<tools>\n")).toBe(true);
    expect(turns[2]!.content).toBe(
      'On it.\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "ls"}}\n</tool_call>\n<tool_call>\n{"name": "calculator", "arguments": {"expression": "1+2"}}\n</tool_call>',
    );
    expect(turns[3]!.content).toBe(
      "<tool_response>\na.txt\n</tool_response>\n<tool_response>\n3\n</tool_response>",
    );
    expect(turns.slice(4).map((t) => t.content)).toEqual(["a.txt; 3.", "Thanks"]);
    expect(parseOfferedTools(chatml).map((t) => [t.name, Object.keys(t.properties)])).toEqual([
      ["calculator", ["expression"]],
      ["bash", ["cmd"]],
    ]);
  });

  it("after tool outputs the open turn is the assistant's (the template writes no <｜Assistant｜> there)", () => {
    const chatml = deepseekPromptAsChatml(
      render([
        { role: "user", content: "x" },
        asMessage(
          chatmlAnswerAsDeepseek('<tool_call>\n{"name": "bash", "arguments": {"cmd": "pwd"}}\n</tool_call>'),
        ),
        { role: "tool", tool_call_id: "call_0", content: "/w" },
      ]),
    );
    expect(chatml.endsWith("<tool_response>\n/w\n</tool_response><|im_end|>\n<|im_start|>assistant\n")).toBe(
      true,
    );
    expect(deepseekPromptAsChatml("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>")).toBe(
      "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    );
  });
});

describe("the simulated policy serving DeepSeek V3 through the dialect", () => {
  it("calls the offered calculator, then answers from its result, in DeepSeek's call format", () => {
    const m0: ChatMessage[] = [{ role: "user", content: "What is 17 * 23?" }];
    const first = decideAnswer({
      seed: 1,
      routingKey: "g.0.0",
      prompt: deepseekPromptAsChatml(render(m0)),
      temperature: 0,
    });
    expect(first.kind).toBe("tool_call");
    const sampled = chatmlAnswerAsDeepseek(first.text);
    expect(sampled).not.toContain("<think>");
    const call = asMessage(sampled);
    expect(call.tool_calls).toEqual([
      {
        id: "call_0",
        type: "function",
        function: { name: "calculator", arguments: '{"expression": "17 * 23"}' },
      },
    ]);
    const m1: ChatMessage[] = [...m0, call, { role: "tool", tool_call_id: "call_0", content: "391" }];
    const second = decideAnswer({
      seed: 1,
      routingKey: "g.0.0",
      prompt: deepseekPromptAsChatml(render(m1)),
      temperature: 0,
    });
    expect(second.kind).toBe("tool_result");
    expect(chatmlAnswerAsDeepseek(second.text)).toContain("391");
  });
});

describe("a ChatML answer written as DeepSeek V3 samples it", () => {
  it("drops the think block and gathers the calls into one section after the text", () => {
    expect(
      chatmlAnswerAsDeepseek(
        '<think>\nTwo things.\n</think>\n\nDoing both.\n<tool_call>\n{"name": "bash", "arguments": {"cmd":"ls"}}\n</tool_call>\n<tool_call>\n{"name": "calculator", "arguments": {}}\n</tool_call>',
      ),
    ).toBe(
      'Doing both.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"cmd": "ls"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>calculator\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>',
    );
  });

  it("leaves plain text and a block that is not a call as they are", () => {
    expect(chatmlAnswerAsDeepseek("391")).toBe("391");
    for (const text of [
      "x <tool_call>\nnot json\n</tool_call>",
      'x <tool_call>\n{"arguments": {}}\n</tool_call>',
    ])
      expect(chatmlAnswerAsDeepseek(text)).toBe(text);
  });
});
