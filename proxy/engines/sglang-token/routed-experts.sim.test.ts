/**
 * MoE routing replay (R3) through token mode: a proxy started with `routedExperts` asks the engine
 * for the rows its session's chain does not hold yet, keeps each call's rows on its record, and
 * the conversation builder stitches a chain's rows into its trace. Against the simulated engine
 * started with routed experts, whose routes are a function of (position, token, layer) that
 * `simRoutedExperts` recomputes: the trace's routes must be exactly those of its whole sequence.
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionRecord, routedExpertRows, Trace } from "../../../protocol";
import { simRoutedExperts, simRoutedExpertsBase64 } from "../../../sim/routed-experts";
import { type SimEngineHandle, startSimEngine } from "../../../sim/server";
import { buildConversationTraces, conversationTurnFromRecord } from "../../builders/conversation";
import { type RecordingProxy, startProxy } from "../../server";
import { CALCULATOR_TOOL } from "../../testing/calculator-tool";

const SEED = 7;
const SHAPE = { layers: 4, topK: 2, experts: 8 };
const quiet = { info() {}, warn() {}, error() {} };
const tools = [CALCULATOR_TOOL];

let sim: SimEngineHandle;
let plainSim: SimEngineHandle;
let proxy: RecordingProxy;
let plain: RecordingProxy;
beforeAll(async () => {
  [sim, plainSim] = await Promise.all([
    startSimEngine({ seed: SEED, routedExperts: SHAPE }),
    startSimEngine({ seed: SEED }),
  ]);
  const routedExperts = { layers: SHAPE.layers, topK: SHAPE.topK };
  [proxy, plain] = await Promise.all([
    startProxy({ engine: "sglang", engineUrl: sim.url, modelServed: "m", routedExperts, logger: quiet }),
    startProxy({ engine: "sglang", engineUrl: plainSim.url, modelServed: "m", routedExperts, logger: quiet }),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([proxy?.close(), plain?.close()]);
  await Promise.all([sim?.close(), plainSim?.close()]);
});

/** A calculator session of two turns through `on`; its records, parsed. */
async function calculatorSession(on: RecordingProxy, sessionId: string): Promise<CompletionRecord[]> {
  const { key } = on.openSession(sessionId, { harness: "scripted" });
  const openai = new OpenAI({ apiKey: key, baseURL: `${on.url}/v1`, maxRetries: 0 });
  const m1: OpenAI.ChatCompletionMessageParam[] = [{ role: "user", content: "What is 17 * 23?" }];
  const r1 = await openai.chat.completions.create({ model: "m", messages: m1, tools });
  const call = r1.choices[0]!.message.tool_calls![0]!;
  await openai.chat.completions.create({
    model: "m",
    messages: [...m1, r1.choices[0]!.message, { role: "tool", tool_call_id: call.id, content: "391" }],
    tools,
  });
  return on.completions(sessionId).map((r) => CompletionRecord.parse(r));
}

describe("routed experts in token mode", () => {
  it("each call asks from its chain's last held position; its record keeps exactly those rows", async () => {
    const [a, b] = await calculatorSession(proxy, "r3-1");
    const generateA = a!.request.generate as Record<string, unknown>;
    const generateB = b!.request.generate as Record<string, unknown>;
    expect(generateA).toMatchObject({ return_routed_experts: true, routed_experts_start_len: 0 });
    // Turn 2 extends turn 1: its rows start at turn 1's last sampled token, whose route only now exists.
    const held = a!.prompt_ids.length + a!.response_ids.length;
    expect(b!.prompt_ids.slice(0, held)).toEqual([...a!.prompt_ids, ...a!.response_ids]);
    expect(generateB).toMatchObject({ return_routed_experts: true, routed_experts_start_len: held - 1 });
    expect(a!.routed_experts).toMatchObject({ start: 0, rows: held - 1, layers: 4, top_k: 2 });
    const end = b!.prompt_ids.length + b!.response_ids.length - 1;
    expect(b!.routed_experts).toMatchObject({ start: held - 1, rows: end - (held - 1) });
    expect(b!.routed_experts!.data).toBe(
      simRoutedExpertsBase64([...b!.prompt_ids, ...b!.response_ids], SHAPE, SEED, held - 1),
    );
    // The rows are kept once, typed: not a second time in the engine's meta_info.
    expect(JSON.stringify(a!.response)).not.toContain("routed_experts");
  });

  it("the chain's trace holds the routes of its whole sequence, stitched from its calls", async () => {
    const records = await calculatorSession(proxy, "r3-2");
    const [trace] = buildConversationTraces(records.map(conversationTurnFromRecord));
    const sequence = [...trace!.prompt_ids, ...trace!.response_ids];
    expect(Trace.parse(trace).routed_experts).toMatchObject({ start: 0, rows: sequence.length - 1 });
    expect(trace!.routed_experts!.data).toBe(simRoutedExpertsBase64(sequence, SHAPE, SEED, 0));
    const rows = routedExpertRows(trace!.routed_experts!);
    const expected = simRoutedExperts(sequence, SHAPE, SEED);
    expect(rows.flat(2)).toEqual([...expected]);
    for (const layers of rows) for (const ids of layers) expect(new Set(ids).size).toBe(2);
    // Per-turn samples get the routes of their own prompt + sampled ids, from their chain's blocks.
    const perTurn = buildConversationTraces(records.map(conversationTurnFromRecord), "per_turn");
    expect(perTurn).toHaveLength(records.length);
    for (const t of perTurn)
      expect(t.routed_experts?.data).toBe(
        simRoutedExpertsBase64([...t.prompt_ids, ...t.response_ids], SHAPE, SEED, 0),
      );
  });

  it("an engine that returns none: the turn is served, the record says why it holds no routes", async () => {
    const records = await calculatorSession(plain, "r3-3");
    expect(records).toHaveLength(2);
    for (const r of records) {
      expect(r.routed_experts).toBeUndefined();
      expect(r.metadata.routed_experts_error).toMatch(/--enable-return-routed-experts/);
    }
    const [trace] = buildConversationTraces(records.map(conversationTurnFromRecord));
    expect(trace!.routed_experts).toBeUndefined();
  });
});
