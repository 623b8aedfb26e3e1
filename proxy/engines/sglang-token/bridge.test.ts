import { beforeAll, describe, expect, it } from "vitest";
import { BridgeError, normalizeMessages, TokenBridge, VerdictTally } from "../../../tokenizer/bridge";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../../../tokenizer/chat-tokenizer";
import { pythonJsonDumps } from "../../../tokenizer/parsers/json-text";
import { buildConversationTraces } from "../../builders/conversation";
import { scriptedTurn } from "./testing";

let tok: ChatTokenizer;
let EOT: number;
beforeAll(async () => {
  tok = await loadChatTokenizer();
  EOT = tok.tokenId("<|im_end|>")!;
}, 30_000);

const ids = (t: string) => tok.encode(t);
const sys: ChatMessage = { role: "system", content: "Be brief." };
const u = (content: string): ChatMessage => ({ role: "user", content });
const a = (content: string): ChatMessage => ({ role: "assistant", content });

describe("normalizeMessages", () => {
  const key = (ms: ChatMessage[]) => normalizeMessages(ms).map((m) => m.key);

  it("equates what harnesses change without changing what was said", () => {
    const ours: ChatMessage[] = [
      {
        role: "assistant",
        content: null,
        reasoning_content: "hm",
        tool_calls: [
          { id: "call_1", type: "function", function: { name: "f", arguments: '{"b": 1, "a": [1, 2]}' } },
        ],
      },
      { role: "tool", tool_call_id: "call_1", content: "ok" },
    ];
    const theirs: ChatMessage[] = [
      {
        role: "assistant",
        content: "",
        tool_calls: [{ function: { name: "f", arguments: '{"a":[1,2],"b":1}' } }],
      },
      { role: "tool", tool_call_id: "toolu_9", content: [{ type: "text", text: "ok" }] },
    ];
    expect(key(theirs)).toEqual(key(ours));
    const split: ChatMessage[] = [
      { role: "assistant", content: "Looking. " },
      { role: "assistant", content: null, tool_calls: [{ function: { name: "f", arguments: {} } }] },
    ];
    const joined: ChatMessage[] = [
      { role: "assistant", content: "Looking.", tool_calls: [{ function: { name: "f", arguments: "" } }] },
    ];
    expect(key(split)).toEqual(key(joined));
    expect(normalizeMessages(split).map((m) => m.rawEnd)).toEqual([1]);
  });

  it("equates an assistant text that only repeats its own reasoning with no text (Copilot's echo)", () => {
    const call = { id: "c1", type: "function", function: { name: "bash", arguments: '{"command": "ls"}' } };
    const ours: ChatMessage[] = [
      { role: "assistant", content: null, reasoning_content: "Look first.\n", tool_calls: [call] },
    ];
    const echoed: ChatMessage[] = [
      { role: "assistant", content: "Look first.\n", reasoning_content: "Look first.\n", tool_calls: [call] },
    ];
    expect(key(echoed)).toEqual(key(ours));
    // Text that differs from the reasoning is an answer of its own.
    expect(key([{ ...echoed[0]!, content: "Something else." }])).not.toEqual(key(ours));
    expect(key([{ ...echoed[0]!, reasoning_content: "" }])).not.toEqual(key(ours));
  });

  it("tells apart changed text, arguments, roles and images", () => {
    expect(key([u("a")])).not.toEqual(key([u("b")]));
    expect(key([u(" a")])).not.toEqual(key([u("a")]));
    expect(
      key([{ role: "assistant", tool_calls: [{ function: { name: "f", arguments: '{"a": 1}' } }] }]),
    ).not.toEqual(
      key([{ role: "assistant", tool_calls: [{ function: { name: "f", arguments: '{"a": 2}' } }] }]),
    );
    expect(key([a("x")])).not.toEqual(key([u("x")]));
    const img = (url: string): ChatMessage => ({
      role: "user",
      content: [{ type: "image_url", image_url: { url } }],
    });
    expect(key([img("data:1")])).not.toEqual(key([img("data:2")]));
  });
  it("drops tool-call arguments at their schema default only when the request's tools declare it", () => {
    const tools = sglangToolDumps([
      {
        type: "function",
        function: {
          name: "Edit",
          parameters: {
            type: "object",
            properties: { p: { type: "string" }, all: { type: "boolean", default: false } },
          },
        },
      },
    ]);
    const msg = (args: string): ChatMessage[] => [
      { role: "assistant", tool_calls: [{ function: { name: "Edit", arguments: args } }] },
    ];
    const k = (m: ChatMessage[], t?: unknown[]) => normalizeMessages(m, t).map((n) => n.key);
    expect(k(msg('{"all":false,"p":"x"}'), tools)).toEqual(k(msg('{"p": "x"}'), tools));
    expect(k(msg('{"all":true,"p":"x"}'), tools)).not.toEqual(k(msg('{"p": "x"}'), tools));
    expect(k(msg('{"all":false,"p":"x"}'))).not.toEqual(k(msg('{"p": "x"}')));
  });
});

