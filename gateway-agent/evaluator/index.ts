/**
 * Evaluator registry: strategy name → evaluator; a strategy containing `:` or starting with `.`
 * or `/` is a custom evaluator module (`./module.mjs:exportName`, the export an {@link Evaluator}).
 *
 * @module
 */
import type { EvaluatorSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { importByPath } from "../runtime";
import { harbor } from "./harbor";
import { sessionCompleted } from "./session-completed";
import { swebenchHarness } from "./swebench";
import { testOnOutput } from "./test-on-output";
import type { Evaluator } from "./types";

export { EvaluationTimeout, GradingRefused } from "./grading";
export { harbor, harborReward } from "./harbor";
export { type MergeOutcome, mergeEvalResult } from "./merge";
export * from "./patch";
export { sessionCompleted } from "./session-completed";
export * from "./swebench";
export { testOnOutput } from "./test-on-output";
export type { EvalContext, EvalResult, Evaluator } from "./types";

const EVALUATORS: ReadonlyMap<string, Evaluator> = new Map([
  ["session_completed", sessionCompleted],
  ["test_on_output", testOnOutput],
  ["harbor", harbor],
  ["swebench_harness", swebenchHarness],
]);

/** Built-in strategy names. */
export const EVALUATOR_NAMES: readonly string[] = [...EVALUATORS.keys()];

/** Without an evaluator the reward is null: nothing judged the session. */
const noEvaluator: Evaluator = async () => ({ outcome_reward: null, metadata: {} });

const isModulePath = (s: string) => s.includes(":") || s.startsWith(".") || s.startsWith("/");

/**
 * The evaluator of a task's `EvaluatorSpec` (null → reward null). An unknown strategy is an
 * `infra` failure naming it.
 *
 * @example
 * ```ts
 * const evaluate = await resolveEvaluator(session.evaluator);
 * ```
 */
export async function resolveEvaluator(spec: EvaluatorSpec | null): Promise<Evaluator> {
  if (!spec) return noEvaluator;
  const builtin = EVALUATORS.get(spec.strategy);
  if (builtin) return builtin;
  if (isModulePath(spec.strategy)) {
    return (await importByPath(spec.strategy, "evaluator.strategy")) as unknown as Evaluator;
  }
  throw new SessionFailure(
    "infra",
    `evaluator.strategy: '${spec.strategy}' is unknown (known: ${EVALUATOR_NAMES.join(", ")}, or a module path 'file.mjs:export')`,
  );
}
