/**
 * Protected paths of the patch evaluators: what the agent's change may not touch (the tests, their
 * fixtures, the grader's scripts, interpreter and test-runner hooks), and what happens when it
 * does (`on_protected_change`: `revert` drops those changes and grades the rest, `zero` gives
 * reward 0, `fail` ends the session ERROR). The diff sections that touch a protected path are
 * dropped before the patch is applied; the worktree is checked again after it (see `guard.ts`).
 *
 * Config: `protected_paths` (globs relative to the repository, added to the defaults),
 * `default_protected_paths` (true), `on_protected_change` (`revert`).
 *
 * @module
 */
import { posix } from "node:path";
import { parse as parseShell } from "shell-quote";
import { SessionFailure } from "../errors";
import { type DiffSection, parseDiff, sectionPaths } from "./diff-sections";
import { isExcluded, stringListOf } from "./patch";

/**
 * Hooks that run code inside the test process without being a test: pytest's `conftest.py` and
 * its config files (`addopts` can load plugins), Python's startup hooks and `.pth` files, and
 * installed Node packages. Matched as a whole path or as any path component, at any depth.
 */
export const DEFAULT_PROTECTED_PATTERNS = [
  "conftest.py",
  "sitecustomize.py",
  "usercustomize.py",
  "*.pth",
  "pytest.ini",
  "tox.ini",
  "setup.cfg",
  "pyproject.toml",
  "node_modules",
];

/**
 * `package.json` files count as protected when their `scripts` change (what `npm test` runs);
 * other edits (a dependency, a version) are the agent's. Checked on the worktree (`guard.ts`).
 */
export const PACKAGE_SCRIPTS_FILE = "package.json";

/** Never the agent's to change, whatever the task says: git's own folder (config, hooks). */
export const ALWAYS_PROTECTED = [".git"];

/** What a protected change does to the reward. */
export type ProtectedAction = "revert" | "zero" | "fail";

/** The protection rules of one evaluation. */
export interface ProtectedRules {
  patterns: string[];
  action: ProtectedAction;
  /**
   * Of `patterns`, the default runner hooks and configuration ({@link DEFAULT_PROTECTED_PATTERNS}):
   * a real fix may touch them, so a change refused only for them is named as such.
   */
  hooks: string[];
}

/** The reason of a change refused only because it touches a default runner hook or config file. */
export const RUNNER_HOOK_REASON = "runner hook or configuration (default protected path)";

/** The reason of a `package.json` whose `scripts` changed (what `npm test` runs). */
export const PACKAGE_SCRIPTS_REASON = "package.json scripts changed";

/**
 * True when every change refused is a runner hook or configuration file of the defaults (a
 * `conftest.py`, `setup.cfg`, `pyproject.toml`, `package.json` scripts, …) rather than the tests, a
 * path the task listed or git's folder: a real fix may have touched those, the verdict says so.
 *
 * @example
 * ```ts
 * onlyRunnerConfig([{ path: "setup.cfg", change: "modify", reason: RUNNER_HOOK_REASON }]); // true
 * ```
 */
export function onlyRunnerConfig(changes: readonly ProtectedChange[]): boolean {
  return (
    changes.length > 0 &&
    changes.every((c) => c.reason === RUNNER_HOOK_REASON || c.reason === PACKAGE_SCRIPTS_REASON)
  );
}

/** One change the evaluator refused, and why. */
export interface ProtectedChange {
  path: string;
  change: string;
  reason: string;
}

/** Programs whose next argument is a script they run. */
const INTERPRETERS = new Set([
  "node",
  "python",
  "python3",
  "bash",
  "sh",
  "ruby",
  "perl",
  "deno",
  "bun",
  "tsx",
]);
/** A path that names a test: `test`, `tests` or `spec` as a word of it (test_x.py, x.spec.js, tests/). */
const TEST_NAMED = /(^|[/_.-])(tests?|spec)([/_.-]|$)/i;

/**
 * Files of the base tree that `command` runs: argument tokens naming a tracked file or folder
 * that are test-named (`test`, `tests`, `spec` as a word of the path) or the script an
 * interpreter (`node`, `python3`, `bash`, …) is given. A file the command only reads as data
 * (`grep x calc.py`) is not protected this way; list it in `protected_paths` if it must be.
 *
 * @example
 * ```ts
 * commandPaths("node --test test_calculator.js", ["calculator.js", "test_calculator.js"]); // ["test_calculator.js"]
 * ```
 */
export function commandPaths(command: string, baseFiles: readonly string[]): string[] {
  const files = new Set(baseFiles);
  const out = new Set<string>();
  let previous = "";
  for (const token of parseShell(command)) {
    if (typeof token !== "string") {
      previous = "";
      continue;
    }
    const runBy = INTERPRETERS.has(posix.basename(previous));
    previous = token;
    if (token.startsWith("-") || token.includes("{{")) continue;
    // `tests/test_x.py::test_y` selects inside a file: the file is what runs.
    const p = posix.normalize(token.split("::")[0] as string).replace(/^\.\/|\/$/g, "");
    if (!p || p === "." || p.startsWith("..") || !(runBy || TEST_NAMED.test(p))) continue;
    if (files.has(p)) out.add(p);
    else if (baseFiles.some((f) => f.startsWith(`${p}/`))) out.add(`${p}/**`);
  }
  return [...out];
}

