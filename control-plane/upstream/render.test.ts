import { describe, expect, it } from "vitest";
import type { SessionResult, Trace } from "../../protocol";
import { inSessionOrder, upstreamSessionResult } from "./render";

function trace(extra: Partial<Trace> = {}): Trace {
  return {
    prompt_ids: [1, 2],
    response_ids: [3, 4, 5],
    loss_mask: [1, 0, 1],
    response_logprobs: [-0.1, 0, -0.3],
    prompt_messages: [],
    response_messages: [],
    tools: null,
    finish_reason: "stop",
    reward: 1,
    metadata: {},
    ...extra,
  };
}

function result(extra: Partial<SessionResult> = {}): SessionResult {
  return {
    session_id: "rollout:t.0.0",
    task_id: "t",
    batch_id: "rollout:t",
    status: "COMPLETED",
    reward: 1,
    trajectory: { status: "COMPLETED", traces: [trace()], metadata: {}, error: null },
    timing: { queued_ms: 1, init_ms: 2, ready_ms: 3, run_ms: 4, postrun_ms: 5, total_ms: 15 },
    node_id: "n",
    attempt: 1,
    error: null,
    metadata: { group_id: 7 },
    ...extra,
  };
}

/** A timed-out session as the gateway reports it (`timeout_source`/`stage` at the top). */
function timedOut(source: string, stage: string, traces: Trace[] = [trace()]): SessionResult {
  return result({
    status: "TIMEOUT",
    error: { kind: "timeout", message: `budget exceeded in ${stage}` },
    trajectory: {
      status: "TIMEOUT",
      traces,
      error: `budget exceeded in ${stage}`,
      metadata: {
        timeout_source: source,
        timeout_stage: stage,
        agent_result: { status: "interrupted", exitCode: null, signal: "SIGKILL" },
        evaluation: { strategy: "session_completed", outcome_reward: 1, trace_rewards: null },
      },
    },
  });
}

