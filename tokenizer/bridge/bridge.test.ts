/**
 * The token bridge's decisions one by one, each test failing when one decision is inverted or
 * removed (checked by hand-made mutants of `bridge.ts`): which earlier turn a request extends,
 * where the parent's reply ends in the new render, when it cannot be aligned, the verdicts and
 * reasons of a break, and what a committed turn records. Real Qwen3 tokenizer and template; a few
 * tests wrap its `render` to stand for a template with another behaviour.
 */
import { beforeAll, describe, expect, it } from "vitest";
import {
  type ChatMessage,
  type ChatTokenizer,
  loadChatTokenizer,
  type RenderOptions,
  sglangToolDumps,
} from "../chat-tokenizer";
import { BridgeError, type BridgeRequest, type PreparedTurn, TokenBridge, type TurnOutcome } from "./bridge";
import { VerdictTally } from "./verdicts";

let tok: ChatTokenizer;
let EOT: number;
let PAD: number;
beforeAll(async () => {
  tok = await loadChatTokenizer();
  EOT = tok.tokenId("<|im_end|>")!;
  PAD = tok.tokenId("<|image_pad|>")!;
}, 30_000);

const ids = (text: string) => tok.encode(text);
const sys: ChatMessage = { role: "system", content: "Be brief." };
const u = (content: string): ChatMessage => ({ role: "user", content });
const a = (content: string, extra: Partial<ChatMessage> = {}): ChatMessage => ({
  role: "assistant",
  content,
  ...extra,
});
/** `<|im_end|>` written as text: plain tokens, not the special id. */
const quotedEot = () => [...ids("<|im_"), ...ids("end|>")];

/**
 * Prepares `request` and commits `sampled` as the engine's reply: text (the end-of-turn id is
 * appended; the harness gets the text back) or ids; `extra` overrides the outcome.
 */
function turn(
  bridge: TokenBridge,
  request: BridgeRequest,
  sampled: string | number[],
  extra: Partial<TurnOutcome> = {},
) {
  const sampledIds = typeof sampled === "string" ? [...ids(sampled), EOT] : sampled;
  const prepared = bridge.prepare(request);
  const committed = bridge.commit(prepared, {
    sampledIds,
    logprobs: sampledIds.map(() => -0.5),
    assistantMessage: a(typeof sampled === "string" ? sampled : tok.decode(sampledIds.slice(0, -1))),
    finishReason: "stop",
    ...extra,
  });
  return { prepared, committed, message: committed.assistant_message };
}

/** One `bash` tool, as the template gets it. */
const bashTools = () =>
  sglangToolDumps([
    {
      type: "function",
      function: { name: "bash", parameters: { type: "object", properties: { cmd: { type: "string" } } } },
    },
  ]);

/** The text of the ids a prepared turn adds after its parent's prompt and sampled ids. */
const bridgedText = (p: PreparedTurn) => tok.decode(p.promptIds.slice(p.promptIds.length - p.bridgedCount));

/** The tokenizer with another `render` (a template that behaves otherwise). */
function withRender(
  render: (messages: ReadonlyArray<ChatMessage | Record<string, unknown>>, options?: RenderOptions) => string,
): ChatTokenizer {
  return { ...tok, render };
}

/** The tokenizer counting its renders. */
function counting(): { tok: ChatTokenizer; renders: () => number } {
  let n = 0;
  return {
    tok: withRender((messages, options) => {
      n++;
      return tok.render(messages, options);
    }),
    renders: () => n,
  };
}

