/**
 * The `session_completed` evaluator: reward 1 when the trajectory is COMPLETED, else 0.
 *
 * @module
 */
import type { Evaluator } from "./types";

/**
 * 1.0 if the trajectory is COMPLETED, else 0.0 (upstream's `session_completed`).
 *
 * @example
 * ```ts
 * const { outcome_reward } = await sessionCompleted(ctx);
 * ```
 */
export const sessionCompleted: Evaluator = async ({ trajectory }) => ({
  outcome_reward: trajectory.status === "COMPLETED" ? 1 : 0,
  metadata: { trajectory_status: trajectory.status },
});
