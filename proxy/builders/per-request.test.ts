import { describe, expect, it } from "vitest";
import { type CompletionRecord, Trajectory } from "../../protocol";
import { UnknownBuilderError } from "../errors";
import { getBuilder } from "./index";
import { recordVersionSegments, traceFromRecord } from "./per-request";

function record(i: number, logprobs: boolean): CompletionRecord {
  const response_ids = [100 + i, 200 + i, 151645];
  return {
    completion_id: `cmp_00000000000${i}`,
    session_id: "s-1",
    timestamp: new Date(1_777_000_000_000 + i).toISOString(),
    api_type: "openai_chat",
    engine: "sglang-openai",
    model_requested: "gpt-4o",
    model_used: "Qwen/Qwen3-8B",
    original_request: { model: "gpt-4o", messages: [{ role: "user", content: `q${i}` }] },
    request: {
      model: "Qwen/Qwen3-8B",
      messages: [{ role: "user", content: `q${i}` }],
      ...(i === 1 ? { tools: [{ type: "function", function: { name: "bash" } }] } : {}),
    },
    response: {
      choices: [
        {
          index: 0,
          message: { role: "assistant", content: `a${i}` },
          finish_reason: i === 1 ? "tool_calls" : "stop",
        },
      ],
    },
    prompt_ids: [151644, 872, 198, 10 + i],
    response_ids,
    response_logprobs: logprobs ? response_ids.map((_, k) => -0.1 * (k + 1)) : null,
    finish_reason: i === 1 ? "tool_calls" : "stop",
    weight_version: `v${i}`,
    cached_tokens: i,
    latency_ms: 12.5 + i,
    replica: "http://127.0.0.1:30000",
    metadata: {},
  };
}

describe("per_request builder", () => {
  const build = getBuilder("per_request");

  it("makes one trace per completion with all-ones loss mask and the served messages", () => {
    const records = [record(0, true), record(1, false)];
    const t = Trajectory.parse(build(records, { session_id: "s-1", task_id: "t-1", config: {} }));
    expect(t.status).toBe("COMPLETED");
    expect(t.error).toBeNull();
    expect(t.traces).toHaveLength(2);
    const [a, b] = t.traces;
    expect(a!.prompt_ids).toEqual([151644, 872, 198, 10]);
    expect(a!.response_ids).toEqual([100, 200, 151645]);
    expect(a!.loss_mask).toEqual([1, 1, 1]);
    expect(a!.response_logprobs).toEqual([-0.1, -0.2, -0.30000000000000004]);
    expect(a!.prompt_messages).toEqual([{ role: "user", content: "q0" }]);
    expect(a!.response_messages).toEqual([{ role: "assistant", content: "a0" }]);
    expect(a!.tools).toBeNull();
    expect(a!.reward).toBeNull();
    expect(a!.metadata).toEqual({
      completion_id: "cmp_000000000000",
      policy_version: null,
      weight_version_start: null,
      weight_version: "v0",
      cached_tokens: 0,
      replica: "http://127.0.0.1:30000",
      latency_ms: 12.5,
    });
    expect(b!.response_logprobs).toBeNull();
    expect(b!.tools).toEqual([{ type: "function", function: { name: "bash" } }]);
    expect(b!.finish_reason).toBe("tool_calls");
    expect(t.metadata).toEqual({
      builder: "per_request",
      session_id: "s-1",
      task_id: "t-1",
      record_count: 2,
      trace_count: 2,
    });
  });

  it("reports an empty session as ERROR 'no completions'", () => {
    const t = build([], { session_id: "s-1", task_id: "t-1", config: {} });
    expect(t).toMatchObject({ status: "ERROR", error: "no completions", traces: [] });
    expect(t.metadata.record_count).toBe(0);
  });

  it("refuses unknown strategies with a typed error", () => {
    expect(() => getBuilder("tree_search")).toThrow(UnknownBuilderError);
    expect(() => getBuilder("tree_search")).toThrow(/unknown builder strategy 'tree_search'.*per_request/);
  });
});

describe("recordVersionSegments", () => {
  /** record(0) (3 sampled ids) with `metadata.partial_rollout` set to `partial`. */
  const continued = (partial: unknown): CompletionRecord => ({
    ...record(0, true),
    metadata: { partial_rollout: partial as CompletionRecord["metadata"] },
  });
  const seg = (len: unknown, policy: unknown = "3") => ({
    len,
    policy_version: policy,
    weight_version_start: "w3",
    weight_version: "w4",
    rid: "rid-1",
  });

  it("returns the segments of a split that covers the sampled ids, as {len, policy_version, weight_version_start, weight_version}", () => {
    // The record's own keys (`rid`) are not summarised.
    expect(recordVersionSegments(continued({ segments: [seg(1, "3"), seg(2, "4")] }))).toEqual([
      { len: 1, policy_version: "3", weight_version_start: "w3", weight_version: "w4" },
      { len: 2, policy_version: "4", weight_version_start: "w3", weight_version: "w4" },
    ]);
  });

  it("reads a version that is not a string as null", () => {
    const record = continued({
      segments: [
        { len: 1, policy_version: 3, weight_version_start: null },
        { len: 2, policy_version: "4", weight_version: 7 },
      ],
    });
    expect(recordVersionSegments(record)).toEqual([
      { len: 1, policy_version: null, weight_version_start: null, weight_version: null },
      { len: 2, policy_version: "4", weight_version_start: null, weight_version: null },
    ]);
  });

  it("counts a len that is not a non-negative integer (a string, a fraction, a negative) as 0", () => {
    // The other segment covers all 3 ids, so only a bad len read as 0 makes the split cover them.
    for (const bad of ["2", 1.5, -1]) {
      expect(recordVersionSegments(continued({ segments: [seg(bad), seg(3)] }))).toEqual([
        { len: 0, policy_version: "3", weight_version_start: "w3", weight_version: "w4" },
        { len: 3, policy_version: "3", weight_version_start: "w3", weight_version: "w4" },
      ]);
    }
  });

  it("is null for a split that does not cover the sampled ids exactly (short, long) or has one segment", () => {
    expect(recordVersionSegments(continued({ segments: [seg(1), seg(1)] }))).toBeNull();
    expect(recordVersionSegments(continued({ segments: [seg(2), seg(2)] }))).toBeNull();
    expect(recordVersionSegments(continued({ segments: [seg(3)] }))).toBeNull();
  });

  it("is null without partial_rollout, or with one that is not an object or has no segment list", () => {
    expect(recordVersionSegments(record(0, true))).toBeNull();
    expect(recordVersionSegments(continued([seg(1), seg(2)]))).toBeNull();
    expect(recordVersionSegments(continued({ segments: { 0: seg(1), 1: seg(2) } }))).toBeNull();
  });

  it("puts the segments in a per_request trace's metadata, and no key when there are none", () => {
    const trace = traceFromRecord(continued({ segments: [seg(1, "3"), seg(2, "4")] }));
    expect(trace.metadata.version_segments).toEqual([
      { len: 1, policy_version: "3", weight_version_start: "w3", weight_version: "w4" },
      { len: 2, policy_version: "4", weight_version_start: "w3", weight_version: "w4" },
    ]);
    expect(traceFromRecord(record(0, true)).metadata).not.toHaveProperty("version_segments");
  });
});

describe("traceFromRecord", () => {
  it("has no response message when the response has no choices", () => {
    const r = record(0, true);
    expect(traceFromRecord({ ...r, response: {} }).response_messages).toEqual([]);
    expect(traceFromRecord({ ...r, response: { choices: [] } }).response_messages).toEqual([]);
  });
});
