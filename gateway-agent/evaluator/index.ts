/**
 * Evaluator registry: strategy name → evaluator; a strategy containing `:` or starting with `.`
 * or `/` is a custom evaluator module (`./module.mjs:exportName`, the export an {@link Evaluator}).
 *
 * @module
 */
import {
  EVALUATOR_STRATEGIES,
  type EvaluatorSpec,
  type EvaluatorStrategy,
  isModulePath,
} from "../../protocol";
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

// Typed against the shared list: a strategy the control plane accepts always has an evaluator here.
const BUILTIN: Record<EvaluatorStrategy, Evaluator> = {
  session_completed: sessionCompleted,
  test_on_output: testOnOutput,
  harbor,
  swebench_harness: swebenchHarness,
};
const EVALUATORS: ReadonlyMap<string, Evaluator> = new Map(Object.entries(BUILTIN));

/** Built-in strategy names (the shared list of `protocol/names.ts`). */
export const EVALUATOR_NAMES: readonly string[] = EVALUATOR_STRATEGIES;

/** Without an evaluator the reward is null: nothing judged the session. */
const noEvaluator: Evaluator = async () => ({ outcome_reward: null, metadata: {} });

/**
 * The evaluator of a task's `EvaluatorSpec` (null → reward null). A module path that does not load
 * and a name that is neither built in nor a module path (the control plane refuses those at
 * submit) are `configuration` failures naming the field.
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
    "configuration",
    `evaluator.strategy: '${spec.strategy}' is unknown (known: ${EVALUATOR_NAMES.join(", ")}, or a module path 'file.mjs:export')`,
  );
}
