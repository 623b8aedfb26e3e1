/**
 * Token mode end to end, engine simulated by chosen ids: bridge + /generate builder/parser +
 * output parsers + conversation builder, all with the real Qwen3 tokenizer and template.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { Trace } from "../../../protocol";
import { TokenBridge } from "../../../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../../../tokenizer/chat-tokenizer";
import { buildConversationTraces } from "../../builders/conversation";
import { scriptedTurn } from "./testing";

let tok: ChatTokenizer;
let EOT: number;
beforeAll(async () => {
  tok = await loadChatTokenizer();
  EOT = tok.tokenId("<|im_end|>")!;
}, 30_000);

const NL = 198;
const ids = (text: string) => tok.encode(text);
const sys: ChatMessage = { role: "system", content: "You are a helpful agent." };

/** Index of `needle` as a contiguous run in `hay`, or -1. */
function indexOfRun(hay: readonly number[], needle: readonly number[]): number {
  outer: for (let i = 0; i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

describe("BPE drift", () => {
  it("keeps the sampled ids 7640, 287 in the next prompt and the trace; re-encoding would give 19948", () => {
    const bridge = new TokenBridge(tok, { harness: "test" });
    const m1: ChatMessage[] = [sys, { role: "user", content: "What do you do on weekends?" }];
    const out1 = [...ids("I go"), 7640, 287, EOT];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, out1);
    expect(t1.message.content).toBe("I go fishing");
    expect(tok.encode("I go fishing")).toContain(19948);

    const m2: ChatMessage[] = [
      ...m1,
      { role: "assistant", content: "I go fishing" },
      { role: "user", content: "Where?" },
    ];
    const out2 = [...ids("By the lake."), EOT];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, out2);
    expect(t2.prepared.verdict).toBe("extended");
    const p2 = t2.prepared.promptIds;
    expect(p2.slice(0, t1.prepared.promptIds.length + out1.length)).toEqual([
      ...t1.prepared.promptIds,
      ...out1,
    ]);
    expect(p2).not.toContain(19948);
    // The template's own tokens for the same conversation differ exactly by the merge.
    const reencoded = tok.encode(tok.render(m2));
    expect(reencoded).toContain(19948);
    expect(indexOfRun(reencoded, [7640, 287])).toBe(-1);
    expect(reencoded.length).toBe(p2.length - 1);
    // The bridged part is "\n" after <|im_end|> + the new user turn + the generation prompt.
    expect(p2.slice(t1.prepared.promptIds.length + out1.length)).toEqual(
      ids("\n<|im_start|>user\nWhere?<|im_end|>\n<|im_start|>assistant\n"),
    );

    const [trace, ...rest] = buildConversationTraces(bridge.turns());
    expect(rest).toEqual([]);
    Trace.parse(trace);
    expect([...trace!.prompt_ids, ...trace!.response_ids]).toEqual([...p2, ...out2]);
    const at = indexOfRun(trace!.response_ids, [7640, 287]);
    expect(at).toBeGreaterThanOrEqual(0);
    expect(trace!.loss_mask.slice(at, at + 2)).toEqual([1, 1]);
    expect(trace!.response_logprobs!.slice(at, at + 2)).toEqual(t1.logprobs.slice(at, at + 2));
  });
});

const toolDefs: ToolDefinition[] = [
  {
    type: "function",
    function: {
      name: "bash",
      description: "Run a shell command",
      parameters: { type: "object", properties: { cmd: { type: "string" } }, required: ["cmd"] },
    },
  },
  {
    type: "function",
    function: {
      name: "read_file",
      description: "Read a file",
      parameters: { type: "object", properties: { path: { type: "string" }, limit: { type: "integer" } } },
    },
  },
];
const call = (name: string, args: Record<string, unknown>) =>
  `<tool_call>\n{"name": "${name}", "arguments": ${JSON.stringify(args).replaceAll('","', '", "').replaceAll('":', '": ').replaceAll(',"', ', "')}}\n</tool_call>`;