/**
 * Reads the protection keys of `config`; `extra` are task-derived paths (the test command's
 * files, the SWE-bench test patch's files). Errors name the key.
 *
 * @example
 * ```ts
 * const rules = protectedRules({ on_protected_change: "zero" }, ["test_calculator.js"]);
 * ```
 */
export function protectedRules(config: Record<string, unknown>, extra: readonly string[]): ProtectedRules {
  const action = config.on_protected_change ?? "revert";
  if (action !== "revert" && action !== "zero" && action !== "fail")
    throw new SessionFailure(
      "configuration",
      "evaluator.config.on_protected_change: must be revert, zero or fail",
    );
  const defaults = config.default_protected_paths ?? true;
  if (typeof defaults !== "boolean")
    throw new SessionFailure(
      "configuration",
      "evaluator.config.default_protected_paths: must be true or false",
    );
  const listed =
    config.protected_paths === undefined
      ? []
      : stringListOf(config.protected_paths, "evaluator.config.protected_paths");
  return {
    action,
    patterns: [
      ...ALWAYS_PROTECTED,
      ...(defaults ? [...DEFAULT_PROTECTED_PATTERNS, ...extra] : []),
      ...listed,
    ],
    hooks: defaults ? [...DEFAULT_PROTECTED_PATTERNS] : [],
  };
}

/**
 * Why `file` (protected) is: {@link RUNNER_HOOK_REASON} when only a default runner hook or config
 * pattern covers it, else `protected path` (the tests, a task-listed path, git's folder, outside).
 *
 * @example
 * ```ts
 * protectedReason("setup.cfg", rules); // "runner hook or configuration (default protected path)"
 * protectedReason("tests/test_x.py", rules); // "protected path"
 * ```
 */
export function protectedReason(file: string, rules: ProtectedRules): string {
  const p = posix.normalize(file);
  if (posix.isAbsolute(p) || p === ".." || p.startsWith("../")) return "protected path";
  const rel = p.replace(/^\.\//, "");
  const hooks = new Set(rules.hooks);
  const strict = rules.patterns.filter((x) => !hooks.has(x));
  if (!isExcluded(rel, strict) && isExcluded(rel, rules.hooks)) return RUNNER_HOOK_REASON;
  return "protected path";
}

/**
 * True when `file` (relative to the repository) is protected. A path that leaves the repository
 * or is absolute counts as protected: nothing outside the repository is the agent's to change.
 *
 * @example
 * ```ts
 * isProtected("tests/conftest.py", rules); // true with the defaults
 * ```
 */
export function isProtected(file: string, rules: ProtectedRules): boolean {
  const p = posix.normalize(file);
  if (posix.isAbsolute(p) || p === ".." || p.startsWith("../")) return true;
  return isExcluded(p.replace(/^\.\//, ""), rules.patterns);
}

/**
 * Where a symlink at `linkPath` with `target` points, relative to the repository; null when it
 * leaves the repository (absolute, or `..` past the root).
 *
 * @example
 * ```ts
 * symlinkDestination("lib/x", "../y"); // "y"
 * symlinkDestination("x", "/etc/passwd"); // null
 * ```
 */
export function symlinkDestination(linkPath: string, target: string): string | null {
  if (posix.isAbsolute(target)) return null;
  const p = posix.normalize(posix.join(posix.dirname(linkPath), target));
  return p === ".." || p.startsWith("../") ? null : p;
}

/**
 * Why a section may not be applied, or null when it may.
 *
 * @example
 * ```ts
 * sectionViolation(parseDiff(diff)[0]!, rules); // { path: "conftest.py", change: "rename", reason: "protected path" }
 * ```
 */
export function sectionViolation(s: DiffSection, rules: ProtectedRules): ProtectedChange | null {
  const paths = sectionPaths(s);
  const label = s.newPath ?? s.oldPath ?? "(unknown)";
  if (s.unparsed) return { path: label, change: s.kind, reason: `unparsed: ${s.unparsed}` };
  const hit = paths.find((p) => isProtected(p, rules));
  if (hit) return { path: hit, change: s.kind, reason: protectedReason(hit, rules) };
  if (s.symlink && s.newPath) {
    const dest = s.symlinkTarget === null ? null : symlinkDestination(s.newPath, s.symlinkTarget);
    if (dest === null) return { path: s.newPath, change: "symlink", reason: "symlink out of the repository" };
    if (isProtected(dest, rules))
      return { path: s.newPath, change: "symlink", reason: `symlink to protected path ${dest}` };
  }
  return null;
}

/**
 * Splits `diff` into what may be applied and what touches protected paths.
 *
 * @example
 * ```ts
 * const { patch, refused } = splitProtected(diff, rules);
 * ```
 */
export function splitProtected(
  diff: string,
  rules: ProtectedRules,
): { patch: string; refused: ProtectedChange[] } {
  const kept: string[] = [];
  const refused: ProtectedChange[] = [];
  for (const s of parseDiff(diff)) {
    const why = sectionViolation(s, rules);
    if (why) refused.push(why);
    else kept.push(s.text);
  }
  const patch = kept.join("");
  return { patch: patch && !patch.endsWith("\n") ? `${patch}\n` : patch, refused };
}