describe("TokenBridge options", () => {
  it("refuses an endOfTurnToken or imagePadToken that is not a token, naming it", () => {
    expect(() => new TokenBridge(tok, { endOfTurnToken: "<|nope|>" })).toThrow(
      new BridgeError("endOfTurnToken: <|nope|> is not a token"),
    );
    expect(() => new TokenBridge(tok, { imagePadToken: "<|nope|>" })).toThrow(
      new BridgeError("imagePadToken: <|nope|> is not a token"),
    );
    expect(() => new TokenBridge(tok, { imagePadToken: "<|nope|>" })).toThrow(
      expect.objectContaining({ name: "BridgeError" }),
    );
  });

  it("detects the end-of-turn as the end-of-sequence id the template writes after a reply, not the first one listed", () => {
    const eos = tok.tokenId("<|endoftext|>")!;
    expect(new TokenBridge({ ...tok, eosTokenIds: [eos, EOT] }).endOfTurnId).toBe(EOT);
    // A template that writes none of them: the bridge cannot tell, and says what it saw.
    const plain = {
      ...withRender((m, o) => tok.render(m, o).replaceAll("<|im_end|>", "</s>")),
      name: "plain",
    };
    expect(() => new TokenBridge(plain)).toThrow(
      new BridgeError(
        'cannot tell the end-of-turn token of plain: the template writes "</s>\\n" after an assistant message',
      ),
    );
  });

  it("checks the engine's expansion of a custom imagePadToken, and only of that token", () => {
    const video = tok.tokenId("<|video_pad|>")!;
    const run = (options: { imagePadToken?: string }) => {
      const bridge = new TokenBridge(tok, options);
      const prepared = bridge.prepare({ messages: [u("Watch <|video_pad|>")] });
      const engine = prepared.promptIds.flatMap((id) => (id === video ? [video, video, video] : [id]));
      return turn(bridge, { messages: [u("Watch <|video_pad|>")] }, "Ok.", {
        enginePromptIds: engine,
        imageCount: 1,
      }).committed;
    };
    const custom = run({ imagePadToken: "<|video_pad|>" });
    expect(custom.flags).toEqual([]);
    expect(custom.prompt_ids.filter((id) => id === video)).toHaveLength(3);
    // With the default pad (<|image_pad|>) the same engine ids are no expansion of what was sent.
    const byDefault = run({});
    expect(byDefault.flags).toEqual(["image_prompt_unverified"]);
    expect(byDefault.prompt_ids.filter((id) => id === video)).toHaveLength(1);
  });

  it("tallies under harness 'unknown' and the tokenizer's name when neither is given; its counts are copies", () => {
    const tally = new VerdictTally();
    const bridge = new TokenBridge(tok, { tally });
    turn(bridge, { messages: [u("hi")] }, "hello");
    expect(tally.snapshot().map((r) => [r.harness, r.model, r.counts.new_chain])).toEqual([
      ["unknown", tok.name, 1],
    ]);
    bridge.verdictCounts().new_chain = 9;
    bridge.flagCounts().reasoning_dropped = 9;
    expect(bridge.verdictCounts().new_chain).toBe(1);
    expect(bridge.flagCounts().reasoning_dropped).toBe(0);
  });
});

describe("which earlier turn a request extends", () => {
  it("of several samples of one request with the same reply text, the last committed (its ids, not the others')", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("What do you do on weekends?")];
    // Three samples decoding to "I go fishing", each split into other ids.
    const samples = [
      [...ids("I go"), 7640, 287, EOT],
      [...ids("I go fishing"), EOT],
      [...ids("I go f"), ...ids("ishing"), EOT],
    ];
    const turns = samples.map((s) => turn(bridge, { messages: m1 }, s));
    expect(new Set(turns.map((t) => t.message.content))).toEqual(new Set(["I go fishing"]));
    const next = bridge.prepare({ messages: [...m1, a("I go fishing"), u("Where?")] });
    expect([next.verdict, next.parentTurnId]).toEqual(["extended", turns[2]!.committed.turn_id]);
    expect(next.promptIds.slice(0, turns[2]!.prepared.promptIds.length + samples[2]!.length)).toEqual([
      ...turns[2]!.prepared.promptIds,
      ...samples[2]!,
    ]);
  });

  it("only a turn committed under the same tools and template kwargs, though a later one under others has the same history (itself no retry of the first)", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("hi")];
    const noThinking = { enable_thinking: false };
    const t0 = turn(bridge, { messages: m1 }, "hello");
    const t1 = turn(bridge, { messages: m1, templateKwargs: noThinking }, "hello");
    // Not a retry of t0: rendered under its own kwargs.
    expect(t1.prepared.promptIds).toEqual(ids(tok.render(m1, { templateKwargs: noThinking })));
    expect(t1.prepared.promptIds).not.toEqual(t0.prepared.promptIds);
    const m2 = [...m1, a("hello"), u("x")];
    const plain = bridge.prepare({ messages: m2 });
    expect([plain.verdict, plain.parentTurnId]).toEqual(["extended", t0.committed.turn_id]);
    const kw = bridge.prepare({ messages: m2, templateKwargs: noThinking });
    expect(kw.parentTurnId).toBe(t1.committed.turn_id);
  });

  it("a turn whose whole history is one message (an empty request, then the reply) is extended", () => {
    const bridge = new TokenBridge(tok);
    const t0 = turn(bridge, { messages: [] }, "Hi");
    const next = bridge.prepare({ messages: [a("Hi"), u("x")] });
    expect([next.verdict, next.parentTurnId]).toEqual(["extended", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe("\n<|im_start|>user\nx<|im_end|>\n<|im_start|>assistant\n");
  });

  it("reasoning_dropped compares only the parent's reply, not the reasoning of earlier replies in the history", () => {
    const bridge = new TokenBridge(tok);
    const reply = (r: string, text: string) => a(text, { reasoning_content: r });
    const think = (r: string, text: string) => [...ids(`<think>\n${r}\n</think>\n\n${text}`), EOT];
    const m1 = [sys, u("Is 91 prime?")];
    turn(bridge, { messages: m1 }, think("7 * 13", "No."), { assistantMessage: reply("7 * 13", "No.") });
    // Every reply sent back whole, reasoning included.
    const m2 = [...m1, reply("7 * 13", "No."), u("And 97?")];
    const t2 = turn(bridge, { messages: m2 }, think("no factor", "Yes."), {
      assistantMessage: reply("no factor", "Yes."),
    });
    const t3 = turn(bridge, { messages: [...m2, reply("no factor", "Yes."), u("Thanks")] }, "Welcome.");
    expect(t3.prepared.parentTurnId).toBe(t2.committed.turn_id);
    expect([t2.committed.flags, t3.committed.flags]).toEqual([[], []]);
  });
});

