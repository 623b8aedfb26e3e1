/**
 * Running an evaluator's test command in the grading runtime: bounded by the smaller of its own
 * timeout and what is left of the evaluation's, its output captured for grading.
 *
 * @module
 */
import type { CommandResult, Runtime } from "../runtime/types";
import { EvaluationTimeout } from "./grading";

/** Options of {@link runGradingCommand}. */
export interface GradingCommand {
  env: Record<string, string>;
  cwd: string;
  /** The evaluation's signal: an abort ends the command and is rethrown. */
  signal: AbortSignal;
  /** The command's own timeout and what is left of the evaluation's (ms): the smaller applies. */
  timeoutMs: number;
  evalTimeoutMs: number;
  logName: string;
  /** The {@link EvaluationTimeout}'s message, given the timeout that applied (ms). */
  timedOut(ms: number): string;
}

/**
 * Runs `command`; an interrupted run rethrows the signal's reason, a timed-out one throws
 * {@link EvaluationTimeout}.
 *
 * @example
 * ```ts
 * const r = await runGradingCommand(grading, "pytest -q", {
 *   env, cwd: "/testbed", signal: ctx.signal, timeoutMs: 1_200_000, evalTimeoutMs: ctx.timeoutMs,
 *   logName: "eval-test", timedOut: (ms) => `test_command exceeded ${ms / 1000} s`,
 * });
 * ```
 */
export async function runGradingCommand(
  grading: Runtime,
  command: string,
  o: GradingCommand,
): Promise<CommandResult> {
  const limit = Math.min(o.timeoutMs, o.evalTimeoutMs);
  const r = await grading.exec(command, {
    env: o.env,
    cwd: o.cwd,
    signal: o.signal,
    timeoutMs: Math.max(1, limit),
    logName: o.logName,
    capture: true,
  });
  if (r.interrupted) throw o.signal.reason;
  if (r.timedOut) throw new EvaluationTimeout(o.timedOut(limit));
  return r;
}
