/**
 * Upstream's reward merge rule (`_merge_eval_result`): per-trace rewards, when given, must have
 * exactly one entry per trace (else the session becomes ERROR); otherwise the outcome reward is
 * broadcast to every trace. Builders never set rewards.
 *
 * @module
 */
import type { Trajectory } from "../../protocol";
import type { EvalResult } from "./types";

/** Result of {@link mergeEvalResult}. */
export type MergeOutcome = { ok: true; trajectory: Trajectory } | { ok: false; error: string };

/**
 * Stamps rewards on the traces and the evaluation report into `trajectory.metadata.evaluation`.
 *
 * @example
 * ```ts
 * const merged = mergeEvalResult(trajectory, "test_on_output", { outcome_reward: 1, metadata: {} });
 * ```
 */
export function mergeEvalResult(trajectory: Trajectory, strategy: string, result: EvalResult): MergeOutcome {
  const evaluation = {
    strategy,
    outcome_reward: result.outcome_reward,
    trace_rewards: result.trace_rewards ?? null,
    ...result.metadata,
  };
  const metadata = { ...trajectory.metadata, evaluation };
  if (result.trace_rewards) {
    if (result.trace_rewards.length !== trajectory.traces.length) {
      return {
        ok: false,
        error: `evaluator '${strategy}' returned ${result.trace_rewards.length} trace rewards for ${trajectory.traces.length} traces`,
      };
    }
    const rewards = result.trace_rewards;
    return {
      ok: true,
      trajectory: {
        ...trajectory,
        metadata,
        traces: trajectory.traces.map((t, i) => ({ ...t, reward: rewards[i] ?? null })),
      },
    };
  }
  return {
    ok: true,
    trajectory: {
      ...trajectory,
      metadata,
      traces: trajectory.traces.map((t) => ({ ...t, reward: result.outcome_reward })),
    },
  };
}
