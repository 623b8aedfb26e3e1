/**
 * The `swebench_harness` evaluator: SWE-bench's grading for one instance, in the eval runtime.
 * The agent's patch is extracted and applied as in `test_on_output`; then the instance's eval
 * script runs — reset the test files to `base_commit`, apply `test_patch`, run the repository's
 * test command on the touched test files between SWE-bench's output markers — and the results are
 * graded SWE-bench's way: resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test passes
 * (PASSED, or XFAIL).
 *
 * Where the results come from (`report`): for a pytest command (every repository but Django's and
 * SymPy's, or a `test_cmd` that runs pytest or names `{{REPORT}}`), pytest's JUnit report through
 * the report channel (`junit`), checked against pytest's exit status and, with the runner guard,
 * against the outcomes the guard recorded from the test calls; otherwise SWE-bench's log parsing
 * (`log`, the weaker mode: the code under test prints into that log).
 *
 * Config: `instance`* (the dataset row: `instance_id, repo, base_commit, test_patch, FAIL_TO_PASS,
 * PASS_TO_PASS`; lists may be JSON strings), `test_cmd` (overrides the per-repository command),
 * `report` (`auto`, `junit`, `log`), `runner_guard` (`auto`), `repo_dir` (`/testbed`), plus the
 * patch keys of `test_on_output` and `test_timeout` (1800 s).
 *
 * @module
 */
import path from "node:path";
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";
import type { CommandResult } from "../runtime/types";
import { discard, prepareGrading, secondsOf } from "./grading";
import { runGradingCommand } from "./grading-run";
import { type JunitCase, junitKeyOf, parseJunit } from "./junit";
import { ANSI, stringListOf } from "./patch";
import { openReportChannel, REPORT_PLACEHOLDER, type ReportChannel, ReportRefused } from "./report-channel";
import { guardMode, judgeGuard, openRunnerGuard, RUNS_PYTEST, type RunnerGuard } from "./runner-guard";
import type { EvalResult, Evaluator } from "./types";

/** SWE-bench's markers around the test output in the eval log. */
export const START_TEST_OUTPUT = ">>>>> Start Test Output";
export const END_TEST_OUTPUT = ">>>>> End Test Output";

/** A SWE-bench row, as far as grading needs it. */
export interface SwebenchInstance {
  instance_id: string;
  repo: string;
  base_commit: string;
  test_patch: string;
  FAIL_TO_PASS: string[];
  PASS_TO_PASS: string[];
}

/** Validates a raw dataset row; errors name the key. */
export function parseInstance(raw: unknown): SwebenchInstance {
  if (!raw || typeof raw !== "object")
    throw new SessionFailure("configuration", "evaluator.config.instance: required object");
  const r = raw as Record<string, unknown>;
  const s = (k: string) => {
    const v = r[k];
    if (typeof v !== "string" || !v)
      throw new SessionFailure("configuration", `evaluator.config.instance.${k}: required string`);
    return v;
  };
  return {
    instance_id: s("instance_id").toLowerCase(),
    repo: s("repo"),
    base_commit: s("base_commit"),
    test_patch: s("test_patch"),
    FAIL_TO_PASS: stringListOf(r.FAIL_TO_PASS, "evaluator.config.instance.FAIL_TO_PASS"),
    PASS_TO_PASS: stringListOf(r.PASS_TO_PASS ?? [], "evaluator.config.instance.PASS_TO_PASS"),
  };
}

/** Files a diff touches (`diff --git a/X b/X` → X). */
export function touchedFiles(diff: string): string[] {
  return [...diff.matchAll(/^diff --git a\/(\S+) b\/\S+/gm)].map((m) => m[1] as string);
}

type Parser = (log: string) => Record<string, string>;