/** Echoes the returned assistant message the way different harnesses do. */
function echo(message: ChatMessage, style: number): ChatMessage[] {
  const calls = message.tool_calls ?? [];
  switch (style % 4) {
    case 0: // verbatim
      return [structuredClone(message)];
    case 1: // content "" for null, compact re-serialised arguments in another key order, new ids
      return [
        {
          role: "assistant",
          content: message.content ?? "",
          tool_calls: calls.map((c, i) => {
            const args = JSON.parse(c.function.arguments as string) as Record<string, unknown>;
            const reversed = Object.fromEntries(Object.entries(args).reverse());
            return {
              id: `toolu_${i}`,
              type: "function",
              function: { name: c.function.name, arguments: JSON.stringify(reversed) },
            };
          }),
        },
      ];
    case 2: // reasoning dropped, ids and types stripped, arguments as an object
      return [
        {
          role: "assistant",
          content: message.content,
          tool_calls: calls.map((c) => ({
            function: { name: c.function.name, arguments: JSON.parse(c.function.arguments as string) },
          })),
        },
      ];
    default: // text and calls split into two messages
      return [
        { role: "assistant", content: message.content ?? "" },
        { role: "assistant", content: null, tool_calls: structuredClone(calls) },
      ];
  }
}

describe("10-turn tool-using conversation (OpenAI-shaped messages)", () => {
  it("yields one trace equal to the last prompt + last sampled ids, every turn extended", () => {
    const bridge = new TokenBridge(tok, { harness: "openai-agent" });
    const tools = sglangToolDumps(toolDefs);
    const outputs: number[][] = [
      [...ids(call("bash", { cmd: "ls" })), EOT],
      // Non-canonical split inside the text: " fishing" as " fish" + "ing".
      [
        ...ids("Let me check the"),
        7640,
        287,
        ...ids(` logs.\n${call("read_file", { path: "fishing.log", limit: 20 })}`),
        EOT,
      ],
      [...ids(`${call("bash", { cmd: "wc -l a.txt" })}\n${call("bash", { cmd: "wc -l b.txt" })}`), EOT],
      [...ids("<think>\nI should read it.\n</think>\n\n"), ...ids(call("read_file", { path: "a.txt" })), EOT],
      [...ids("Two files"), ...ids(` differ.\n${call("bash", { cmd: "diff a.txt b.txt" })}`), EOT],
      [...ids(call("bash", { cmd: "cat notes.md" })), EOT],
      // Token by token where the canonical encoding would merge.
      [
        ...ids("<tool_call>\n"),
        ...ids('{"name": "bash", "arguments": {"cmd": "echo'),
        7640,
        287,
        ...ids('"}}\n</tool_call>'),
        EOT,
      ],
      [...ids(call("read_file", { path: "b.txt", limit: 5 })), EOT],
      [...ids("<think>\nDone soon.\n</think>\n\n"), ...ids(call("bash", { cmd: "git status" })), EOT],
      [...ids("All done: the files differ in 3 lines, and the log mentions"), 7640, 287, ...ids("."), EOT],
    ];
    let messages: ChatMessage[] = [
      sys,
      { role: "user", content: "Compare a.txt and b.txt and check the logs." },
    ];
    const turns = outputs.map((out, k) => {
      const t = scriptedTurn(tok, bridge, { messages, tools, toolDefs }, out);
      const calls = t.message.tool_calls ?? [];
      messages = [
        ...messages,
        ...echo(t.message, k),
        ...calls.map((c, j) => ({
          role: "tool",
          tool_call_id: c.id ?? `x${j}`,
          content: `result ${k}.${j}\nok`,
        })),
      ];
      return t;
    });
    expect(turns.map((t) => t.message.tool_calls?.length ?? 0)).toEqual([1, 1, 2, 1, 1, 1, 1, 1, 1, 0]);
    expect(turns[1]!.message.content).toBe("Let me check the fishing logs.");
    expect(turns[3]!.message.reasoning_content).toBe("I should read it.\n");
    expect(turns.map((t) => t.prepared.verdict)).toEqual(["new_chain", ...new Array(9).fill("extended")]);
    expect(bridge.verdictCounts()).toEqual({
      extended: 9,
      template_mismatch: 0,
      new_chain: 1,
      compacted: 0,
      history_rewritten: 0,
    });

    const traces = buildConversationTraces(bridge.turns());
    expect(traces).toHaveLength(1);
    const trace = Trace.parse(traces[0]);
    const last = turns.at(-1)!;
    expect([...trace.prompt_ids, ...trace.response_ids]).toEqual([
      ...last.prepared.promptIds,
      ...last.outputIds,
    ]);
    expect(trace.prompt_ids).toEqual(turns[0]!.prepared.promptIds);
    // Mask 1 exactly on the sampled ids, with their logprobs, in order; bridged ids mask 0, 0.0.
    const sampled = turns.flatMap((t) => t.outputIds);
    const sampledLogprobs = turns.flatMap((t) => t.logprobs);
    const ones = trace.loss_mask.flatMap((m, i) => (m === 1 ? [i] : []));
    expect(ones.map((i) => trace.response_ids[i])).toEqual(sampled);
    expect(ones.map((i) => trace.response_logprobs![i])).toEqual(sampledLogprobs);
    trace.loss_mask.forEach((m, i) => {
      if (m === 0) expect(trace.response_logprobs![i]).toBe(0);
    });
    // Every bridge starts with the "\n" that follows <|im_end|> in the template (mask 0).
    const meta = trace.metadata.turns as Array<{
      bridged_start: number;
      sampled_start: number;
      verdict: string;
      weight_version: string;
      policy_version: string;
    }>;
    for (const m of meta.slice(1)) {
      expect(trace.response_ids[m.bridged_start - 1]).toBe(EOT);
      expect(trace.response_ids[m.bridged_start]).toBe(NL);
      expect(trace.loss_mask[m.bridged_start]).toBe(0);
    }
    expect(meta.map((m) => [m.weight_version, m.policy_version])).toEqual(new Array(10).fill(["w1", "p3"]));
    // What the template would give for the final messages differs (the splits were merged).
    const canonical = tok.encode(tok.render(messages.slice(0, -1), { tools }));
    expect(canonical).not.toEqual(last.prepared.promptIds);
  });
});

