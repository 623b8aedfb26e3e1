/**
 * Upstream's reward merge rule (`_merge_eval_result`): per-trace rewards, when given, must have
 * exactly one entry per trace (else the session becomes ERROR); otherwise the outcome reward is
 * broadcast to every trace. Builders never set rewards.
 *
 * Every merged report carries `verdict`, `reward_discarded` and `reward_discard_reason` (defaults
 * `clean`, false, null for evaluators that do not set them), and a reward that is NaN, infinite
 * or not a number is refused here: JSON would silently turn NaN into null, so the session ends
 * ERROR with the verdict `invalid_reward` instead of reaching a trainer.
 *
 * @module
 */
import { rewardProblem, type Trajectory } from "../../protocol";
import type { EvalResult } from "./types";

/** Result of {@link mergeEvalResult}; a refusal may still carry the stamped trajectory. */
export type MergeOutcome =
  | { ok: true; trajectory: Trajectory }
  | { ok: false; error: string; kind: "infra" | "agent"; trajectory?: Trajectory };

/** Why an evaluator's rewards are refused, or null. */
function invalidReward(result: EvalResult): string | null {
  const outcome = rewardProblem(result.outcome_reward);
  if (outcome) return `outcome_reward is ${outcome}`;
  if (result.trace_rewards !== undefined) {
    if (!Array.isArray(result.trace_rewards)) return "trace_rewards is not a list";
    for (const [i, r] of result.trace_rewards.entries()) {
      const p = r === null ? "null" : rewardProblem(r);
      if (p) return `trace_rewards[${i}] is ${p}`;
    }
  }
  return null;
}

/**
 * Stamps rewards on the traces and the evaluation report into `trajectory.metadata.evaluation`.
 *
 * @example
 * ```ts
 * const merged = mergeEvalResult(trajectory, "test_on_output", { outcome_reward: 1, metadata: {} });
 * ```
 */
export function mergeEvalResult(trajectory: Trajectory, strategy: string, result: EvalResult): MergeOutcome {
  const bad = invalidReward(result);
  const evaluation = {
    strategy,
    verdict: "clean",
    reward_discarded: false,
    reward_discard_reason: null,
    ...result.metadata,
    outcome_reward: bad ? null : result.outcome_reward,
    trace_rewards: bad ? null : (result.trace_rewards ?? null),
    ...(bad
      ? { verdict: "invalid_reward", reward_discarded: true, reward_discard_reason: `invalid_reward: ${bad}` }
      : {}),
  };
  const metadata = { ...trajectory.metadata, evaluation };
  if (bad) {
    return {
      ok: false,
      kind: "agent",
      error: `evaluator '${strategy}' returned an invalid reward: ${bad}`,
      trajectory: { ...trajectory, metadata, traces: trajectory.traces.map((t) => ({ ...t, reward: null })) },
    };
  }
  if (result.trace_rewards) {
    if (result.trace_rewards.length !== trajectory.traces.length) {
      return {
        ok: false,
        kind: "infra",
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