describe("a render that cannot be aligned with the parent's reply", () => {
  it("starts a new chain that keeps the turn's flags, and the next turn names it as the one it cannot align with", () => {
    // A bridge told the turn ends with <|endoftext|>, which Qwen3's template never writes.
    const tally = new VerdictTally();
    const bridge = new TokenBridge(tok, { endOfTurnToken: "<|endoftext|>", harness: "h", tally });
    const eos = tok.tokenId("<|endoftext|>")!;
    const m1 = [sys, u("Is 91 prime?")];
    const t0 = turn(bridge, { messages: m1 }, [...ids("No."), eos], {
      assistantMessage: a("No.", { reasoning_content: "7 * 13" }),
    });
    // Sent back without its reasoning.
    const m2 = [...m1, a("No."), u("And 97?")];
    const t1 = turn(bridge, { messages: m2 }, [...ids("Prime."), eos], { assistantMessage: a("Prime.") });
    expect(t1.prepared).toMatchObject({
      verdict: "template_mismatch",
      reason: `the new render cannot be aligned with ${t0.committed.turn_id}'s reply: started a new chain`,
      parentTurnId: null,
      flags: ["reasoning_dropped"],
    });
    expect(bridge.flagCounts().reasoning_dropped).toBe(1);
    expect(tally.snapshot()).toEqual([
      {
        harness: "h",
        model: tok.name,
        counts: { extended: 0, template_mismatch: 1, new_chain: 1, compacted: 0, history_rewritten: 0 },
        flags: { reasoning_dropped: 1, image_prompt_unverified: 0 },
      },
    ]);
    const m3 = [...m2, a("Prime."), u("Thanks")];
    const t2 = bridge.prepare({ messages: m3 });
    expect(t2.reason).toBe(
      `the new render cannot be aligned with ${t1.committed.turn_id}'s reply: started a new chain`,
    );
    expect(t2.promptIds).toEqual(ids(tok.render(m3)));
  });

  it("a quoted end-of-turn, and no place of the reply followed by what the fresh messages render (a template stamping the prompt's length): a new chain", () => {
    const stamped = withRender((m, o) => {
      const r = tok.render(m, o);
      return o?.addGenerationPrompt === false ? r : `${r}(${r.length})`;
    });
    const bridge = new TokenBridge(stamped);
    const m1 = [sys, u("What ends a turn?")];
    const out = [...ids("Qwen writes "), ...quotedEot(), ...ids(" there."), EOT];
    const t0 = turn(bridge, { messages: m1 }, out);
    expect(t0.message.content).toBe("Qwen writes <|im_end|> there.");
    const m2 = [...m1, t0.message, u("Thanks")];
    const t1 = bridge.prepare({ messages: m2 });
    expect(t1).toMatchObject({
      verdict: "template_mismatch",
      reason: `the new render cannot be aligned with ${t0.committed.turn_id}'s reply: started a new chain`,
      parentTurnId: null,
      bridgedCount: 0,
    });
    expect(t1.promptIds).toEqual(ids(stamped.render(m2)));
  });
});