/** Repository-specific test command, directive form and log parser (SWE-bench's specs). */
export function repoSpec(repo: string): {
  testCmd: string;
  directives: (files: string[]) => string[];
  parse: Parser;
} {
  if (repo === "django/django") {
    return {
      testCmd: "./tests/runtests.py --verbosity 2 --settings=test_sqlite --parallel 1",
      directives: (files) =>
        files
          .filter((f) => f.endsWith(".py"))
          .map((f) =>
            f
              .replace(/^tests\//, "")
              .replace(/\.py$/, "")
              .replace(/\//g, "."),
          ),
      parse: parseDjangoLog,
    };
  }
  if (repo === "sympy/sympy") {
    return {
      testCmd: "PYTHONWARNINGS='ignore::UserWarning,ignore::SyntaxWarning' bin/test -C --verbose",
      directives: (files) => files,
      parse: parseSympyLog,
    };
  }
  return {
    testCmd: "pytest --no-header -rA --tb=no -p no:cacheprovider",
    directives: (files) => files,
    parse: parsePytestLog,
  };
}

/** pytest `-rA` lines: `PASSED path::test`, `FAILED path::test - msg`, … (full node ids kept). */
export const parsePytestLog: Parser = (log) => {
  const map: Record<string, string> = {};
  for (const raw of log.split("\n")) {
    const line = raw.replace(ANSI, "").trim();
    const m = /^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\s+(\S+)/.exec(line);
    if (m) map[m[2] as string] = m[1] as string;
  }
  return map;
};

/**
 * Django's verbose runner: `test_x (module.Class) ... ok|FAIL|ERROR|skipped`. A test with a
 * docstring prints the docstring on the next line and the status after it:
 * `test_x (module.Class)` then `Docstring text. ... ok`, so a header line without a status is held
 * until the line that carries it.
 */
export const parseDjangoLog: Parser = (log) => {
  const map: Record<string, string> = {};
  let pending: string | null = null;
  for (const raw of log.split("\n")) {
    const line = raw.replace(ANSI, "").trim();
    const header = /^(\S+ \([^)]+\))/.exec(line);
    const status = / \.\.\. (ok|OK|FAIL|ERROR|skipped.*|expected failure|unexpected success)\s*$/.exec(line);
    if (!status) {
      pending = header ? (header[1] as string) : null;
      continue;
    }
    const name = header ? (header[1] as string) : pending;
    pending = null;
    if (!name) continue;
    const word = status[1] as string;
    map[name] =
      word.toLowerCase() === "ok" || word === "expected failure"
        ? "PASSED"
        : word.startsWith("skipped")
          ? "SKIPPED"
          : word === "FAIL" || word === "unexpected success"
            ? "FAILED"
            : "ERROR";
  }
  return map;
};

/** SymPy's runner: `test_x ok|F|E`. */
export const parseSympyLog: Parser = (log) => {
  const map: Record<string, string> = {};
  for (const line of log.split("\n")) {
    const m = /^(test_\S+)\s+(ok|F|E)\s*$/.exec(line.trim());
    if (m) map[m[1] as string] = m[2] === "ok" ? "PASSED" : m[2] === "F" ? "FAILED" : "ERROR";
  }
  return map;
};

/** Where the eval script sends pytest's report and exit status, and how it wraps the test command. */
export interface EvalScriptReport {
  /** The JUnit report's path in the sandbox (`{{REPORT}}`, or appended as `--junitxml`). */
  report: string;
  /** A file the script writes the test command's exit status to. */
  exitStatus: string;
  /** Wraps the test command line (the runner guard's environment). */
  wrap?: (command: string) => string;
}

/**
 * The eval script (bash) of an instance.
 *
 * @example
 * ```ts
 * const script = makeEvalScript(instance, "/testbed");
 * ```
 */
export function makeEvalScript(
  inst: SwebenchInstance,
  repoDir: string,
  testCmd?: string,
  report?: EvalScriptReport,
): string {
  const spec = repoSpec(inst.repo);
  const files = touchedFiles(inst.test_patch);
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  const reset = files.length ? `git checkout ${q(inst.base_commit)} -- ${files.map(q).join(" ")}` : "true";
  const delimiter = "EOF_114329324912";
  return [
    "set -uxo pipefail",
    `cd ${q(repoDir)}`,
    "git -c core.fileMode=false status >/dev/null 2>&1 || true",
    reset,
    `git apply -v - <<'${delimiter}'`,
    inst.test_patch.endsWith("\n") ? inst.test_patch.slice(0, -1) : inst.test_patch,
    delimiter,
    `: '${START_TEST_OUTPUT}'`,
    `echo '${START_TEST_OUTPUT}'`,
    ...testLines(`${testCmd ?? spec.testCmd} ${spec.directives(files).map(q).join(" ")}`, report),
    `echo '${END_TEST_OUTPUT}'`,
    reset,
    "",
  ].join("\n");
}

/** The test command's line(s): with a report, pytest writes it and the exit status is kept. */
function testLines(command: string, report?: EvalScriptReport): string[] {
  if (!report) return [command];
  const withReport = command.includes(REPORT_PLACEHOLDER)
    ? command.split(REPORT_PLACEHOLDER).join(quote([report.report]))
    : `${command} ${quote([`--junitxml=${report.report}`])}`;
  return [
    report.wrap ? `( ${report.wrap(withReport)} )` : withReport,
    `printf '%s\\n' "$?" > ${quote([report.exitStatus])}`,
  ];
}

/**
 * Where an instance's results come from: `junit` for a pytest command (or one naming
 * `{{REPORT}}`), else `log`; the `report` key (`auto`, `junit`, `log`) can say otherwise.
 *
 * @example
 * ```ts
 * swebenchReportMode({}, "pytest --no-header -rA"); // "junit"
 * swebenchReportMode({}, "./tests/runtests.py --verbosity 2"); // "log"
 * ```
 */
export function swebenchReportMode(config: Record<string, unknown>, command: string): "junit" | "log" {
  const v = config.report ?? "auto";
  if (v !== "auto" && v !== "junit" && v !== "log")
    throw new SessionFailure("configuration", "evaluator.config.report: must be auto, junit or log");
  if (v !== "auto") return v;
  return command.includes(REPORT_PLACEHOLDER) || RUNS_PYTEST.test(command) ? "junit" : "log";
}

/** Statuses SWE-bench counts as a pass. */
const PASS = new Set(["PASSED", "XFAIL"]);

/** The instance's FAIL_TO_PASS and PASS_TO_PASS tests, each split into passed and failed by `statuses`. */
function splitTests(inst: SwebenchInstance, statuses: Record<string, string>) {
  const split = (tests: string[]) => ({
    success: tests.filter((t) => PASS.has(statuses[t] ?? "")),
    failure: tests.filter((t) => !PASS.has(statuses[t] ?? "")),
  });
  return { f2p: split(inst.FAIL_TO_PASS), p2p: split(inst.PASS_TO_PASS) };
}

/**
 * SWE-bench's report for a log: per list, which tests passed; resolved iff all of both pass.
 *
 * @example
 * ```ts
 * gradeLog(instance, log).resolved;
 * ```
 */
export function gradeLog(inst: SwebenchInstance, log: string) {
  const start = log.indexOf(START_TEST_OUTPUT);
  const end = log.lastIndexOf(END_TEST_OUTPUT);
  const applied = start >= 0;
  const section = applied ? log.slice(start, end > start ? end : undefined) : "";
  const statuses = repoSpec(inst.repo).parse(section);
  const { f2p, p2p } = splitTests(inst, statuses);
  return {
    patch_successfully_applied: applied,
    resolved: applied && f2p.failure.length === 0 && p2p.failure.length === 0,
    tests_status: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p },
  };
}

