import { beforeAll, describe, expect, it } from "vitest";
import { type CompletionRecord, type Trace, Trajectory } from "../../protocol";
import { type BridgedTurn, TokenBridge } from "../../tokenizer/bridge";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { scriptedTurn } from "../engines/sglang-token/testing";
import {
  buildConversationTraces,
  ConversationBuildError,
  conversationBuilder,
  conversationTurnFromRecord,
  turnTreeCounts,
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

/** What `fn` throws (undefined when it returns). */
function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  return undefined;
}

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

  it("builds a child whose prompt is exactly its parent's prompt + sampled ids, with nothing bridged", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    const direct = { ...t1, prompt_ids: [...t0.prompt_ids, ...t0.sampled_ids] };
    const [trace, ...rest] = buildConversationTraces([t0, direct]);
    expect(rest).toEqual([]);
    expect(trace!.response_ids).toEqual([...t0.sampled_ids, ...t1.sampled_ids]);
    expect(trace!.loss_mask).toEqual([...t0.sampled_ids, ...t1.sampled_ids].map(() => 1));
    expect((trace!.metadata.turns as Array<Record<string, unknown>>)[1]).toMatchObject({
      bridged_start: t0.sampled_ids.length,
      sampled_start: t0.sampled_ids.length,
    });
  });

  it("refuses a child whose prompt stops inside its parent's prompt + sampled ids: a ConversationBuildError naming both", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    // A prefix of the parent's sequence: it extends nothing, it cuts the parent's sample short.
    const short = { ...t1, prompt_ids: [...t0.prompt_ids, ...t0.sampled_ids.slice(0, -1)] };
    const error = thrown(() => buildConversationTraces([t0, short]));
    expect(error).toBeInstanceOf(ConversationBuildError);
    expect(error).toMatchObject({
      name: "ConversationBuildError",
      message: "t1: prompt does not extend t0's prompt + sampled ids",
    });
  });

  it("refuses a turn listed twice", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    expect(() => buildConversationTraces([t0, t0, t1])).toThrow(/^t0: listed twice$/);
  });

  it("names the builder, the chain's index and its exactness in each trace; a branched turn's shared parent is trained once", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    // The session branched at t0: a second child with another prompt (another message after t0).
    const t2 = { ...t1, turn_id: "t2", prompt_ids: [...t1.prompt_ids, 13] };
    const traces = buildConversationTraces([t0, t1, t2]);
    expect(traces.map((t) => ({ ...t.metadata, turns: undefined }))).toEqual([
      { builder: "conversation", chain_index: 0, token_exact: true, turns: undefined },
      { builder: "conversation", chain_index: 1, token_exact: true, turns: undefined },
    ]);
    const trained = (t: (typeof traces)[number]) =>
      (t.metadata.turns as Array<Record<string, unknown>>).map((e) => [e.turn_id, e.trained]);
    expect(traces.map(trained)).toEqual([
      [
        ["t0", true],
        ["t1", true],
      ],
      [
        ["t0", false],
        ["t2", true],
      ],
    ]);
    expect(traces[1]!.loss_mask.slice(0, t0.sampled_ids.length)).toEqual(t0.sampled_ids.map(() => 0));
    expect(turnTreeCounts([t0, t1, t2])).toEqual({
      turns: 3,
      chains: 2,
      branch_points: 1,
      retries_dropped: 0,
      roots: 1,
    });
  });

  it("traces: longest gives the chain of most turns; per_turn one sample per turn with its whole prompt", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    const branch = { ...t1, turn_id: "t2", prompt_ids: [...t1.prompt_ids, 13] };
    const deeper = {
      ...t1,
      turn_id: "t3",
      parent_turn_id: "t1",
      prompt_ids: [...t1.prompt_ids, ...t1.sampled_ids, 7],
    };
    const all = [t0, t1, branch, deeper];
    const ids = (t: Trace) => (t.metadata.turns as Array<{ turn_id: string }>).map((e) => e.turn_id);
    expect(buildConversationTraces(all).map(ids)).toEqual([
      ["t0", "t2"],
      ["t0", "t1", "t3"],
    ]);
    const [longest] = buildConversationTraces(all, "longest");
    expect(buildConversationTraces(all, "longest")).toHaveLength(1);
    expect(ids(longest!)).toEqual(["t0", "t1", "t3"]);
    expect(longest!.loss_mask.filter((m) => m === 1)).toHaveLength(
      t0.sampled_ids.length + t1.sampled_ids.length + deeper.sampled_ids.length,
    );
    const perTurn = buildConversationTraces(all, "per_turn");
    expect(perTurn.map(ids)).toEqual([["t0"], ["t1"], ["t2"], ["t3"]]);
    for (const [i, t] of perTurn.entries()) {
      expect(t.prompt_ids).toEqual(all[i]!.prompt_ids);
      expect(t.response_ids).toEqual(all[i]!.sampled_ids);
      expect(t.loss_mask.every((m) => m === 1)).toBe(true);
    }
    // The conversation builder reads the mode from its config and says which it used.
    const records = turns.map(recordOf);
    const built = conversationBuilder(records, {
      session_id: "s",
      task_id: "t",
      config: { traces: "per_turn" },
    });
    expect(built.traces).toHaveLength(records.length);
    expect(built.metadata.traces).toBe("per_turn");
  });

  it("a retried call does not split the trajectory: the answer it replaced is in no trace", () => {
    const [t0, t1] = turns as [BridgedTurn, BridgedTurn];
    // The harness sent t1's request again (same parent, same prompt) and went on from the new answer.
    const retry = { ...t1, turn_id: "t1b", sampled_ids: [...t1.sampled_ids].reverse() };
    const next = {
      ...t1,
      turn_id: "t2",
      parent_turn_id: "t1b",
      prompt_ids: [...t1.prompt_ids, ...retry.sampled_ids, 7],
    };
    const traces = buildConversationTraces([t0, t1, retry, next]);
    expect(traces).toHaveLength(1);
    expect((traces[0]!.metadata.turns as Array<{ turn_id: string }>).map((e) => e.turn_id)).toEqual([
      "t0",
      "t1b",
      "t2",
    ]);
    expect(turnTreeCounts([t0, t1, retry, next])).toMatchObject({
      chains: 1,
      retries_dropped: 1,
      branch_points: 0,
    });
    // A retry of the last call: the later answer is the session's, the earlier one is dropped.
    const last = buildConversationTraces([t0, t1, { ...retry, turn_id: "t1c" }]);
    expect(last.map((t) => (t.metadata.turns as Array<{ turn_id: string }>).at(-1)!.turn_id)).toEqual([
      "t1c",
    ]);
    // A first answer the session went on from is kept, even if the same request came again later.
    const kept = buildConversationTraces([
      t0,
      t1,
      { ...next, parent_turn_id: "t1", prompt_ids: [...t1.prompt_ids, ...t1.sampled_ids, 7] },
      retry,
    ]);
    expect(kept).toHaveLength(2);
    expect(
      turnTreeCounts([
        t0,
        t1,
        { ...next, parent_turn_id: "t1", prompt_ids: [...t1.prompt_ids, ...t1.sampled_ids, 7] },
        retry,
      ]),
    ).toEqual({ turns: 4, chains: 2, branch_points: 1, retries_dropped: 0, roots: 1 });
  });
});