describe("Qwen3 thinking", () => {
  const m1: ChatMessage[] = [sys, { role: "user", content: "Is 91 prime?" }];
  const out1 = () => [
    ...ids("<think>\n91 = 7 * 13, so no. I like"),
    7640,
    287,
    ...ids(".\n</think>\n\nNo: 91 = 7 × 13."),
    EOT,
  ];

  it("keeps earlier <think> content in the bridged tokens though the template strips it (template_mismatch)", () => {
    const bridge = new TokenBridge(tok);
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, out1());
    expect(t1.message.reasoning_content).toBe("91 = 7 * 13, so no. I like fishing.\n");
    // The harness keeps only the content, as most do.
    const m2: ChatMessage[] = [
      ...m1,
      { role: "assistant", content: t1.message.content },
      { role: "user", content: "And 97?" },
    ];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("<think>\nprime\n</think>\n\nYes."), EOT]);
    expect(t2.prepared.verdict).toBe("template_mismatch");
    expect(t2.prepared.reason).toMatch(/<think>/);
    expect(t2.prepared.parentTurnId).toBe(t1.committed.turn_id);
    const think = tok.tokenId("<think>")!;
    expect(t2.prepared.promptIds.slice(0, t1.prepared.promptIds.length + t1.outputIds.length)).toEqual([
      ...t1.prepared.promptIds,
      ...t1.outputIds,
    ]);
    expect(t2.prepared.promptIds.filter((id) => id === think)).toHaveLength(1);
    // The template's render drops the block: no <think> at all in its tokens.
    expect(tok.encode(tok.render(m2)).filter((id) => id === think)).toHaveLength(0);

    const m3: ChatMessage[] = [
      ...m2,
      { role: "assistant", content: "Yes." },
      { role: "user", content: "Thanks" },
    ];
    const t3 = scriptedTurn(tok, bridge, { messages: m3 }, [
      ...ids("<think>\n\n</think>\n\nYou're welcome."),
      EOT,
    ]);
    expect(t3.prepared.verdict).toBe("template_mismatch");
    const [trace] = buildConversationTraces(bridge.turns());
    expect([...trace!.prompt_ids, ...trace!.response_ids]).toEqual([
      ...t3.prepared.promptIds,
      ...t3.outputIds,
    ]);
    expect(trace!.response_ids.filter((id) => id === think)).toHaveLength(3);
  });

  /** A tool call with reasoning, its result, and a final reply: the two turns of a tool follow-up. */
  function toolFollowUp(reply: string) {
    const bridge = new TokenBridge(tok);
    const tools = sglangToolDumps(toolDefs);
    const t1 = scriptedTurn(tok, bridge, { messages: m1, tools, toolDefs }, [
      ...ids(`<think>\nCheck with a tool.\n</think>\n\n${call("bash", { cmd: "factor 91" })}`),
      EOT,
    ]);
    const m2: ChatMessage[] = [...m1, t1.message, { role: "tool", tool_call_id: "x", content: "91: 7 13" }];
    const t2 = scriptedTurn(tok, bridge, { messages: m2, tools, toolDefs }, [...ids(reply), EOT]);
    return { bridge, tools, m2, t2 };
  }

  it("extends without mismatch on tool follow-ups, where the template keeps reasoning", () => {
    const { t2 } = toolFollowUp("<think>\nok\n</think>\n\nNo.");
    expect(t2.prepared.verdict).toBe("extended");
  });

  it("a new question after a tool follow-up: the template drops the earlier reasoning from the history (history not intact)", () => {
    const { bridge, tools, m2, t2 } = toolFollowUp("No.");
    expect(t2.prepared.verdict).toBe("extended");
    // Turn 2's prompt held turn 1's <think> block (after the last user message then); the render
    // for a new question drops it, so the history before turn 2's reply is not what it saw.
    const think = tok.tokenId("<think>")!;
    expect(t2.prepared.promptIds.filter((id) => id === think)).toHaveLength(1);
    const m3: ChatMessage[] = [...m2, t2.message, { role: "user", content: "And 97?" }];
    expect(tok.encode(tok.render(m3, { tools })).filter((id) => id === think)).toHaveLength(0);
    const t3 = scriptedTurn(tok, bridge, { messages: m3, tools, toolDefs }, [...ids("Prime."), EOT]);
    expect(t3.prepared.verdict).toBe("template_mismatch");
    expect(t3.prepared.reason).toMatch(/renders the history before t\d+'s reply differently/);
    expect(t3.prepared.parentTurnId).toBe(t2.committed.turn_id);
    // Still one chain: what the model saw stays the prefix of what comes next.
    const [trace, ...more] = buildConversationTraces(bridge.turns());
    expect(more).toHaveLength(0);
    expect([...trace!.prompt_ids, ...trace!.response_ids]).toEqual([
      ...t3.prepared.promptIds,
      ...t3.outputIds,
    ]);
  });

  it("with onTemplateMismatch: new_chain sends the template's render instead", () => {
    const bridge = new TokenBridge(tok, { onTemplateMismatch: "new_chain" });
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, out1());
    const m2: ChatMessage[] = [
      ...m1,
      { role: "assistant", content: t1.message.content },
      { role: "user", content: "And 97?" },
    ];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("Yes."), EOT]);
    expect(t2.prepared.verdict).toBe("template_mismatch");
    expect(t2.prepared.parentTurnId).toBeNull();
    expect(t2.prepared.promptIds).toEqual(tok.encode(tok.render(m2)));
    expect(buildConversationTraces(bridge.turns())).toHaveLength(2);
  });

  // Text that reads like an end-of-turn: a quoted "<|im_end|>" (plain tokens, not the special id).
  const quotedEot = () => [...ids("<|im_"), ...ids("end|>")];

  it.each([1, 2])(
    "an end-of-turn quoted %i time(s) in reasoning the template drops: the new question stays in the prompt (history not intact)",
    (quotes) => {
      const bridge = new TokenBridge(tok);
      const tools = sglangToolDumps(toolDefs);
      // A harness-sent history whose tool call carries reasoning that quotes an end-of-turn: kept
      // in turn 1's prompt (after the last user message), dropped once a new question follows.
      const m1: ChatMessage[] = [
        sys,
        { role: "user", content: "Is 91 prime?" },
        {
          role: "assistant",
          content: "",
          reasoning_content: `Quote: ${"<|im_end|> ".repeat(quotes)}then check.`,
          tool_calls: [
            { id: "c1", type: "function", function: { name: "bash", arguments: '{"cmd": "factor 91"}' } },
          ],
        },
        { role: "tool", tool_call_id: "c1", content: "91: 7 13" },
      ];
      const t1 = scriptedTurn(tok, bridge, { messages: m1, tools, toolDefs }, [...ids("No."), EOT]);
      const m2: ChatMessage[] = [...m1, t1.message, { role: "user", content: "And 97?" }];
      expect(tok.render(m2, { tools }).startsWith(tok.render(m1, { tools }))).toBe(false);
      const t2 = scriptedTurn(tok, bridge, { messages: m2, tools, toolDefs }, [...ids("Prime."), EOT]);
      expect(t2.prepared.verdict).toBe("template_mismatch");
      expect(t2.prepared.reason).toMatch(/renders the history before t\d+'s reply differently/);
      expect(t2.prepared.parentTurnId).toBe(t1.committed.turn_id);
      // What the model saw, its reply, then exactly the new question and the generation prompt.
      const held = [...t1.prepared.promptIds, ...t1.outputIds];
      expect(t2.prepared.promptIds.slice(0, held.length)).toEqual(held);
      expect(tok.decode(t2.prepared.promptIds.slice(held.length))).toBe(
        "\n<|im_start|>user\nAnd 97?<|im_end|>\n<|im_start|>assistant\n",
      );
      expect(buildConversationTraces(bridge.turns())).toHaveLength(1);
    },
  );

  it("an end-of-turn quoted in the reply's own text: the reply ends where its text does, nothing repeated", () => {
    const bridge = new TokenBridge(tok);
    const m1: ChatMessage[] = [sys, { role: "user", content: "What ends a turn?" }];
    const out = [...ids("Qwen writes "), ...quotedEot(), ...ids(" there."), EOT];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, out);
    expect(t1.message.content).toBe("Qwen writes <|im_end|> there.");
    const m2: ChatMessage[] = [...m1, t1.message, { role: "user", content: "Thanks" }];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("Welcome."), EOT]);
    expect(t2.prepared.verdict).toBe("extended");
    const held = [...t1.prepared.promptIds, ...out];
    expect(t2.prepared.promptIds.slice(0, held.length)).toEqual(held);
    expect(tok.decode(t2.prepared.promptIds.slice(held.length))).toBe(
      "\n<|im_start|>user\nThanks<|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("a render the reply cannot be found in (no end-of-turn after it) starts a new chain from the template's render", () => {
    // A bridge told the turn ends with <|endoftext|>, which Qwen3's template never writes.
    const bridge = new TokenBridge(tok, { endOfTurnToken: "<|endoftext|>" });
    const eos = tok.tokenId("<|endoftext|>")!;
    const m1: ChatMessage[] = [sys, { role: "user", content: "Is 91 prime?" }];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, [...ids("No."), eos]);
    const m2: ChatMessage[] = [...m1, t1.message, { role: "user", content: "And 97?" }];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("Prime."), eos]);
    expect(t2.prepared).toMatchObject({
      verdict: "template_mismatch",
      reason: `the new render cannot be aligned with ${t1.committed.turn_id}'s reply: started a new chain`,
      parentTurnId: null,
      bridgedCount: 0,
    });
    expect(t2.prepared.promptIds).toEqual(tok.encode(tok.render(m2)));
    expect(buildConversationTraces(bridge.turns())).toHaveLength(2);
  });
});

