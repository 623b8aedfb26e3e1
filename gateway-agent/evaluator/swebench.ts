/**
 * The `swebench_harness` evaluator: SWE-bench's grading for one instance, in the eval runtime.
 * The agent's patch is extracted and applied as in `test_on_output`; then the instance's eval
 * script runs — reset the test files to `base_commit`, apply `test_patch`, run the repository's
 * test command on the touched test files between SWE-bench's output markers — and the log is
 * graded SWE-bench's way: resolved iff every FAIL_TO_PASS and every PASS_TO_PASS test passes.
 *
 * Config: `instance`* (the dataset row: `instance_id, repo, base_commit, test_patch, FAIL_TO_PASS,
 * PASS_TO_PASS`; lists may be JSON strings), `test_cmd` (overrides the per-repository command),
 * `repo_dir` (`/testbed`), plus the patch keys of `test_on_output` and `test_timeout` (1800 s).
 *
 * @module
 */
import { SessionFailure } from "../errors";
import { EvaluationTimeout, prepareGrading, secondsOf } from "./grading";
import { ANSI, stringListOf } from "./patch";
import type { Evaluator } from "./types";

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

/**
 * The eval script (bash) of an instance.
 *
 * @example
 * ```ts
 * const script = makeEvalScript(instance, "/testbed");
 * ```
 */
export function makeEvalScript(inst: SwebenchInstance, repoDir: string, testCmd?: string): string {
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
    `${testCmd ?? spec.testCmd} ${spec.directives(files).map(q).join(" ")}`,
    `echo '${END_TEST_OUTPUT}'`,
    reset,
    "",
  ].join("\n");
}

/** Statuses SWE-bench counts as a pass. */
const PASS = new Set(["PASSED", "XFAIL"]);

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
  const split = (tests: string[]) => ({
    success: tests.filter((t) => PASS.has(statuses[t] ?? "")),
    failure: tests.filter((t) => !PASS.has(statuses[t] ?? "")),
  });
  const f2p = split(inst.FAIL_TO_PASS);
  const p2p = split(inst.PASS_TO_PASS);
  return {
    patch_successfully_applied: applied,
    resolved: applied && f2p.failure.length === 0 && p2p.failure.length === 0,
    tests_status: { FAIL_TO_PASS: f2p, PASS_TO_PASS: p2p },
  };
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
  // The test patch's files are the instance's tests: protected (the eval script also resets them).
  const prepared = await prepareGrading(ctx, { repo_dir: "/testbed", base_commit: inst.base_commit }, () =>
    touchedFiles(inst.test_patch),
  );
  if (prepared.done)
    return { ...prepared.done, metadata: { ...prepared.done.metadata, instance_id: inst.instance_id } };
  const { cfg, env, grading } = prepared;
  // SWE-bench grades from the test log, which the code under test can print into: weaker than a report.
  const report = { ...prepared.report, report_mode: "status_lines", weak_report: true };
  const r = await grading.exec(makeEvalScript(inst, cfg.repoDir, testCmd as string | undefined), {
    env,
    cwd: cfg.repoDir,
    signal: ctx.signal,
    timeoutMs: Math.max(1, Math.min(timeout, ctx.timeoutMs)),
    logName: "eval-swebench",
    capture: true,
  });
  if (r.interrupted) throw ctx.signal.reason;
  if (r.timedOut) throw new EvaluationTimeout("swebench eval script timed out");
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
};