describe("conversationTurnFromRecord", () => {
  const ctx = { session_id: "s-1", task_id: "t", config: {} };
  const tool = { type: "function", function: { name: "bash", parameters: { type: "object" } } };

  it("refuses a record without response_logprobs, naming its completion", () => {
    const record = { ...recordOf(turns[0]!), response_logprobs: null };
    expect(() => conversationTurnFromRecord(record)).toThrow(
      new RegExp(`^${record.completion_id}: no response_logprobs$`),
    );
  });

  it("keeps the request's tools on the turn and on its trace; an empty tool list is none", () => {
    const base = recordOf(turns[0]!);
    const withTools = { ...base, original_request: { messages: turns[0]!.messages, tools: [tool] } };
    expect(conversationTurnFromRecord(withTools).tools).toEqual([tool]);
    expect(conversationBuilder([withTools], ctx).traces[0]!.tools).toEqual([tool]);
    const empty = { ...base, original_request: { messages: turns[0]!.messages, tools: [] } };
    expect(conversationTurnFromRecord(empty).tools).toBeNull();
    expect(conversationBuilder([empty], ctx).traces[0]!.tools).toBeNull();
  });

  it("reads messages and tools from the internal request when it has messages, not from the harness's body", () => {
    const internal = [{ role: "user", content: "internal form" }];
    const record = {
      ...recordOf(turns[0]!),
      request: { messages: internal, tools: [tool] },
      original_request: { messages: [{ role: "user", content: "harness form" }] },
    };
    const turn = conversationTurnFromRecord(record);
    expect(turn.messages).toEqual(internal);
    expect(turn.tools).toEqual([tool]);
  });

  it("gives a record whose requests carry no message list a turn with no messages", () => {
    const record = { ...recordOf(turns[0]!), original_request: {} };
    expect(conversationTurnFromRecord(record).messages).toEqual([]);
  });

  it("puts a continued turn's version segments in the turn's provenance and its trace entry, and none otherwise", () => {
    const base = recordOf(turns[0]!);
    const n = base.response_ids.length;
    const segments = [
      { len: 1, policy_version: "3", weight_version_start: "w0", weight_version: "w0" },
      { len: n - 1, policy_version: "4", weight_version_start: "w0", weight_version: "w1" },
    ];
    const record = { ...base, metadata: { ...base.metadata, partial_rollout: { segments } } };
    expect(conversationTurnFromRecord(record).provenance.version_segments).toEqual(segments);
    const [entry] = conversationBuilder([record], ctx).traces[0]!.metadata.turns as Array<
      Record<string, unknown>
    >;
    expect(entry!.version_segments).toEqual(segments);
    expect(conversationTurnFromRecord(base).provenance).not.toHaveProperty("version_segments");
  });
});