describe("compaction", () => {
  it("a harness that summarises its history starts a new chain with verdict compacted", () => {
    const bridge = new TokenBridge(tok, { harness: "terminus" });
    let messages: ChatMessage[] = [sys, { role: "user", content: "Write a long story about a lake." }];
    for (let k = 0; k < 3; k++) {
      const t = scriptedTurn(tok, bridge, { messages }, [
        ...ids(`Chapter ${k + 1}: the lake was calm and deep.`),
        EOT,
      ]);
      expect(t.prepared.verdict).toBe(k === 0 ? "new_chain" : "extended");
      messages = [...messages, t.message, { role: "user", content: "Continue." }];
    }
    const compacted: ChatMessage[] = [
      sys,
      { role: "user", content: "Summary: 3 chapters about a calm lake. Continue." },
    ];
    const t4 = scriptedTurn(tok, bridge, { messages: compacted }, [...ids("Chapter 4."), EOT]);
    expect(t4.prepared.verdict).toBe("compacted");
    expect(t4.prepared.parentTurnId).toBeNull();
    expect(t4.prepared.promptIds).toEqual(tok.encode(tok.render(compacted)));
    // ... and the conversation continues from the compacted chain.
    const t5 = scriptedTurn(
      tok,
      bridge,
      { messages: [...compacted, t4.message, { role: "user", content: "More." }] },
      [...ids("Chapter 5."), EOT],
    );
    expect(t5.prepared.verdict).toBe("extended");
    expect(t5.prepared.parentTurnId).toBe(t4.committed.turn_id);
    const traces = buildConversationTraces(bridge.turns());
    expect(traces).toHaveLength(2);
    expect((traces[1]!.metadata.turns as Array<{ verdict: string }>).map((t) => t.verdict)).toEqual([
      "compacted",
      "extended",
    ]);
  });
});