describe("upstream rendering of a session result", () => {
  it("timing: exactly upstream's four fields; the full timing and the error object move to metadata.polar_ts", () => {
    const up = upstreamSessionResult(
      result({ status: "ERROR", error: { kind: "agent", message: "harness exited with code 2" } }),
    );
    expect(up.timing).toEqual({ register_to_init_queue_ms: 1, init_ms: 2, run_ms: 4, postrun_ms: 5 });
    expect(up.error).toBe("harness exited with code 2");
    expect(up.metadata).toEqual({
      group_id: 7,
      polar_ts: {
        status: "ERROR",
        error: { kind: "agent", message: "harness exited with code 2" },
        timing: { queued_ms: 1, init_ms: 2, ready_ms: 3, run_ms: 4, postrun_ms: 5, total_ms: 15 },
      },
    });
  });

  it("a CANCELLED session reads as ERROR", () => {
    const up = upstreamSessionResult(
      result({
        status: "CANCELLED",
        error: { kind: "cancelled", message: "the task was cancelled" },
        trajectory: { status: "ERROR", traces: [], metadata: {}, error: "the task was cancelled" },
      }),
    );
    expect(up.status).toBe("ERROR");
    expect(up.error).toBe("the task was cancelled");
    expect((up.metadata.polar_ts as { status: string }).status).toBe("CANCELLED");
  });

  it("drops a null policy_version from trace and trajectory metadata, keeps a real one", () => {
    const up = upstreamSessionResult(
      result({
        trajectory: {
          status: "COMPLETED",
          traces: [
            trace({ metadata: { policy_version: null, x: 1 } }),
            trace({ metadata: { policy_version: "3" } }),
          ],
          metadata: { policy_version: null, builder: "per_request" },
          error: null,
        },
      }),
    );
    expect(up.trajectory.traces[0]!.metadata).toEqual({ x: 1 });
    expect(up.trajectory.traces[1]!.metadata).toEqual({ policy_version: "3" });
    expect(up.trajectory.metadata).toEqual({ builder: "per_request" });
  });

  it("a completed session's traces are untouched", () => {
    const native = result();
    expect(upstreamSessionResult(native).trajectory.traces).toEqual(native.trajectory.traces);
  });

  it("an agent-budget timeout in exec with aligned traces stays trainable as a zero-reward negative", () => {
    const up = upstreamSessionResult(timedOut("agent", "exec"));
    expect(up.trajectory.metadata.agent_result).toEqual({
      status: "timeout",
      return_code: null,
      error: "budget exceeded in exec",
      timeout_source: "agent",
      timeout_stage: "exec",
    });
    expect(up.trajectory.metadata.polar_agent_result).toMatchObject({ status: "interrupted" });
    const t = up.trajectory.traces[0]!;
    expect(t.loss_mask).toEqual([1, 0, 1]);
    expect(t.reward).toBe(0);
    expect(t.metadata.training_filter).toEqual({
      masked: false,
      trainable: true,
      reason: "agent_timeout",
      detail: "budget exceeded in exec",
      original_reward: 1,
    });
    expect(up.trajectory.metadata.evaluation).toMatchObject({
      outcome_reward: 0,
      discarded_outcome_reward: 1,
      reward_discarded: true,
      reward_discard_reason: "agent_timeout",
    });
  });

  it("an agent timeout whose trace lacks logprobs is masked (agent_timeout_unaligned)", () => {
    const up = upstreamSessionResult(timedOut("agent", "exec", [trace({ response_logprobs: null })]));
    const t = up.trajectory.traces[0]!;
    expect(t.loss_mask).toEqual([0, 0, 0]);
    expect(t.metadata.training_filter).toMatchObject({
      masked: true,
      trainable: false,
      reason: "agent_timeout_unaligned",
    });
  });

  it("a session-budget timeout, or an agent timeout outside exec, is masked like any failure", () => {
    for (const [source, stage] of [
      ["session", "exec"],
      ["agent", "setup"],
    ] as const) {
      const t = upstreamSessionResult(timedOut(source, stage)).trajectory.traces[0]!;
      expect(t.loss_mask).toEqual([0, 0, 0]);
      expect(t.reward).toBe(0);
      expect(t.metadata.training_filter).toMatchObject({ masked: true, reason: "session_timeout" });
    }
    const failed = upstreamSessionResult(
      result({
        status: "ERROR",
        error: { kind: "agent", message: "exit 1" },
        trajectory: { status: "ERROR", traces: [trace()], metadata: {}, error: "exit 1" },
      }),
    );
    expect(failed.trajectory.traces[0]!.metadata.training_filter).toMatchObject({
      masked: true,
      reason: "session_error",
    });
  });

  it("an early-stop straggler carries upstream's cancellation keys in result and trajectory metadata", () => {
    const up = upstreamSessionResult(
      result({
        status: "ERROR",
        error: { kind: "cancelled", message: "early stop" },
        trajectory: { status: "ERROR", traces: [], metadata: {}, error: "early stop" },
        metadata: {
          early_stop_cancelled: true,
          fully_masked: true,
          early_stop_min_usable_sessions: 2,
          early_stop_usable_sessions: 2,
        },
      }),
    );
    const keys = {
      early_stop_cancelled: true,
      fully_masked: true,
      early_stop_reason: "minimum_usable_sessions_reached",
      early_stop_min_usable_sessions: 2,
      early_stop_usable_sessions: 2,
      early_stop_elapsed_ms: 15,
    };
    expect(up.metadata).toMatchObject(keys);
    expect(up.trajectory.metadata).toMatchObject(keys);
  });

  it("orders results by task and sample index, whatever order they finished in", () => {
    const ids = ["b.x.0.10", "b.x.0.2", "b.x.1.0", "b.x.0.0"];
    expect(inSessionOrder(ids.map((session_id) => ({ session_id }))).map((r) => r.session_id)).toEqual([
      "b.x.0.0",
      "b.x.0.2",
      "b.x.0.10",
      "b.x.1.0",
    ]);
  });
});
