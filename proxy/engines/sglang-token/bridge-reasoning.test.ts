/**
 * `reasoning_dropped`: a harness that sends a reply back without the reasoning the proxy returned
 * gets its turn flagged, counted per session and per (harness, model), while the prompt keeps the
 * sampled `<think>` ids. Real Qwen3 tokenizer and template.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { reasoningDropped, TokenBridge, VerdictTally } from "../../../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
} from "../../../tokenizer/chat-tokenizer";
import { buildConversationTraces } from "../../builders/conversation";
import { scriptedTurn } from "./testing";

let tok: ChatTokenizer;
let EOT: number;
beforeAll(async () => {
  tok = await loadChatTokenizer();
  EOT = tok.tokenId("<|im_end|>")!;
}, 30_000);

const toolDefs = [
  {
    type: "function" as const,
    function: {
      name: "bash",
      description: "run a command",
      parameters: { type: "object", properties: { command: { type: "string" } }, required: ["command"] },
    },
  },
];
const tools = sglangToolDumps(toolDefs);
const task: ChatMessage[] = [
  { role: "system", content: "You fix bugs." },
  { role: "user", content: "Fix the bug in calc.js." },
];
const CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "cat calc.js"}}\n</tool_call>';
const THINKING = `<think>\nFirst I read calc.js to see subtract.\n</think>\n\n${CALL}`;

/** Turn 1 samples reasoning + a call; turn 2 sends it back (as `echo` makes it) with the result. */
function session(echo: (returned: ChatMessage) => ChatMessage[], harness = "h") {
  const tally = new VerdictTally();
  const bridge = new TokenBridge(tok, { harness, model: "Qwen3-8B", tally });
  const t1 = scriptedTurn(tok, bridge, { messages: task, tools, toolDefs }, [...tok.encode(THINKING), EOT]);
  const callId = (t1.message.tool_calls ?? [])[0]!.id;
  const result: ChatMessage = { role: "tool", tool_call_id: callId, content: "return a + b;" };
  const t2 = scriptedTurn(
    tok,
    bridge,
    { messages: [...task, ...echo(t1.message), result], tools, toolDefs },
    [...tok.encode("Found it."), EOT],
  );
  return { bridge, tally, t1, t2 };
}

const without = (m: ChatMessage): ChatMessage => {
  const { reasoning_content: _, ...rest } = m;
  return rest as ChatMessage;
};

describe("reasoning_dropped", () => {
  it("flags a turn whose request sends the reply back without its reasoning; the prompt keeps the sampled <think>", () => {
    const { bridge, tally, t1, t2 } = session((m) => [without(m)]);
    expect(t1.message.reasoning_content).toBe("First I read calc.js to see subtract.\n");
    expect(t2.committed.verdict).toBe("extended");
    expect(t2.committed.flags).toEqual(["reasoning_dropped"]);
    // What the engine saw on turn 2: turn 1's prompt, its sampled ids (the <think> block), then the result.
    const prompt = t2.committed.prompt_ids;
    expect(prompt.slice(0, t1.committed.prompt_ids.length + t1.outputIds.length)).toEqual([
      ...t1.committed.prompt_ids,
      ...t1.outputIds,
    ]);
    expect(tok.decode(prompt)).toContain("<think>\nFirst I read calc.js to see subtract.\n</think>");
    // A render of the history the harness holds has no reasoning left in it.
    const held = tok.render([...task, without(t1.message)], { tools, addGenerationPrompt: false });
    expect(held).not.toContain("First I read calc.js");
    expect(bridge.flagCounts()).toEqual({ reasoning_dropped: 1, image_prompt_unverified: 0 });
    expect(tally.flagCounts("h", "Qwen3-8B")).toEqual({ reasoning_dropped: 1, image_prompt_unverified: 0 });
    expect(tally.snapshot()[0]).toMatchObject({
      harness: "h",
      counts: { new_chain: 1, extended: 1 },
      flags: { reasoning_dropped: 1 },
    });
    // The conversation builder keeps the flag on the turn; still one trace.
    const traces = buildConversationTraces(bridge.turns());
    expect(traces).toHaveLength(1);
    expect((traces[0]!.metadata.turns as Array<{ flags: string[] }>).map((t) => t.flags)).toEqual([
      [],
      ["reasoning_dropped"],
    ]);
  });

  it("does not flag a reply sent back with its reasoning, whole or split over two messages", () => {
    const kept = session((m) => [m]);
    expect(kept.t2.committed.flags).toEqual([]);
    expect(kept.bridge.flagCounts()).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 0 });
    // Responses-style: a reasoning-only message, then the call.
    const split = session((m) => [
      { role: "assistant", content: "", reasoning_content: m.reasoning_content },
      without(m),
    ]);
    expect(split.t2.committed.verdict).toBe("extended");
    expect(split.t2.committed.flags).toEqual([]);
  });

  it("flags reasoning sent back changed, and never a reply that had none", () => {
    const changed = session((m) => [
      { ...m, reasoning_content: "[Continuing from previous AI thoughts...]" },
    ]);
    expect(changed.t2.committed.flags).toEqual(["reasoning_dropped"]);
    expect(reasoningDropped({ role: "assistant", content: "4" }, [{ role: "assistant", content: "4" }])).toBe(
      false,
    );
    expect(
      reasoningDropped({ role: "assistant", content: "4", reasoning_content: " x \n" }, [
        { role: "assistant", content: "4", reasoning_content: "x" },
      ]),
    ).toBe(false);
  });
});