describe("where the parent's reply ends in the new render", () => {
  const FRESH = "\n<|im_start|>user\nAnd 97?<|im_end|>\n<|im_start|>assistant\n";

  it("a reply rendered as sampled: one render, the new messages bridged", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const m1 = [sys, u("Is 91 prime?")];
    const t0 = turn(bridge, { messages: m1 }, "No.");
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, t0.message, u("And 97?")] });
    expect(renders() - before).toBe(1);
    expect([next.verdict, bridgedText(next)]).toEqual(["extended", FRESH]);
  });

  it("a reply quoting the end-of-turn, rendered as sampled: it ends where its text does, one render", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const m1 = [sys, u("What ends a turn?")];
    const out = [...ids("Qwen writes "), ...quotedEot(), ...ids(" there."), EOT];
    const t0 = turn(bridge, { messages: m1 }, out);
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, t0.message, u("And 97?")] });
    expect(renders() - before).toBe(1);
    expect([next.verdict, next.parentTurnId, bridgedText(next)]).toEqual([
      "extended",
      t0.committed.turn_id,
      FRESH,
    ]);
  });

  it("a reply whose <think> the template drops (history intact): the first end-of-turn after the old prompt, one render", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const m1 = [sys, u("Is 91 prime?")];
    const message = a("No.", { reasoning_content: "7 * 13" });
    const t0 = turn(bridge, { messages: m1 }, [...ids("<think>\n7 * 13\n</think>\n\nNo."), EOT], {
      assistantMessage: message,
    });
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, message, u("And 97?")] });
    expect(renders() - before).toBe(1);
    expect(next).toMatchObject({
      verdict: "template_mismatch",
      reason: `the template renders ${t0.committed.turn_id}'s reply differently from the sampled text (e.g. drops its <think> block)`,
      parentTurnId: t0.committed.turn_id,
    });
    expect(bridgedText(next)).toBe(FRESH);
  });

  it("history intact, an earlier message quoting the end-of-turn: still one render (only the reply's own render can hide a quote there)", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const m1 = [sys, u("What does <|im_end|> do?")];
    const message = a("Ends a turn.", { reasoning_content: "Recall." });
    const t0 = turn(bridge, { messages: m1 }, [...ids("<think>\nRecall.\n</think>\n\nEnds a turn."), EOT], {
      assistantMessage: message,
    });
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, message, u("And 97?")] });
    expect(renders() - before).toBe(1);
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(FRESH);
  });

  it("history not intact (a new question drops an earlier <think>): the end-of-turn after as many as the old prompt held, one render", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const tools = bashTools();
    const m1 = [sys, u("Is 91 prime?")];
    const call = {
      id: "c1",
      type: "function",
      function: { name: "bash", arguments: '{"cmd": "factor 91"}' },
    };
    const t0 = turn(
      bridge,
      { messages: m1, tools },
      [
        ...ids(
          '<think>\nCheck.\n</think>\n\n<tool_call>\n{"name": "bash", "arguments": {"cmd": "factor 91"}}\n</tool_call>',
        ),
        EOT,
      ],
      { assistantMessage: a("", { reasoning_content: "Check.", tool_calls: [call] }) },
    );
    const m2 = [...m1, t0.message, { role: "tool", tool_call_id: "c1", content: "91: 7 13" }];
    const t1 = turn(bridge, { messages: m2, tools }, "No.");
    expect(t1.prepared.verdict).toBe("extended");
    const before = renders();
    const next = bridge.prepare({ messages: [...m2, t1.message, u("And 97?")], tools });
    expect(renders() - before).toBe(1);
    expect(next).toMatchObject({
      verdict: "template_mismatch",
      reason: `the template renders the history before ${t1.committed.turn_id}'s reply differently from the prompt the model saw`,
      parentTurnId: t1.committed.turn_id,
    });
    expect(bridgedText(next)).toBe(FRESH);
  });

  it("a reply cut off before its end-of-turn (length): extended, the end-of-turn id bridged first", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Count")];
    const out = ids("1 2 3");
    const t0 = turn(bridge, { messages: m1 }, out, { assistantMessage: a("1 2 3"), finishReason: "length" });
    const next = bridge.prepare({ messages: [...m1, t0.message, u("And 97?")] });
    expect(next.verdict).toBe("extended");
    expect(next.promptIds.slice(0, t0.prepared.promptIds.length + out.length + 1)).toEqual([
      ...t0.prepared.promptIds,
      ...out,
      EOT,
    ]);
    expect(bridgedText(next)).toBe(`<|im_end|>${FRESH}`);
  });

  it("a reply cut off inside a <think> the template drops: the end-of-turn id is still bridged first", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Count")];
    const out = ids("<think>\nLet me count");
    const message = a("", { reasoning_content: "Let me count" });
    const t0 = turn(bridge, { messages: m1 }, out, { assistantMessage: message, finishReason: "length" });
    const next = bridge.prepare({ messages: [...m1, message, u("And 97?")] });
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(next.promptIds.slice(0, t0.prepared.promptIds.length + out.length + 1)).toEqual([
      ...t0.prepared.promptIds,
      ...out,
      EOT,
    ]);
    expect(bridgedText(next)).toBe(`<|im_end|>${FRESH}`);
  });

  it("an end-of-turn quoted in earlier reasoning the template now drops (history not intact): found by a second render", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const tools = bashTools();
    // The harness sent a call whose reasoning quotes an end-of-turn: kept in t0's prompt (after
    // the last question), dropped once a new question follows. Counting would land one too far.
    const m1: ChatMessage[] = [
      sys,
      u("Is 91 prime?"),
      a("", {
        reasoning_content: "Quote: <|im_end|> then check.",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "bash", arguments: '{"cmd": "factor 91"}' } },
        ],
      }),
      { role: "tool", tool_call_id: "c1", content: "91: 7 13" },
    ];
    const t0 = turn(bridge, { messages: m1, tools }, "No.");
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, t0.message, u("And 97?")], tools });
    expect(renders() - before).toBe(2);
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(FRESH);
  });

  it("a reply quoting the end-of-turn whose <think> the template drops: found by a second render, not at the quote", () => {
    const { tok: counted, renders } = counting();
    const bridge = new TokenBridge(counted);
    const m1 = [sys, u("What ends a turn?")];
    const message = a("Qwen writes <|im_end|> there.", { reasoning_content: "Recall." });
    const out = [
      ...ids("<think>\nRecall.\n</think>\n\nQwen writes "),
      ...quotedEot(),
      ...ids(" there."),
      EOT,
    ];
    const t0 = turn(bridge, { messages: m1 }, out, { assistantMessage: message });
    const before = renders();
    const next = bridge.prepare({ messages: [...m1, message, u("And 97?")] });
    expect(renders() - before).toBe(2);
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(FRESH);
  });

  it("a tool call quoting the end-of-turn in its arguments, rendered otherwise than sampled: the call is not repeated after the reply", () => {
    const tools = bashTools();
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Print the end token.")];
    // Compact JSON as sampled; the template writes `{"name": "bash", ...}` with spaces.
    const out = [
      ...ids('<tool_call>\n{"name":"bash","arguments":{"cmd":"echo '),
      ...quotedEot(),
      ...ids('"}}\n</tool_call>'),
      EOT,
    ];
    const call = {
      id: "c1",
      type: "function",
      function: { name: "bash", arguments: '{"cmd":"echo <|im_end|>"}' },
    };
    const t0 = turn(bridge, { messages: m1, tools }, out, {
      assistantMessage: a("", { tool_calls: [call] }),
    });
    const m2 = [...m1, t0.message, { role: "tool", tool_call_id: "c1", content: "ok" }];
    const next = bridge.prepare({ messages: m2, tools });
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(
      "\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("a tool call whose sampled JSON escapes a quoted end-of-turn (\\u003c), returned written out: the call is not repeated after the reply", () => {
    const tools = bashTools();
    const bridge = new TokenBridge(tok);
    const m1 = [sys, u("Print the end token.")];
    // The sampled text holds one end-of-turn (its own); the returned call, re-serialised as the
    // proxy's parsers do, and the template's render write the quoted one out.
    const out = [
      ...ids('<tool_call>\n{"name":"bash","arguments":{"cmd":"echo \\u003c|im_end|>"}}\n</tool_call>'),
      EOT,
    ];
    expect(tok.decode(out).split("<|im_end|>")).toHaveLength(2);
    const call = {
      id: "c1",
      type: "function",
      function: { name: "bash", arguments: '{"cmd": "echo <|im_end|>"}' },
    };
    const t0 = turn(bridge, { messages: m1, tools }, out, {
      assistantMessage: a("", { tool_calls: [call] }),
    });
    const m2 = [...m1, t0.message, { role: "tool", tool_call_id: "c1", content: "ok" }];
    const next = bridge.prepare({ messages: m2, tools });
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(
      "\n<|im_start|>user\n<tool_response>\nok\n</tool_response><|im_end|>\n<|im_start|>assistant\n",
    );
  });

  it("a template that does not show the reply's text: the first end-of-turn after the old prompt, though the reply quotes one", () => {
    const blank = withRender((m, o) =>
      tok.render(
        m.map((x) => (x.role === "assistant" ? { ...x, content: "" } : x)),
        o,
      ),
    );
    const bridge = new TokenBridge(blank, { endOfTurnToken: "<|im_end|>" });
    const m1 = [sys, u("What ends a turn?")];
    const out = [...ids("Qwen writes "), ...quotedEot(), ...ids(" there."), EOT];
    const t0 = turn(bridge, { messages: m1 }, out);
    const next = bridge.prepare({ messages: [...m1, t0.message, u("And 97?")] });
    expect([next.verdict, next.parentTurnId]).toEqual(["template_mismatch", t0.committed.turn_id]);
    expect(bridgedText(next)).toBe(FRESH);
  });
});

