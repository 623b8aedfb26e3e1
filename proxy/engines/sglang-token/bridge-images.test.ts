/**
 * Image turns in the bridge: SGLang runs the sent ids with each image pad expanded by the model's
 * processor, so a turn records the engine's ids (and keeps the sent ones), later turns are still
 * bridged from what was sent, and a turn whose engine ids are missing or not such an expansion is
 * flagged `image_prompt_unverified`.
 */
import { beforeAll, describe, expect, it } from "vitest";
import { vlTokenizerDir } from "../../../sim/vl-tokenizer";
import { type PreparedTurn, TokenBridge, type TurnOutcome, VerdictTally } from "../../../tokenizer/bridge";
import { type ChatMessage, type ChatTokenizer, loadChatTokenizer } from "../../../tokenizer/chat-tokenizer";
import { buildConversationTraces } from "../../builders/conversation";

let tok: ChatTokenizer;
let PAD: number;
let EOT: number;
beforeAll(async () => {
  tok = await loadChatTokenizer(vlTokenizerDir());
  PAD = tok.tokenId("<|image_pad|>")!;
  EOT = tok.tokenId("<|im_end|>")!;
}, 30_000);

const image = (url: string) => ({ type: "image_url", image_url: { url } });
const ask = (text: string, ...urls: string[]): ChatMessage => ({
  role: "user",
  content: [{ type: "text", text }, ...urls.map(image)],
});

/** What an engine with a fixed pad count per image returns: each sent pad → `runs[i]` pads. */
function expand(sent: readonly number[], runs: readonly number[]): number[] {
  let k = 0;
  return sent.flatMap((id) => (id === PAD ? Array<number>(runs[k++]!).fill(PAD) : [id]));
}

function outcome(text: string, extra: Partial<TurnOutcome> = {}): TurnOutcome {
  const sampledIds = [...tok.encode(text), EOT];
  return {
    sampledIds,
    logprobs: sampledIds.map(() => -0.5),
    assistantMessage: { role: "assistant", content: text },
    finishReason: "stop",
    ...extra,
  };
}

const pads = (ids: readonly number[]) => ids.filter((id) => id === PAD).length;

