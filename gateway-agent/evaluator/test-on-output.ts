/**
 * The `test_on_output` evaluator: take the agent's diff, refuse what touches protected paths,
 * apply the rest in a fresh eval runtime (when `refresh_runtime`), run `test_command`, and give
 * reward 1 iff the test results equal `expected_output_json`.
 *
 * Where the results come from (`report`):
 * - `junit` (default): a JUnit XML report the runner writes to `{{REPORT}}`, a path in a folder the
 *   gateway creates with a fresh nonce right before the tests. Printed output never counts; the
 *   report must be one well-formed document with each test once, and agree with the runner's
 *   exit status (0 exactly when nothing failed).
 * - `status_lines`: upstream's `PASSED/FAILED/ERROR/SKIPPED <id>` lines on stdout (exit code
 *   ignored). WEAKER: the code under test prints on the same stdout, so it can print them too.
 *
 * A pytest test command also gets the runner guard (`runner_guard`, see `runner-guard.ts`): the
 * report must agree with the outcomes the guard recorded from the test calls themselves, so code
 * under test that patches pytest's reporting from inside its process scores 0 (`runner_tampered`).
 *
 * Config: `test_command`*, `expected_output_json`* (object or JSON string), `report`, `repo_dir`
 * (default: the runtime's workdir), `patch_command`, `apply_timeout` (60 s), `test_timeout`
 * (1200 s), `exclude_patterns`, `protected_paths`, `default_protected_paths`,
 * `on_protected_change`, `base_commit`, `runner_guard` (`auto`). See docs/evaluators.md.
 *
 * @module
 */
import { isDeepStrictEqual } from "node:util";
import { SessionFailure } from "../errors";
import type { CommandResult } from "../runtime/types";
import { discard, prepareGrading, secondsOf } from "./grading";
import { runGradingCommand } from "./grading-run";
import { parseJunit } from "./junit";
import { parseTestStatusLines } from "./patch";
import { commandPaths } from "./protected";
import { openReportChannel, REPORT_PLACEHOLDER, type ReportChannel, ReportRefused } from "./report-channel";
import { guardMode, judgeGuard, openRunnerGuard, type RunnerGuard } from "./runner-guard";
import type { EvalResult, Evaluator } from "./types";

export { EvaluationTimeout, samePlaceIn, secondsOf } from "./grading";

function expectedMap(value: unknown): Record<string, string> {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      throw new SessionFailure("configuration", "evaluator.config.expected_output_json: not valid JSON");
    }
  }
  if (!v || typeof v !== "object" || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "string"))
    throw new SessionFailure(
      "configuration",
      "evaluator.config.expected_output_json: must map test ids to statuses",
    );
  return v as Record<string, string>;
}

/** Where `test_on_output` reads results from. */
export type ReportMode = "junit" | "status_lines";

/**
 * The `report` key, checked against the test command.
 *
 * @example
 * ```ts
 * reportMode({ report: "junit" }, "pytest --junitxml={{REPORT}}"); // "junit"
 * ```
 */
export function reportMode(config: Record<string, unknown>, testCommand: string): ReportMode {
  const mode = config.report ?? "junit";
  if (mode !== "junit" && mode !== "status_lines")
    throw new SessionFailure("configuration", "evaluator.config.report: must be junit or status_lines");
  if (mode === "junit" && !testCommand.includes(REPORT_PLACEHOLDER))
    throw new SessionFailure(
      "agent",
      `evaluator.config.test_command: must write a JUnit report to ${REPORT_PLACEHOLDER} (e.g. node --test --test-reporter=junit --test-reporter-destination=${REPORT_PLACEHOLDER}, pytest --junitxml=${REPORT_PLACEHOLDER}); or set report: status_lines, the weaker mode that trusts printed output`,
    );
  return mode;
}

/**
 * Scores one finished test run: reward 1 iff the results (from the report, or from printed status
 * lines) equal `expected`; a missing, invalid or inconsistent report gives 0 with its verdict.
 */