describe("onTemplateMismatch: new_chain", () => {
  it("still extends a reply the template renders as sampled; a mismatch starts a new chain keeping the turn's flags", () => {
    const bridge = new TokenBridge(tok, { onTemplateMismatch: "new_chain" });
    const m1 = [sys, u("Hi")];
    const t0 = turn(bridge, { messages: m1 }, "Hello.");
    const m2 = [...m1, t0.message, u("Is 91 prime?")];
    const t1 = turn(bridge, { messages: m2 }, [...ids("<think>\n7 * 13\n</think>\n\nNo."), EOT], {
      assistantMessage: a("No.", { reasoning_content: "7 * 13" }),
    });
    expect([t1.prepared.verdict, t1.prepared.parentTurnId]).toEqual(["extended", t0.committed.turn_id]);
    // Sent back without its reasoning, which the template drops anyway.
    const m3 = [...m2, a("No."), u("And 97?")];
    const t2 = bridge.prepare({ messages: m3 });
    expect(t2).toMatchObject({
      verdict: "template_mismatch",
      parentTurnId: null,
      bridgedCount: 0,
      flags: ["reasoning_dropped"],
    });
    expect(t2.promptIds).toEqual(ids(tok.render(m3)));
  });
});

describe("what a committed turn records", () => {
  it("tools only when the request had some; the provenance given, null for each field not given; no sent ids when they ran as sent", () => {
    const bridge = new TokenBridge(tok);
    const tools = sglangToolDumps([
      { type: "function", function: { name: "f", parameters: { type: "object" } } },
    ]);
    expect(turn(bridge, { messages: [u("a")] }, "b").committed.tools).toBeNull();
    expect(turn(bridge, { messages: [u("c")], tools: [] }, "d").committed.tools).toBeNull();
    expect(turn(bridge, { messages: [u("e")], tools }, "f").committed.tools).toEqual(tools);
    const provenance = {
      completion_id: "cmp_1",
      rid: "rid-1",
      policy_version: "p2",
      weight_version_start: "w1",
      weight_version: "w2",
      replica: "r0",
      cached_tokens: 7,
    };
    const given = turn(bridge, { messages: [u("g")] }, "h", { provenance }).committed;
    expect(given.provenance).toEqual(provenance);
    const none = turn(bridge, { messages: [u("i")] }, "j").committed;
    expect(none.provenance).toEqual({
      completion_id: null,
      rid: null,
      policy_version: null,
      weight_version_start: null,
      weight_version: null,
      replica: null,
      cached_tokens: null,
    });
    expect([none.sent_prompt_ids, none.flags]).toEqual([null, []]);
  });

  it("a text turn: engine ids equal to the sent ones are not flagged; other ones are flagged and the sent ids recorded", () => {
    const bridge = new TokenBridge(tok);
    const p0 = bridge.prepare({ messages: [u("a")] });
    const same = turn(bridge, { messages: [u("a")] }, "b", { enginePromptIds: p0.promptIds }).committed;
    expect([same.flags, same.sent_prompt_ids]).toEqual([[], null]);
    const other = turn(bridge, { messages: [u("c")] }, "d", { enginePromptIds: [...p0.promptIds, 1] });
    expect(other.committed.flags).toEqual(["image_prompt_unverified"]);
    expect(other.committed.prompt_ids).toEqual(other.prepared.promptIds);
  });

  it("refuses logprobs not aligned with the sampled ids, a turn of another session and a second commit, saying which", () => {
    const bridge = new TokenBridge(tok);
    const p = bridge.prepare({ messages: [u("a")] });
    const outcome = (logprobs: number[]): TurnOutcome => ({
      sampledIds: [1, 2],
      logprobs,
      assistantMessage: a("b"),
      finishReason: "stop",
    });
    expect(() => bridge.commit(p, outcome([-1]))).toThrow(
      new BridgeError("logprobs (1) must align with sampled ids (2)"),
    );
    expect(() => new TokenBridge(tok).commit(p, outcome([-1, -2]))).toThrow(
      new BridgeError("prepared turn belongs to another session"),
    );
    expect(bridge.commit(p, outcome([-1, -2])).sampled_logprobs).toEqual([-1, -2]);
    expect(() => bridge.commit(p, outcome([-1, -2]))).toThrow(
      new BridgeError(`turn ${p.turnId} is already committed`),
    );
    expect(bridge.turns().map((t) => [t.turn_id, t.sampled_ids, t.sampled_logprobs])).toEqual([
      [p.turnId, [1, 2], [-1, -2]],
    ]);
  });
});