describe("image turns in the bridge", () => {
  it("records the engine's expanded ids, bridges from the sent ids, and the chain is one sequence", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [ask("How many stars?", "data:a")];
    const p1 = bridge.prepare({ messages: m1 });
    expect(pads(p1.promptIds)).toBe(1);
    const t1 = bridge.commit(
      p1,
      outcome("3", { enginePromptIds: expand(p1.promptIds, [24]), imageCount: 1 }),
    );
    expect(pads(t1.prompt_ids)).toBe(24);
    expect(t1.sent_prompt_ids).toEqual(p1.promptIds);
    expect(t1.flags).toEqual([]);

    const m2 = [...m1, { role: "assistant", content: "3" }, ask("Are you sure?")];
    const p2 = bridge.prepare({ messages: m2 });
    // What is sent again holds one pad per image: SGLang expands every request's pads itself.
    expect(p2.parentTurnId).toBe(t1.turn_id);
    expect(p2.promptIds.slice(0, p1.promptIds.length)).toEqual(p1.promptIds);
    expect(pads(p2.promptIds)).toBe(1);
    const t2 = bridge.commit(
      p2,
      outcome("Yes, 3", { enginePromptIds: expand(p2.promptIds, [24]), imageCount: 1 }),
    );

    const m3 = [...m2, { role: "assistant", content: "Yes, 3" }, ask("And this one?", "data:b")];
    const p3 = bridge.prepare({ messages: m3 });
    expect(pads(p3.promptIds)).toBe(2);
    const e3 = expand(p3.promptIds, [24, 4]);
    const t3 = bridge.commit(p3, outcome("5", { enginePromptIds: e3, imageCount: 2 }));
    expect(t3.prompt_ids).toEqual(e3);
    expect(bridge.flagCounts().image_prompt_unverified).toBe(0);

    const [trace] = buildConversationTraces(bridge.turns());
    expect(trace!.prompt_ids).toEqual(t1.prompt_ids);
    expect([...trace!.prompt_ids, ...trace!.response_ids]).toEqual([...e3, ...t3.sampled_ids]);
    expect(trace!.metadata.token_exact).toBe(true);
    expect(t2.prompt_ids.slice(0, t1.prompt_ids.length + t1.sampled_ids.length)).toEqual([
      ...t1.prompt_ids,
      ...t1.sampled_ids,
    ]);
  });

  it("flags an image turn whose engine sent no prompt ids, counting it in the session and the tally", () => {
    const tally = new VerdictTally();
    const bridge = new TokenBridge(tok, { harness: "h", tally });
    const p1 = bridge.prepare({ messages: [ask("How many stars?", "data:a")] });
    const t1 = bridge.commit(p1, outcome("3", { enginePromptIds: null, imageCount: 1 }));
    expect(t1.flags).toEqual(["image_prompt_unverified"]);
    expect(t1.prompt_ids).toEqual(p1.promptIds);
    expect(t1.sent_prompt_ids).toBeNull();
    expect(bridge.flagCounts()).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 1 });
    expect(tally.flagCounts("h", tok.name).image_prompt_unverified).toBe(1);
    // A text turn without images needs no engine ids.
    const p2 = bridge.prepare({ messages: [{ role: "user", content: "Hi" }] });
    expect(bridge.commit(p2, outcome("Hello")).flags).toEqual([]);
    // Nor does one whose engine ran exactly what was sent; other ids are flagged even without images.
    const p3 = bridge.prepare({ messages: [{ role: "user", content: "Hey" }] });
    expect(bridge.commit(p3, outcome("Hi", { enginePromptIds: p3.promptIds })).flags).toEqual([]);
    const p4 = bridge.prepare({ messages: [{ role: "user", content: "Yo" }] });
    const t4 = bridge.commit(p4, outcome("Hi", { enginePromptIds: [...p4.promptIds, 1] }));
    expect(t4.flags).toEqual(["image_prompt_unverified"]);
    expect(t4.prompt_ids).toEqual(p4.promptIds);
  });

  it("after a verified parent, an unverified child keeps the chain consistent and the trace not exact", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [ask("How many stars?", "data:a")];
    const p1 = bridge.prepare({ messages: m1 });
    const t1 = bridge.commit(
      p1,
      outcome("3", { enginePromptIds: expand(p1.promptIds, [24]), imageCount: 1 }),
    );
    const p2 = bridge.prepare({ messages: [...m1, { role: "assistant", content: "3" }, ask("Sure?")] });
    // The engine answered ids that are no expansion of what was sent (another id in the suffix).
    const wrong = expand(p2.promptIds, [24]);
    wrong[wrong.length - 3] = 0;
    const t2 = bridge.commit(p2, outcome("Yes", { enginePromptIds: wrong, imageCount: 1 }));
    expect(t2.flags).toEqual(["image_prompt_unverified"]);
    expect(t2.prompt_ids).toEqual([
      ...t1.prompt_ids,
      ...t1.sampled_ids,
      ...p2.promptIds.slice(p2.promptIds.length - p2.bridgedCount),
    ]);
    expect(t2.sent_prompt_ids).toEqual(p2.promptIds);
    const [trace] = buildConversationTraces(bridge.turns());
    expect(trace!.metadata.token_exact).toBe(false);
    expect((trace!.metadata.turns as Array<{ token_exact: boolean }>).map((t) => t.token_exact)).toEqual([
      true,
      false,
    ]);
  });

  it("a retried image turn sends the unexpanded ids again and is checked afresh", () => {
    const bridge = new TokenBridge(tok);
    const m1 = [ask("How many stars?", "data:a")];
    const p1: PreparedTurn = bridge.prepare({ messages: m1 });
    bridge.commit(p1, outcome("3", { enginePromptIds: expand(p1.promptIds, [24]), imageCount: 1 }));
    // A retry (same request) sends what was sent, not the engine's expansion of it.
    const retry = bridge.prepare({ messages: m1 });
    expect(retry.promptIds).toEqual(p1.promptIds);
    const t = bridge.commit(retry, outcome("4", { enginePromptIds: null, imageCount: 1 }));
    expect(t.flags).toEqual(["image_prompt_unverified"]);
    // The flag belongs to that try only: the next retry starts unflagged.
    const again = bridge.prepare({ messages: m1 });
    expect(pads(again.promptIds)).toBe(1);
    expect(again.flags).toEqual([]);
  });
});