describe("TokenBridge", () => {
  it("detects <|im_end|> as the end-of-turn token and refuses an unknown one", () => {
    expect(new TokenBridge(tok).endOfTurnId).toBe(EOT);
    expect(() => new TokenBridge(tok, { endOfTurnToken: "<|nope|>" })).toThrow(BridgeError);
  });

  it("appends the end-of-turn token (mask 0) when the sampler stopped before it (length)", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Count")];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, ids("1 2 3 4"));
    expect(t1.committed.finish_reason).toBe("length");
    const t2 = scriptedTurn(tok, bridge, { messages: [...m1, t1.message, u("go on")] }, [...ids("5"), EOT]);
    expect(t2.prepared.verdict).toBe("extended");
    const start = t1.prepared.promptIds.length + t1.outputIds.length;
    expect(t2.prepared.promptIds.slice(start, start + 2)).toEqual([EOT, 198]);
    expect(t2.prepared.bridgedCount).toBe(t2.prepared.promptIds.length - start);
  });

  it("gives a retried request the same prompt and place; the builder keeps the retry, not the answer it replaced", async () => {
    const { buildConversationTraces } = await import("../../builders/conversation");
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Pick a number")];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, [...ids("7"), EOT]);
    const m2 = [...m1, t1.message, u("Another")];
    const t2 = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("8"), EOT]);
    const t2b = scriptedTurn(tok, bridge, { messages: m2 }, [...ids("9"), EOT]);
    expect(t2b.prepared.promptIds).toEqual(t2.prepared.promptIds);
    expect(t2b.prepared.parentTurnId).toBe(t1.committed.turn_id);
    const root = scriptedTurn(tok, bridge, { messages: m1 }, [...ids("3"), EOT]);
    expect(root.prepared.promptIds).toEqual(t1.prepared.promptIds);
    expect([root.prepared.parentTurnId, root.prepared.verdict]).toEqual([null, "new_chain"]);
    const traces = buildConversationTraces(bridge.turns());
    // t2 was replaced by its retry t2b: t1 + t2b is one trace; the root asked again after t1 went
    // on is a chain of its own (t1, the answer it repeats, had been continued, so it is kept too).
    expect(traces).toHaveLength(2);
    const last = (t: (typeof traces)[number]) =>
      (t.metadata.turns as Array<{ turn_id: string }>).at(-1)!.turn_id;
    expect(traces.map(last)).toEqual([t2b.committed.turn_id, root.committed.turn_id]);
    expect(traces.map((t) => t.loss_mask.filter((m) => m === 1).length)).toEqual([4, 2]);
  });

  it("classifies a sub-agent as new_chain, an edited history as history_rewritten", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Plan the trip")];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, [...ids("Day 1: lake."), EOT]);
    const sub = scriptedTurn(
      tok,
      bridge,
      { messages: [{ role: "system", content: "You are a sub-agent." }, u("Find a lake")] },
      [...ids("Lake Ohrid."), EOT],
    );
    expect(sub.prepared.verdict).toBe("new_chain");
    const edited = [sys, u("Plan the trip, please"), t1.message, u("more")];
    const t3 = scriptedTurn(tok, bridge, { messages: edited }, [...ids("ok"), EOT]);
    expect(t3.prepared.verdict).toBe("history_rewritten");
    expect(t3.prepared.reason).toMatch(/message 1 differs/);
    const changedAnswer = [...m1, a("Day 1: mountains."), u("more")];
    expect(scriptedTurn(tok, bridge, { messages: changedAnswer }, [EOT]).prepared.verdict).toBe(
      "history_rewritten",
    );
  });

  it("treats changed tools or template kwargs as a rewritten history", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("hi")];
    const t1 = scriptedTurn(tok, bridge, { messages: m1 }, [...ids("hello"), EOT]);
    const t2 = scriptedTurn(
      tok,
      bridge,
      { messages: [...m1, t1.message, u("x")], templateKwargs: { enable_thinking: false } },
      [...ids("y"), EOT],
    );
    expect([t2.prepared.verdict, t2.prepared.reason]).toEqual([
      "history_rewritten",
      "tools or template kwargs changed since t0",
    ]);
    // Under the new kwargs the conversation extends again (the generation prompt carries the empty think).
    const t3 = scriptedTurn(
      tok,
      bridge,
      {
        messages: [...m1, t1.message, u("x"), t2.message, u("z")],
        templateKwargs: { enable_thinking: false },
      },
      [...ids("w"), EOT],
    );
    expect(t3.prepared.parentTurnId).toBe(t2.committed.turn_id);
    expect(tok.decode(t2.prepared.promptIds.slice(-6))).toContain("<think>\n\n</think>\n\n");
  });

  it("counts verdicts per session and per (harness, model)", () => {
    const tally = new VerdictTally();
    for (const harness of ["codex", "codex", "claude"]) {
      const bridge = new TokenBridge(tok, { harness, model: "Qwen3-8B", tally });
      const t1 = scriptedTurn(tok, bridge, { messages: [sys, u("a")] }, [...ids("b"), EOT]);
      scriptedTurn(tok, bridge, { messages: [sys, u("a"), t1.message, u("c")] }, [...ids("d"), EOT]);
      expect(bridge.verdictCounts()).toMatchObject({ new_chain: 1, extended: 1 });
    }
    expect(tally.counts("codex", "Qwen3-8B")).toMatchObject({ new_chain: 2, extended: 2, compacted: 0 });
    expect(tally.snapshot().map((r) => [r.harness, r.counts.extended])).toEqual([
      ["codex", 2],
      ["claude", 1],
    ]);
  });

  it("refuses misaligned logprobs, a double commit and a turn of another session", () => {
    const bridge = new TokenBridge(tok);
    const p = bridge.prepare({ messages: [u("x")] });
    const message: ChatMessage = { role: "assistant", content: "y" };
    expect(() =>
      bridge.commit(p, {
        sampledIds: [1, 2],
        logprobs: [0],
        assistantMessage: message,
        finishReason: "stop",
      }),
    ).toThrow(/align/);
    bridge.commit(p, { sampledIds: [1], logprobs: [-1], assistantMessage: message, finishReason: "stop" });
    expect(() =>
      bridge.commit(p, { sampledIds: [1], logprobs: [-1], assistantMessage: message, finishReason: "stop" }),
    ).toThrow(/already committed/);
    expect(() =>
      new TokenBridge(tok).commit(p, {
        sampledIds: [],
        logprobs: [],
        assistantMessage: message,
        finishReason: "stop",
      }),
    ).toThrow(/another session/);
  });
});

