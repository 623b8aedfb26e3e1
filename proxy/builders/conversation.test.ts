import { beforeAll, describe, expect, it } from "vitest";
import { type CompletionRecord, Trajectory } from "../../protocol";
import { type BridgedTurn, TokenBridge } from "../../tokenizer/bridge";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { scriptedTurn } from "../engines/sglang-token/testing";
import {
  buildConversationTraces,
  ConversationBuildError,
  conversationBuilder,
  conversationTurnFromRecord,
} from "./conversation";

let tok: ChatTokenizer;
let turns: BridgedTurn[];
beforeAll(async () => {
  tok = await loadChatTokenizer();
  const bridge = new TokenBridge(tok);
  const eot = bridge.endOfTurnId;
  const m1 = [
    { role: "system", content: "s" },
    { role: "user", content: "q1" },
  ];
  const t1 = scriptedTurn(tok, bridge, { messages: m1 }, [...tok.encode("a1"), eot]);
  scriptedTurn(tok, bridge, { messages: [...m1, t1.message, { role: "user", content: "q2" }] }, [
    ...tok.encode("a2"),
    eot,
  ]);
  turns = bridge.turns();
}, 30_000);

/** A completion record as the proxy's token mode writes it for a bridged turn. */
function recordOf(t: BridgedTurn): CompletionRecord {
  return {
    completion_id: t.provenance.completion_id ?? `cmp_${t.turn_id}`,
    session_id: "s-1",
    timestamp: "2026-01-01T00:00:00.000Z",
    api_type: "openai_chat",
    engine: "sglang",
    model_requested: "m",
    model_used: "m",
    original_request: { messages: t.messages },
    request: { input_ids: t.prompt_ids },
    response: { choices: [{ index: 0, message: t.assistant_message, finish_reason: t.finish_reason }] },
    prompt_ids: t.prompt_ids,
    response_ids: t.sampled_ids,
    response_logprobs: t.sampled_logprobs,
    finish_reason: t.finish_reason,
    weight_version: t.provenance.weight_version,
    cached_tokens: 5,
    latency_ms: 1,
    replica: "r0",
    metadata: {
      policy_version: 4,
      bridge: {
        turn_id: t.turn_id,
        parent_turn_id: t.parent_turn_id,
        verdict: t.verdict,
        reason: t.reason,
        rid: t.provenance.rid,
      },
    },
  };
}

describe("conversation builder", () => {
  it("builds the same trace from completion records as from the bridge's turns, with provenance", () => {
    const fromTurns = buildConversationTraces(turns);
    const trajectory = Trajectory.parse(
      conversationBuilder(turns.map(recordOf), { session_id: "s-1", task_id: "t", config: {} }),
    );
    expect(trajectory.status).toBe("COMPLETED");
    expect(trajectory.metadata.verdicts).toEqual({ new_chain: 1, extended: 1 });
    expect(fromTurns).toHaveLength(1);
    // Every trace, whole: every field is equal but the provenance of each turn's entry, which the
    // records supply (the bridged turns carry the engine's own).
    const PROVENANCE = ["cached_tokens", "completion_id", "policy_version", "replica"];
    const withoutProvenance = (ts: typeof fromTurns) =>
      ts.map((t) => ({
        ...t,
        metadata: {
          ...t.metadata,
          turns: (t.metadata.turns as Array<Record<string, unknown>>).map((e) =>
            Object.fromEntries(Object.entries(e).filter(([k]) => !PROVENANCE.includes(k))),
          ),
        },
      }));
    expect(withoutProvenance(trajectory.traces)).toEqual(withoutProvenance(fromTurns));
    const trace = trajectory.traces[0]!;
    expect(
      (trace.metadata.turns as Array<Record<string, unknown>>).map((e) => PROVENANCE.map((k) => e[k])),
    ).toEqual(turns.map((t) => [5, `cmp_${t.turn_id}`, "4", "r0"]));
    const meta = trace.metadata.turns as Array<Record<string, unknown>>;
    expect(meta[1]).toMatchObject({
      turn_id: "t1",
      verdict: "extended",
      policy_version: "4",
      weight_version: "w1",
      replica: "r0",
      cached_tokens: 5,
      completion_id: "cmp_t1",
    });
    expect(trace.prompt_messages).toEqual(turns[0]!.messages);
    expect(trace.response_messages.map((m) => m.content)).toEqual(["a1", "q2", "a2"]);
  });

  it("reads image_prompt_unverified from records: counted, and the trace is not token-exact", () => {
    const records = turns.map(recordOf);
    const exact = conversationBuilder(records, { session_id: "s-1", task_id: "t", config: {} });
    expect(exact.traces[0]!.metadata.token_exact).toBe(true);
    const second = records[1]!;
    const flagged = {
      ...second,
      metadata: {
        ...second.metadata,
        bridge: { ...(second.metadata.bridge as object), flags: ["image_prompt_unverified"] },
      },
    };
    const t = conversationBuilder([records[0]!, flagged], { session_id: "s-1", task_id: "t", config: {} });
    expect(t.metadata.flags).toEqual({ reasoning_dropped: 0, image_prompt_unverified: 1 });
    const trace = t.traces[0]!;
    expect(trace.metadata.token_exact).toBe(false);
    expect((trace.metadata.turns as Array<Record<string, unknown>>).map((x) => x.token_exact)).toEqual([
      true,
      false,
    ]);
  });

  it("is an ERROR trajectory without completions and refuses records without bridge metadata", () => {
    expect(conversationBuilder([], { session_id: "s", task_id: "t", config: {} })).toMatchObject({
      status: "ERROR",
      error: "no completions",
    });
    const plain = { ...recordOf(turns[0]!), metadata: {} };
    expect(() => conversationTurnFromRecord(plain)).toThrow(/metadata.bridge/);
  });

  it("fails hard on a chain that is not a token prefix, an unknown parent or misaligned logprobs", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    const broken = { ...t1, prompt_ids: [...t1.prompt_ids] };
    broken.prompt_ids[3] = broken.prompt_ids[3]! + 1;
    expect(() => buildConversationTraces([t0, broken])).toThrow(ConversationBuildError);
    expect(() => buildConversationTraces([{ ...t1, parent_turn_id: "t9" }])).toThrow(/t9/);
    expect(() => buildConversationTraces([{ ...t0, sampled_logprobs: [] }])).toThrow(/logprobs/);
  });
});
