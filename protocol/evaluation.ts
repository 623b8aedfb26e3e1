/**
 * What an evaluation says about its own integrity, so a trainer can watch tampering: every
 * evaluation report (`trajectory.metadata.evaluation`) carries a `verdict`, `reward_discarded`
 * and `reward_discard_reason` (upstream's names), and the control plane counts them per task and
 * per batch (`GET /v1/batches/:id`).
 *
 * @module
 */
import { z } from "zod";

/**
 * Verdicts of an evaluation:
 * - `clean`: nothing was refused; the reward is what the tests said.
 * - `reverted`: changes to protected paths were dropped and the rest was graded.
 * - `zeroed`: protected paths were changed and the task says `on_protected_change: zero`.
 * - `failed`: the same with `fail` (the session ends ERROR).
 * - `report_missing`: the test run wrote no report.
 * - `report_invalid`: the report was not one well-formed document with each test once, or not a
 *   regular file in the folder the grader made.
 * - `report_inconsistent`: the report and the runner's exit status disagree.
 * - `grader_files_tampered`: the session folder's grader files were replaced (e.g. by symlinks).
 * - `forged_output`: the test output printed passes for tests the report fails (the reward, 0,
 *   is the report's; the verdict says someone tried).
 * - `invalid_reward`: the evaluator returned NaN, an infinity or a non-number.
 * - `runner_tampered`: the runner guard's records of the test calls disagree with the report, are
 *   missing or unsigned, or the guard refused something the code under test did to the runner.
 * - `runner_config_reverted`: as `reverted`, but every dropped change was a default runner hook or
 *   configuration file (`conftest.py`, `setup.cfg`, `pyproject.toml`, …) that a real fix may touch.
 */
export const EVALUATION_VERDICTS = [
  "clean",
  "reverted",
  "zeroed",
  "failed",
  "report_missing",
  "report_invalid",
  "report_inconsistent",
  "grader_files_tampered",
  "forged_output",
  "invalid_reward",
  "runner_tampered",
  "runner_config_reverted",
] as const;
export const EvaluationVerdict = z.enum(EVALUATION_VERDICTS);
export type EvaluationVerdict = z.infer<typeof EvaluationVerdict>;

/** Evaluation counts of a task or a batch. */
export const EvaluationCounts = z.strictObject({
  /** Results that carried an evaluation report. */
  evaluated: z.number().int(),
  /** Of those, how many had their reward discarded (`reward_discarded: true`). */
  reward_discarded: z.number().int(),
  /** Of those, how many had any verdict but `clean`: the tampering rate's numerator. */
  flagged: z.number().int(),
  /** Count per verdict (verdicts never seen are absent; unknown names count as `other`). */
  verdicts: z.record(z.string(), z.number().int()),
});
export type EvaluationCounts = z.infer<typeof EvaluationCounts>;

/**
 * Why a reward value is refused (NaN, ±Infinity, anything but a number or null), or null when
 * it is acceptable. Used by the gateway before a result is sent; the control plane's schemas
 * refuse the same values.
 *
 * @example
 * ```ts
 * rewardProblem(Number.NaN); // "NaN"
 * rewardProblem(true); // "a boolean, not a number"
 * rewardProblem(0.5); // null
 * ```
 */
export function rewardProblem(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== "number") return `a ${typeof value}, not a number`;
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return String(value);
  return null;
}

/**
 * The evaluation summary the control plane counts, read from a result's trajectory metadata.
 * Null when the result carries no evaluation report.
 *
 * @example
 * ```ts
 * evaluationSummary({ evaluation: { verdict: "reverted", reward_discarded: false } });
 * // { verdict: "reverted", discarded: false }
 * ```
 */
export function evaluationSummary(
  metadata: Record<string, unknown>,
): { verdict: string; discarded: boolean } | null {
  const ev = metadata.evaluation;
  if (!ev || typeof ev !== "object") return null;
  const e = ev as Record<string, unknown>;
  const verdict = EvaluationVerdict.safeParse(e.verdict);
  return {
    // Custom evaluators may not say; what they did not flag is counted as clean.
    verdict: e.verdict === undefined ? "clean" : verdict.success ? verdict.data : "other",
    discarded: e.reward_discarded === true,
  };
}