describe("the recorded prompt of image turns (pads written in the text)", () => {
  const ask = u("Look: <|image_pad|>");
  const expand = (sent: readonly number[], run: number) =>
    sent.flatMap((id) => (id === PAD ? Array<number>(run).fill(PAD) : [id]));

  it("a retry of a chain start sends the first try's ids (not the engine's expansion), with its verdict and reason, without a try's image flag", () => {
    const bridge = new TokenBridge(tok);
    const p0 = bridge.prepare({ messages: [ask] });
    turn(bridge, { messages: [ask] }, "A star.", { enginePromptIds: expand(p0.promptIds, 4), imageCount: 1 });
    const retry = turn(bridge, { messages: [ask] }, "Two stars.", { enginePromptIds: null, imageCount: 1 });
    expect(retry.prepared).toMatchObject({
      promptIds: p0.promptIds,
      verdict: "new_chain",
      reason: "first turn of the session",
      parentTurnId: null,
    });
    expect(retry.committed.flags).toEqual(["image_prompt_unverified"]);
    const again = bridge.prepare({ messages: [ask] });
    expect([again.promptIds, again.flags]).toEqual([p0.promptIds, []]);
  });

  it("after a parent whose engine sent no ids, an expansion of the child's sent ids is not taken: the child records the parent's ids + its suffix, flagged", () => {
    const bridge = new TokenBridge(tok);
    const t0 = turn(bridge, { messages: [ask] }, "A star.", { enginePromptIds: null, imageCount: 1 });
    expect(t0.committed.flags).toEqual(["image_prompt_unverified"]);
    const p1 = bridge.prepare({ messages: [ask, t0.message, u("More?")] });
    const t1 = bridge.commit(p1, {
      sampledIds: [...ids("No."), EOT],
      logprobs: [-1, -1, -1],
      assistantMessage: a("No."),
      finishReason: "stop",
      enginePromptIds: expand(p1.promptIds, 4),
      imageCount: 1,
    });
    expect(t1.prompt_ids).toEqual(p1.promptIds);
    expect(t1.flags).toEqual(["image_prompt_unverified"]);
  });

  it("after an expanded parent, a child whose engine ran its sent ids unexpanded is flagged and records the parent's expanded ids + its suffix", () => {
    const bridge = new TokenBridge(tok);
    const p0 = bridge.prepare({ messages: [ask] });
    const t0 = turn(bridge, { messages: [ask] }, "A star.", {
      enginePromptIds: expand(p0.promptIds, 4),
      imageCount: 1,
    });
    expect([t0.committed.flags, t0.committed.sent_prompt_ids]).toEqual([[], p0.promptIds]);
    const p1 = bridge.prepare({ messages: [ask, t0.message, u("More?")] });
    // Bridged from what was sent (one pad), not from the engine's expansion.
    expect(p1.promptIds.slice(0, p0.promptIds.length)).toEqual(p0.promptIds);
    const t1 = bridge.commit(p1, {
      sampledIds: [...ids("No."), EOT],
      logprobs: [-1, -1, -1],
      assistantMessage: a("No."),
      finishReason: "stop",
      enginePromptIds: p1.promptIds,
      imageCount: 1,
    });
    expect(t1.flags).toEqual(["image_prompt_unverified"]);
    expect(t1.prompt_ids).toEqual([
      ...t0.committed.prompt_ids,
      ...t0.committed.sampled_ids,
      ...p1.promptIds.slice(p1.promptIds.length - p1.bridgedCount),
    ]);
    expect(t1.sent_prompt_ids).toEqual(p1.promptIds);
  });
});