/**
 * SWE-bench's report for the instance's tests as a JUnit report gives them (ids matched through
 * pytest's own naming, {@link junitKeyOf}; an expected failure is `XFAIL`). An id the log parser
 * would have cut at a space matches the one testcase whose name goes on from there with a space.
 *
 * @example
 * ```ts
 * gradeJunit(instance, parsed.cases).resolved;
 * ```
 */
export function gradeJunit(inst: SwebenchInstance, cases: readonly JunitCase[]) {
  const byKey = new Map(cases.map((c) => [`${c.classname}::${c.name}`, c]));
  const statusOf = (id: string): string => {
    const key = junitKeyOf(id);
    let c = byKey.get(key);
    if (!c) {
      const longer = [...byKey.keys()].filter((k) => k.startsWith(`${key} `));
      if (longer.length === 1) c = byKey.get(longer[0] as string);
    }
    if (!c) return "";
    return c.status === "SKIPPED" && c.xfail ? "XFAIL" : c.status;
  };
  const statuses = Object.fromEntries(
    [...inst.FAIL_TO_PASS, ...inst.PASS_TO_PASS].map((t) => [t, statusOf(t)]),
  );
  const { f2p, p2p } = splitTests(inst, statuses);
  return {
    patch_successfully_applied: true,
    resolved: f2p.failure.length === 0 && p2p.failure.length === 0,
    tests_status: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p },
    statuses,
  };
}