describe("tool-call arguments filled in with their schema default (Claude Code's Edit)", () => {
  /** Claude Code 2.1's `Edit` tool as the proxy's Anthropic family hands it on (recorded request). */
  const editTool = (withDefault: boolean): ToolDefinition => ({
    type: "function",
    function: {
      name: "Edit",
      description: "Performs exact string replacements in files.",
      parameters: {
        type: "object",
        properties: {
          file_path: { type: "string" },
          old_string: { type: "string" },
          new_string: { type: "string" },
          replace_all: { type: "boolean", ...(withDefault ? { default: false } : {}) },
        },
        required: ["file_path", "old_string", "new_string"],
        additionalProperties: false,
      },
    },
  });
  const args = { file_path: "/w/calc.js", old_string: "a + b", new_string: "a - b" };
  /** The model's sampled call: Qwen3 `<tool_call>` JSON (the template's spacing) without `replace_all`. */
  const sampledEdit = () => [
    ...ids(`<tool_call>\n{"name": "Edit", "arguments": ${pythonJsonDumps(args)}}\n</tool_call>`),
    EOT,
  ];

  /** Turn 1 calls Edit; turn 2 sends it back as Claude Code does, with `replace_all` added. */
  function run(withDefault: boolean, replaceAll: unknown) {
    const toolDefs = [editTool(withDefault)];
    const request = { tools: sglangToolDumps(toolDefs), toolDefs };
    const bridge = new TokenBridge(tok, { harness: "claude_code" });
    const m1 = [sys, u("Fix subtract in calc.js")];
    const t1 = scriptedTurn(tok, bridge, { ...request, messages: m1 }, sampledEdit());
    const returned = t1.message.tool_calls![0]!;
    expect(JSON.parse(returned.function.arguments as string)).toEqual(args);
    // Claude Code's echo: `replace_all` first, compact JSON, its own call id.
    const echoed: ChatMessage = {
      role: "assistant",
      content: "",
      tool_calls: [
        {
          id: "toolu_01",
          type: "function",
          function: { name: "Edit", arguments: JSON.stringify({ replace_all: replaceAll, ...args }) },
        },
      ],
    };
    const m2 = [...m1, echoed, { role: "tool", tool_call_id: "toolu_01", content: "edited" } as ChatMessage];
    const t2 = scriptedTurn(tok, bridge, { ...request, messages: m2 }, [...ids("Done."), EOT]);
    return { t1, t2, traces: buildConversationTraces(bridge.turns()) };
  }

  it("an echo with a defaulted extra argument is extended and stays one chain", () => {
    const { t1, t2, traces } = run(true, false);
    expect([t2.prepared.verdict, t2.prepared.parentTurnId]).toEqual(["extended", t1.committed.turn_id]);
    // The prompt carries the sampled call's ids, not the echo's: `replace_all` never reaches the tokens.
    expect(t2.prepared.promptIds.slice(0, t1.prepared.promptIds.length + t1.outputIds.length)).toEqual([
      ...t1.prepared.promptIds,
      ...t1.outputIds,
    ]);
    expect(tok.decode(t2.prepared.promptIds)).not.toContain('replace_all": false');
    expect(traces).toHaveLength(1);
    expect([...traces[0]!.prompt_ids, ...traces[0]!.response_ids]).toEqual([
      ...t2.prepared.promptIds,
      ...t2.outputIds,
    ]);
  });

  it("an echo with a non-default extra value is not an extension", () => {
    const { t2, traces } = run(true, true);
    expect([t2.prepared.verdict, t2.prepared.parentTurnId]).toEqual(["history_rewritten", null]);
    expect(t2.prepared.reason).toMatch(/message 2 differs/);
    expect(traces).toHaveLength(2);
  });

  it("only a schema-declared default counts: `false` for a parameter without one is a change", () => {
    const { t2, traces } = run(false, false);
    expect([t2.prepared.verdict, t2.prepared.parentTurnId]).toEqual(["history_rewritten", null]);
    expect(traces).toHaveLength(2);
  });
});