describe("why a request extends no earlier turn", () => {
  const story = [sys, u("Plan the trip")];

  it("the first turn, and one sharing no message with any earlier turn, are new chains, each with its reason", () => {
    const bridge = new TokenBridge(tok);
    const first = turn(bridge, { messages: story }, "Day 1: lake.").prepared;
    expect([first.verdict, first.reason]).toEqual(["new_chain", "first turn of the session"]);
    const sub = turn(
      bridge,
      { messages: [{ role: "system", content: "You are a sub-agent." }, u("Find a lake")] },
      "Ohrid.",
    ).prepared;
    expect([sub.verdict, sub.reason]).toEqual([
      "new_chain",
      "no message in common with an earlier turn (new conversation or sub-agent)",
    ]);
    // The turn sharing the most messages is compared with, not the latest (the sub-agent).
    const edited = bridge.prepare({
      messages: [sys, u("Plan the trip, please"), a("Day 1: lake."), u("More.")],
    });
    expect([edited.verdict, edited.reason]).toEqual([
      "history_rewritten",
      "message 1 differs from t0's history",
    ]);
  });

  it("a strict start of an earlier request is compacted, with both lengths in the reason", () => {
    const bridge = new TokenBridge(tok);
    turn(bridge, { messages: story }, "Day 1: lake.");
    const p = bridge.prepare({ messages: [sys] });
    // History of t0: "Be brief." (9) + "Plan the trip" (13) + "Day 1: lake." (12).
    expect([p.verdict, p.reason, p.parentTurnId]).toEqual([
      "compacted",
      "history is shorter than t0's (1 vs 3 messages, 9 vs 34 characters)",
      null,
    ]);
  });

  it("a reply edited in place to one of the same length: as many messages and characters, so rewritten, not compacted", () => {
    const bridge = new TokenBridge(tok);
    turn(bridge, { messages: story }, "Day 1: lake.");
    const p = bridge.prepare({ messages: [...story, a("Day 1: hill.")] });
    expect([p.verdict, p.reason]).toEqual(["history_rewritten", "message 2 differs from t0's history"]);
  });

  it("fewer messages but more characters, or more messages but fewer characters: compacted either way", () => {
    const fewerMessages = new TokenBridge(tok);
    turn(fewerMessages, { messages: story }, "Day 1: lake.");
    const summary = u(`Summary: ${"we planned a long trip with a lake, a hill and a town. ".repeat(3)}`);
    expect(fewerMessages.prepare({ messages: [sys, summary] }).verdict).toBe("compacted");
    const fewerChars = new TokenBridge(tok);
    turn(fewerChars, { messages: story }, "Day 1: lake.");
    const p = fewerChars.prepare({ messages: [sys, u("Plan"), a("Ok"), u("Go")] });
    expect([p.verdict, p.reason]).toEqual([
      "compacted",
      "history is shorter than t0's (4 vs 3 messages, 17 vs 34 characters)",
    ]);
  });

  it("compares with the latest of the turns sharing as many messages: shorter than the chain's last turn is compacted, though longer than its first", () => {
    const bridge = new TokenBridge(tok);
    let messages = story;
    for (const reply of ["Day 1: lake.", "Day 2: hill.", "Day 3: town."]) {
      const t = turn(bridge, { messages }, reply);
      messages = [...messages, t.message, u("More.")];
    }
    // Message 1 edited (and long), then 2 more: 4 messages against t0's 3 and t2's 7.
    const p = bridge.prepare({
      messages: [sys, u(`Plan the trip ${"carefully ".repeat(5)}`), a("Ok."), u("Go.")],
    });
    expect(p.verdict).toBe("compacted");
    expect(p.reason).toMatch(/^history is shorter than t2's \(4 vs 7 messages, /);
  });

  it("changed tools with the whole history are named as such; with an edited message too, the message is named", () => {
    const bridge = new TokenBridge(tok);
    turn(bridge, { messages: story }, "Day 1: lake.");
    const tools = sglangToolDumps([
      { type: "function", function: { name: "f", parameters: { type: "object" } } },
    ]);
    const same = bridge.prepare({ messages: [...story, a("Day 1: lake."), u("More.")], tools });
    expect([same.verdict, same.reason]).toEqual([
      "history_rewritten",
      "tools or template kwargs changed since t0",
    ]);
    const p = bridge.prepare({ messages: [sys, u("Plan the trip!"), a("Day 1: lake."), u("More.")], tools });
    expect([p.verdict, p.reason]).toEqual(["history_rewritten", "message 1 differs from t0's history"]);
  });
});