/** Grades a run from the report channel; a missing, invalid, inconsistent or refused report gives 0. */
async function gradeReport(
  inst: SwebenchInstance,
  channel: ReportChannel,
  guard: RunnerGuard | null,
  r: CommandResult,
  report: Record<string, unknown>,
): Promise<EvalResult> {
  const ran = { instance_id: inst.instance_id, exit_code: r.exitCode };
  const zero = (verdict: string, reason: string, extra: Record<string, unknown> = {}): EvalResult => ({
    outcome_reward: 0,
    metadata: { ...report, ...ran, ...extra, resolved: false, ...discard(verdict, reason) },
  });
  let xml: string | null;
  let status: string | null;
  try {
    xml = await channel.read();
    status = await channel.readFile("exit_status");
  } catch (e) {
    if (e instanceof ReportRefused) return zero("report_invalid", e.message);
    throw e;
  }
  if (xml === null) return zero("report_missing", "the test command wrote no report");
  const junit = parseJunit(xml, "classname");
  if (!junit.ok) return zero("report_invalid", junit.reason);
  const exit = status === null ? Number.NaN : Number(status.trim());
  if (!Number.isInteger(exit))
    return zero("report_missing", "the eval script recorded no exit status for the tests");
  // pytest's exit status, kept by the script, must agree: 0 exactly when nothing failed (5: nothing ran).
  const consistent =
    junit.failures === 0 ? exit === 0 || (exit === 5 && junit.cases.length === 0) : exit !== 0;
  if (!consistent)
    return zero(
      "report_inconsistent",
      `the report has ${junit.failures} failing test(s) but the tests exited ${exit}`,
      { test_exit_status: exit },
    );
  if (guard) {
    const judged = judgeGuard(await guard.records(), junit.cases, (c) =>
      c.status === "PASSED" ? "pass" : c.status === "SKIPPED" && c.xfail ? "xfail" : null,
    );
    report.runner_guard = judged.summary;
    if (judged.problem) return zero("runner_tampered", judged.problem);
  }
  const grade = gradeJunit(inst, junit.cases);
  const metadata: Record<string, unknown> = {
    ...report,
    ...ran,
    test_exit_status: exit,
    grading_report: grade,
    resolved: grade.resolved,
  };
  if (!grade.resolved) {
    // Never a result, but a signal: the log printed a pass for a test the report does not pass.
    const start = (r.stdout ?? "").indexOf(START_TEST_OUTPUT);
    const printed = start >= 0 ? repoSpec(inst.repo).parse((r.stdout ?? "").slice(start)) : {};
    const forged = Object.keys(grade.statuses).filter(
      (t) => printed[t] === "PASSED" && !PASS.has(grade.statuses[t] ?? ""),
    );
    if (forged.length > 0)
      return { outcome_reward: 0, metadata: { ...metadata, verdict: "forged_output", forged_tests: forged } };
  }
  return { outcome_reward: grade.resolved ? 1 : 0, metadata };
}

/**
 * @example
 * ```ts
 * const { outcome_reward } = await swebenchHarness(ctx);
 * ```
 */
export const swebenchHarness: Evaluator = async (ctx) => {
  const inst = parseInstance(ctx.config.instance);
  const testCmd = ctx.config.test_cmd;
  if (testCmd !== undefined && (typeof testCmd !== "string" || !testCmd))
    throw new SessionFailure("configuration", "evaluator.config.test_cmd: must be a non-empty string");
  const timeout = secondsOf(ctx.config, "test_timeout", 1800);
  const command = (testCmd as string | undefined) ?? repoSpec(inst.repo).testCmd;
  const mode = swebenchReportMode(ctx.config, command);
  const guarded = mode === "junit" && guardMode(ctx.config, command) === "pytest";
  // The test patch's files are the instance's tests: protected (the eval script also resets them).
  const prepared = await prepareGrading(ctx, { repo_dir: "/testbed", base_commit: inst.base_commit }, () =>
    touchedFiles(inst.test_patch),
  );
  if (prepared.done)
    return { ...prepared.done, metadata: { ...prepared.done.metadata, instance_id: inst.instance_id } };
  const { cfg, env, grading } = prepared;
  const report: Record<string, unknown> = {
    ...prepared.report,
    // The log is printed output the code under test can print into: weaker than a report.
    report_mode: mode === "junit" ? "junit" : "status_lines",
    weak_report: mode === "log",
  };
  // Made after the patch is applied, so nothing the agent wrote can be at this path already.
  const channel = mode === "junit" ? await openReportChannel(grading) : null;
  try {
    const guard =
      channel && guarded
        ? await openRunnerGuard(channel, cfg.repoDir, [
            ...new Set([...prepared.protectedFiles, ...touchedFiles(inst.test_patch)]),
          ])
        : null;
    const script = makeEvalScript(
      inst,
      cfg.repoDir,
      testCmd as string | undefined,
      channel
        ? {
            report: channel.sandboxPath,
            exitStatus: path.posix.join(channel.folder.sandbox, "exit_status"),
            wrap: guard ? (c) => guard.command(c) : undefined,
          }
        : undefined,
    );
    const r = await runGradingCommand(grading, script, {
      env,
      cwd: cfg.repoDir,
      signal: ctx.signal,
      timeoutMs: timeout,
      evalTimeoutMs: ctx.timeoutMs,
      logName: "eval-swebench",
      timedOut: () => "swebench eval script timed out",
    });
    if (channel) return await gradeReport(inst, channel, guard, r, report);
    const grade = gradeLog(inst, r.stdout ?? "");
    return {
      outcome_reward: grade.resolved ? 1 : 0,
      metadata: {
        ...report,
        instance_id: inst.instance_id,
        exit_code: r.exitCode,
        grading_report: grade,
        resolved: grade.resolved,
      },
    };
  } finally {
    await channel?.dispose();
  }
};
