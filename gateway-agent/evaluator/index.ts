/**
 * Evaluator registry: strategy name → evaluator.
 *
 * @module
 */
import type { EvaluatorSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { type Evaluator, sessionCompleted } from "./session-completed";

export { type EvalOutcome, type Evaluator, sessionCompleted } from "./session-completed";

const EVALUATORS: ReadonlyMap<string, Evaluator> = new Map([["session_completed", sessionCompleted]]);

/** Without an evaluator the reward is null: nothing judged the session. */
const noEvaluator: Evaluator = async () => ({ reward: null, details: {} });

/**
 * The evaluator of a task's `EvaluatorSpec` (null → no evaluator, reward null). An unknown
 * strategy is an `infra` failure with a message naming it.
 *
 * @example
 * ```ts
 * const evaluate = resolveEvaluator(session.evaluator);
 * const { reward } = await evaluate(trajectory, session.evaluator?.config ?? {});
 * ```
 */
export function resolveEvaluator(spec: EvaluatorSpec | null): Evaluator {
  if (!spec) return noEvaluator;
  const evaluator = EVALUATORS.get(spec.strategy);
  if (!evaluator) {
    throw new SessionFailure(
      "infra",
      `evaluator.strategy: '${spec.strategy}' is unknown (known: ${[...EVALUATORS.keys()].join(", ")})`,
    );
  }
  return evaluator;
}
