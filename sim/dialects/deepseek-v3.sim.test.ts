/**
 * The simulated engine serving DeepSeek V3 over HTTP, beyond `/generate`'s first answers
 * (proxy/engines/sglang-token/families.sim.test.ts): its chat endpoint parses calls as SGLang's
 * `deepseekv3` detector does, and a prompt that ends inside a DeepSeek assistant turn (a partial
 * rollout sent back) is continued, after `<｜Assistant｜>` and after a round of tool outputs alike.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CALCULATOR_TOOL } from "../../proxy/testing/calculator-tool";
import { type ChatMessage, type ChatTokenizer, sglangToolDumps } from "../../tokenizer/chat-tokenizer";
import { loadFamilyTokenizer, modelFamily } from "../../tokenizer/families";
import { openAssistantTurn } from "../continuation";
import { type SimEngineHandle, startSimEngine } from "../server";
import { DEEPSEEK_V3_TURN } from "./deepseek-v3";

const tools = [CALCULATOR_TOOL];
const messages = [
  { role: "system", content: "You are a careful assistant." },
  { role: "user", content: "What is 17 * 23?" },
];
const TURN = { opens: [...DEEPSEEK_V3_TURN.opens], end: DEEPSEEK_V3_TURN.end };

let sim: SimEngineHandle;
let tok: ChatTokenizer;
beforeAll(async () => {
  [sim, tok] = await Promise.all([
    startSimEngine({ port: 0, seed: 5, modelFamily: "deepseek_v3" }),
    loadFamilyTokenizer(modelFamily("deepseek_v3")),
  ]);
}, 60_000);
afterAll(async () => {
  await sim?.close();
});

// biome-ignore lint/suspicious/noExplicitAny: test helper reading arbitrary JSON replies
type Json = any;
async function post(route: string, body: unknown, routingKey = "session-ds"): Promise<Json> {
  const res = await fetch(`${sim.url}${route}`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-smg-routing-key": routingKey },
    body: JSON.stringify(body),
  });
  expect(res.status).toBe(200);
  return res.json();
}

describe("the chat endpoint of a DeepSeek V3 simulator", () => {
  it("returns the call as tool_calls, as SGLang's deepseekv3 parser does, and answers its output", async () => {
    const json = await post("/v1/chat/completions", { messages, tools, return_prompt_token_ids: true });
    const choice = json.choices[0];
    // The family's template with SGLang's tool dump, opening with DeepSeek's BOS.
    expect(tok.decode(choice.prompt_token_ids)).toBe(
      tok.render(messages, { tools: sglangToolDumps(tools), addGenerationPrompt: true }),
    );
    expect(choice.prompt_token_ids[0]).toBe(0);
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    expect(choice.message.tool_calls).toHaveLength(1);
    const call = choice.message.tool_calls[0];
    expect(call).toMatchObject({
      type: "function",
      index: 0,
      function: { name: "calculator", arguments: '{"expression": "17 * 23"}' },
    });
    // No DeepSeek markup leaks into what the client sees.
    expect(JSON.stringify(choice.message)).not.toContain("｜");

    const followUp = await post("/v1/chat/completions", {
      messages: [
        ...messages,
        { role: "assistant", content: null, tool_calls: [call] },
        { role: "tool", tool_call_id: call.id, content: "391" },
      ],
      tools,
    });
    expect(followUp.choices[0].message).toMatchObject({ content: "17 * 23 = 391.", tool_calls: null });
    expect(followUp.choices[0].finish_reason).toBe("stop");
  });
});

describe("a DeepSeek V3 turn the simulator had begun", () => {
  it("opens after <｜Assistant｜> and after a round of tool outputs; the end-of-sentence token closes it", () => {
    const first = tok.encode(tok.render(messages, { addGenerationPrompt: true }));
    expect(openAssistantTurn(tok, first, TURN)).toBeNull();
    expect(openAssistantTurn(tok, [...first, ...tok.encode("17")], TURN)).toEqual({ starts: [first.length] });
    const afterTools = tok.encode(
      tok.render(
        [
          ...messages,
          {
            role: "assistant",
            content: "",
            tool_calls: [{ type: "function", function: { name: "calculator", arguments: "{}" } }],
          },
          { role: "tool", content: "391" },
        ],
        { addGenerationPrompt: true },
      ),
    );
    expect(tok.decode(afterTools)).toMatch(/<｜tool▁outputs▁end｜>$/);
    expect(openAssistantTurn(tok, [...afterTools, ...tok.encode("17")], TURN)).toEqual({
      starts: [afterTools.length],
    });
    const closed = [...first, ...tok.encode("17 * 23 = 391."), ...tok.encode("<｜end▁of▁sentence｜>")];
    expect(openAssistantTurn(tok, closed, TURN)).toBeNull();
    // Qwen3's markers find no turn in a DeepSeek prompt: the family's markers are what finds it.
    expect(openAssistantTurn(tok, [...first, ...tok.encode("17")])).toBeNull();
  });

  it("answers the prompt plus the first k sampled ids with the turn's remaining ids, in a tool round too", async () => {
    const generate = async (input_ids: number[]): Promise<number[]> =>
      (await post("/generate", { input_ids, sampling_params: { max_new_tokens: 512 } })).output_ids;
    const rendered = (history: ChatMessage[]) =>
      tok.encode(tok.render(history, { tools: sglangToolDumps(tools), addGenerationPrompt: true }));
    const callTurn = rendered(messages);
    const callIds = await generate(callTurn);
    expect(tok.decode(callIds)).toContain("<｜tool▁calls▁begin｜>");
    const answerTurn = rendered([
      ...messages,
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { type: "function", function: { name: "calculator", arguments: '{"expression": "17 * 23"}' } },
        ],
      },
      { role: "tool", content: "391" },
    ]);
    const answerIds = await generate(answerTurn);
    expect(tok.decode(answerIds)).toBe("17 * 23 = 391.<｜end▁of▁sentence｜>");
    for (const [prompt, whole] of [
      [callTurn, callIds],
      [answerTurn, answerIds],
    ] as const) {
      for (const k of [1, Math.floor(whole.length / 2), whole.length - 1]) {
        const kept = whole.slice(0, k);
        expect([...kept, ...(await generate([...prompt, ...kept]))]).toEqual(whole);
      }
    }
  });
});
