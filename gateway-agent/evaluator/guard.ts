/**
 * The worktree check of the patch evaluators, run in the grading runtime right before the tests:
 * whatever the diff parser saw, what counts is the tree the tests will run in. It lists every
 * path that differs from the base commit (modified, deleted, type-changed, untracked, ignored),
 * flags the protected ones, symlinks that leave the repository or point at a protected path, and
 * `package.json` files whose `scripts` changed; `restoreWorktree` puts the base versions back.
 *
 * Git runs with replace objects, hooks, fsmonitor and external diff drivers off, so a repository
 * the agent configured (same-runtime grading) cannot run code or show another tree here.
 *
 * @module
 */
import { posix } from "node:path";
import { isDeepStrictEqual } from "node:util";
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";
import type { Runtime } from "../runtime/types";
import {
  isProtected,
  PACKAGE_SCRIPTS_FILE,
  PACKAGE_SCRIPTS_REASON,
  type ProtectedChange,
  type ProtectedRules,
  protectedReason,
  symlinkDestination,
} from "./protected";

/** `git` with everything that could run repository-configured code switched off. */
export const SAFE_GIT =
  "GIT_NO_REPLACE_OBJECTS=1 GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null git -c core.fsmonitor=false -c core.hooksPath=/dev/null -c diff.external= -c core.pager=cat";

/** Where and against what a worktree is checked. */
export interface GuardTarget {
  runtime: Runtime;
  repoDir: string;
  /** The commit the agent started from (`HEAD` of a fresh eval runtime, or `base_commit`). */
  base: string;
  env: Record<string, string>;
  signal: AbortSignal;
  timeoutMs: number;
}

async function run(t: GuardTarget, command: string, logName: string): Promise<string> {
  const r = await t.runtime.exec(command, {
    env: t.env,
    cwd: t.repoDir,
    signal: t.signal,
    timeoutMs: t.timeoutMs,
    logName,
    capture: true,
  });
  if (r.interrupted) throw t.signal.reason;
  if (r.exitCode !== 0)
    throw new SessionFailure("infra", `worktree check failed (exit ${r.exitCode ?? r.signal}): ${command}`);
  return r.stdout ?? "";
}

const nulList = (s: string) => s.split("\0").filter((x) => x !== "");

/**
 * Files of the base commit (relative to the repository).
 *
 * @example
 * ```ts
 * const files = await listBaseFiles(target); // ["calculator.js", "test_calculator.js", …]
 * ```
 */
export async function listBaseFiles(t: GuardTarget): Promise<string[]> {
  return nulList(await run(t, `${SAFE_GIT} ls-tree -r -z --name-only ${quote([t.base])}`, "eval-guard"));
}

/**
 * Every protected change in the worktree against the base commit.
 *
 * @example
 * ```ts
 * const violations = await checkWorktree(target, rules, baseFiles);
 * ```
 */
export async function checkWorktree(
  t: GuardTarget,
  rules: ProtectedRules,
  baseFiles: readonly string[],
): Promise<ProtectedChange[]> {
  const base = quote([t.base]);
  const diff = nulList(
    await run(t, `${SAFE_GIT} diff --relative --no-renames --name-status -z ${base} --`, "eval-guard"),
  );
  const changed = new Map<string, string>();
  for (let i = 0; i + 1 < diff.length; i += 2)
    changed.set(diff[i + 1] as string, statusWord(diff[i] as string));
  // Untracked files, ignored ones included (a `.gitignore` must not hide a planted hook).
  for (const p of nulList(await run(t, `${SAFE_GIT} ls-files -z --others`, "eval-guard")))
    if (!changed.has(p)) changed.set(p, "add");
  const out: ProtectedChange[] = [];
  for (const [p, change] of changed) {
    if (isProtected(p, rules)) out.push({ path: p, change, reason: protectedReason(p, rules) });
  }
  const flagged = new Set(out.map((v) => v.path));
  const links = nulList(
    await run(
      t,
      `find . -path ./.git -prune -o -type l -exec sh -c 'for l; do printf "%s\\0%s\\0" "$l" "$(readlink "$l")"; done' sh {} +`,
      "eval-guard",
    ),
  );
  for (let i = 0; i + 1 < links.length; i += 2) {
    const p = posix.normalize(links[i] as string);
    if (!changed.has(p) || flagged.has(p)) continue;
    const dest = symlinkDestination(p, links[i + 1] as string);
    if (dest === null) out.push({ path: p, change: "symlink", reason: "symlink out of the repository" });
    else if (isProtected(dest, rules))
      out.push({ path: p, change: "symlink", reason: `symlink to protected path ${dest}` });
    flagged.add(p);
  }
  const inBase = new Set(baseFiles);
  for (const [p, change] of changed) {
    if (flagged.has(p) || posix.basename(p) !== PACKAGE_SCRIPTS_FILE) continue;
    const before = inBase.has(p) ? await readJson(t, `${SAFE_GIT} show ${quote([`${t.base}:${p}`])}`) : {};
    const after = change === "delete" ? {} : await readJson(t, `cat -- ${quote([p])}`);
    const scripts = (v: unknown) => (v && typeof v === "object" ? (v as { scripts?: unknown }).scripts : v);
    if (before === undefined || after === undefined || !isDeepStrictEqual(scripts(before), scripts(after)))
      out.push({ path: p, change, reason: PACKAGE_SCRIPTS_REASON });
  }
  return out;
}

async function readJson(t: GuardTarget, command: string): Promise<unknown> {
  try {
    return JSON.parse(await run(t, command, "eval-guard"));
  } catch {
    return undefined;
  }
}

function statusWord(code: string): string {
  const words: Record<string, string> = { M: "modify", D: "delete", A: "add", T: "type change" };
  return words[code[0] ?? ""] ?? code;
}

/**
 * Puts the base version of each violating path back (or removes it when the base has none).
 *
 * @example
 * ```ts
 * await restoreWorktree(target, violations, baseFiles);
 * ```
 */
export async function restoreWorktree(
  t: GuardTarget,
  violations: readonly ProtectedChange[],
  baseFiles: readonly string[],
): Promise<void> {
  const inBase = new Set(baseFiles);
  const paths = [...new Set(violations.map((v) => v.path))];
  const tracked = paths.filter((p) => inBase.has(p));
  const extra = paths.filter((p) => !inBase.has(p));
  // Remove first: a planted symlink or folder may stand where a base file must come back.
  const commands = [
    ...(extra.length ? [`rm -rf -- ${quote(extra)}`] : []),
    ...(tracked.length
      ? [`rm -rf -- ${quote(tracked)}`, `${SAFE_GIT} checkout -q ${quote([t.base])} -- ${quote(tracked)}`]
      : []),
  ];
  if (commands.length) await run(t, commands.join(" && "), "eval-guard-restore");
}