async function scoreRun(
  channel: ReportChannel | null,
  guard: RunnerGuard | null,
  r: CommandResult,
  expected: Record<string, string>,
  report: Record<string, unknown>,
): Promise<EvalResult> {
  const ran = {
    exit_code: r.exitCode,
    expected_tests: expected,
    test_output_path: "logs/eval-test.stdout.log",
  };
  const zero = (verdict: string, reason: string, extra: Record<string, unknown> = {}) => ({
    outcome_reward: 0,
    metadata: { ...report, ...ran, ...extra, resolved: false, ...discard(verdict, reason) },
  });
  let parsed: Record<string, string>;
  if (channel) {
    let xml: string | null;
    try {
      xml = await channel.read();
    } catch (e) {
      if (e instanceof ReportRefused) return zero("report_invalid", e.message);
      throw e;
    }
    if (xml === null) return zero("report_missing", "the test command wrote no report");
    const junit = parseJunit(xml);
    if (!junit.ok) return zero("report_invalid", junit.reason);
    parsed = junit.tests;
    // The runner's own exit status, which the code under test cannot write, must agree.
    if ((junit.failures === 0) !== (r.exitCode === 0))
      return zero(
        "report_inconsistent",
        `the report has ${junit.failures} failing test(s) but the runner exited ${r.exitCode ?? r.signal}`,
        { parsed_tests: parsed },
      );
    if (guard) {
      // The report must agree with what the guard saw of the test calls themselves.
      const judged = judgeGuard(await guard.records(), junit.cases, (c) =>
        c.status === "PASSED" ? "pass" : null,
      );
      report.runner_guard = judged.summary;
      if (judged.problem) return zero("runner_tampered", judged.problem, { parsed_tests: parsed });
    }
  } else parsed = parseTestStatusLines(r.stdout ?? "");
  const resolved = isDeepStrictEqual(parsed, expected);
  if (channel && !resolved) {
    // Never a result, but a signal: something printed a pass for a test the report fails.
    const printed = parseTestStatusLines(r.stdout ?? "");
    const forged = Object.keys(expected).filter((id) => printed[id] === "PASSED" && parsed[id] !== "PASSED");
    if (forged.length > 0)
      return {
        outcome_reward: 0,
        metadata: {
          ...report,
          ...ran,
          resolved,
          parsed_tests: parsed,
          verdict: "forged_output",
          // The tests the output claims: the reward (0) is the report's, nothing was discarded.
          forged_tests: forged,
        },
      };
  }
  return {
    outcome_reward: resolved ? 1 : 0,
    metadata: { ...report, ...ran, resolved, parsed_tests: parsed },
  };
}

/**
 * @example
 * ```ts
 * const r = await testOnOutput(ctx); // r.outcome_reward is 1 or 0
 * ```
 */
export const testOnOutput: Evaluator = async (ctx) => {
  const testCommand = ctx.config.test_command;
  if (typeof testCommand !== "string" || !testCommand)
    throw new SessionFailure("configuration", "evaluator.config.test_command: required");
  const expected = expectedMap(ctx.config.expected_output_json);
  const testTimeout = secondsOf(ctx.config, "test_timeout", 1200);
  const mode = reportMode(ctx.config, testCommand);
  // The guard needs the report channel: what it checks is the report.
  const guarded = mode === "junit" && guardMode(ctx.config, testCommand) === "pytest";
  const prepared = await prepareGrading(ctx, {}, (files) => commandPaths(testCommand, files));
  if (prepared.done) return prepared.done;
  const { cfg, env, grading } = prepared;
  const report: Record<string, unknown> = {
    ...prepared.report,
    report_mode: mode,
    weak_report: mode === "status_lines",
  };
  // Made after the patch is applied, so nothing the agent wrote can be at this path already.
  const channel = mode === "junit" ? await openReportChannel(grading) : null;
  try {
    const guard =
      channel && guarded ? await openRunnerGuard(channel, cfg.repoDir, prepared.protectedFiles) : null;
    const command = channel ? channel.command(testCommand) : testCommand;
    const r = await runGradingCommand(grading, guard ? guard.command(command) : command, {
      env,
      cwd: cfg.repoDir,
      signal: ctx.signal,
      timeoutMs: testTimeout,
      evalTimeoutMs: ctx.timeoutMs,
      logName: "eval-test",
      timedOut: (ms) => `test_command exceeded ${Math.round(ms / 1000)} s`,
    });
    return await scoreRun(channel, guard, r, expected, report);
  } finally {
    await channel?.dispose();
  }
};
