import { beforeAll, describe, expect, it } from "vitest";
import { type ChatMessage, type ChatTokenizer, loadChatTokenizer } from "../chat-tokenizer";
import { scriptedTurn } from "../testing";
import { BridgeError, normalizeMessages, TokenBridge, VerdictTally } from "./index";

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

  it("gives a retried request the same prompt and place; the builder trains shared turns once", async () => {
    const { buildConversationTraces } = await import("../conversation-builder");
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
    expect(traces).toHaveLength(3);
    const trained = traces.map((t) => t.loss_mask.filter((m) => m === 1).length);
    // t1 (2 ids) + t2 (2) in the first trace, only t2b (2) in the second, the retried root (2).
    expect(trained).toEqual([4, 2, 2]);
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
