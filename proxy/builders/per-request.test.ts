import { describe, expect, it } from "vitest";
import { type CompletionRecord, Trajectory } from "../../protocol";
import { UnknownBuilderError } from "../errors";
import { getBuilder } from "./index";

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
