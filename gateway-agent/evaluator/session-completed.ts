/**
 * The `session_completed` evaluator: reward 1 when the trajectory is COMPLETED, else 0.
 *
 * @module
 */
import type { Trajectory } from "../../protocol";

/** What an evaluator returns. */
export interface EvalOutcome {
  reward: number | null;
  details: Record<string, unknown>;
}

/** An evaluator: trajectory (and its config) in, outcome reward out. */
export type Evaluator = (trajectory: Trajectory, config: Record<string, unknown>) => Promise<EvalOutcome>;

/**
 * 1.0 if the trajectory is COMPLETED, else 0.0 (upstream's `session_completed`).
 *
 * @example
 * ```ts
 * const { reward } = await sessionCompleted(trajectory, {});
 * ```
 */
export const sessionCompleted: Evaluator = async (trajectory) => ({
  reward: trajectory.status === "COMPLETED" ? 1 : 0,
  details: { trajectory_status: trajectory.status },
});
