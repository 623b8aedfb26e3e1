/**
 * The grading preparation shared by the patch evaluators (`test_on_output`, `swebench_harness`):
 * take the agent's diff, refuse what touches protected paths, apply the rest in the fresh eval
 * runtime, then check the worktree the tests will run in (and restore protected files there).
 * Every refusal is recorded in the report (`discarded_paths`, `verdict`, `reward_discarded`,
 * `reward_discard_reason`), whatever `on_protected_change` does with it.
 *
 * @module
 */
import path from "node:path";
import { SessionFailure } from "../errors";
import type { Runtime } from "../runtime/types";
import { checkWorktree, type GuardTarget, listBaseFiles, restoreWorktree } from "./guard";
import { applyPatch, checkGraderFiles, extractPatch, type PatchConfig, patchConfig } from "./patch";
import {
  isProtected,
  onlyRunnerConfig,
  type ProtectedChange,
  protectedRules,
  splitProtected,
} from "./protected";
import type { EvalContext, EvalResult } from "./types";

/** The grading ran out of time: the trajectory is kept and marked TIMEOUT. */
export class EvaluationTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EvaluationTimeout";
  }
}

/**
 * The grader refuses to give a reward and ends the session ERROR (`on_protected_change: fail`);
 * `report` goes into the trajectory's evaluation metadata all the same.
 *
 * @example
 * ```ts
 * throw new GradingRefused("protected paths changed: tests/x.py", { verdict: "failed" });
 * ```
 */
export class GradingRefused extends Error {
  constructor(
    message: string,
    readonly report: Record<string, unknown>,
  ) {
    super(message);
    this.name = "GradingRefused";
  }
}

/**
 * Seconds-valued config key with a default, in ms.
 *
 * @example
 * ```ts
 * secondsOf({ test_timeout: 30 }, "test_timeout", 1200); // 30000
 * ```
 */
export function secondsOf(config: Record<string, unknown>, key: string, d: number): number {
  const v = config[key];
  if (v === undefined) return d * 1000;
  if (typeof v !== "number" || !(v > 0))
    throw new SessionFailure("configuration", `evaluator.config.${key}: must be a positive number`);
  return v * 1000;
}

/**
 * `p` as seen in `to` when it lies inside `from`'s session folder; else unchanged.
 *
 * @example
 * ```ts
 * samePlaceIn(agent, fresh, `${agent.sessionPath}/workspace`); // `${fresh.sessionPath}/workspace`
 * ```
 */
export function samePlaceIn(from: Runtime, to: Runtime, p: string): string {
  const rel = path.posix.relative(from.sessionPath, p);
  if (rel.startsWith("..") || path.posix.isAbsolute(rel)) return p;
  return rel ? path.posix.join(to.sessionPath, rel) : to.sessionPath;
}

/**
 * A report's verdict fields for a refusal.
 *
 * @example
 * ```ts
 * discard("report_missing", "the test command wrote no report");
 * // { verdict: "report_missing", reward_discarded: true, reward_discard_reason: "the test command wrote no report" }
 * ```
 */
export function discard(verdict: string, reason: string): Record<string, unknown> {
  return { verdict, reward_discarded: true, reward_discard_reason: reason };
}

/** What the tests run with, or the finished result when there is nothing to run. */
export type Prepared =
  | { done: EvalResult }
  | {
      done?: undefined;
      cfg: PatchConfig;
      env: Record<string, string>;
      grading: Runtime;
      report: Record<string, unknown>;
      /** Files of the base tree the rules protect (relative to the repository). */
      protectedFiles: string[];
    };

/** What the grading steps share: where the patch goes, the rules it is held to, the report. */
interface GradingPlan {
  patch: string;
  /** Grader files the agent replaced in its session folder (the reward is zero then). */
  tampered: string[];
  grading: Runtime;
  gradingCfg: PatchConfig;
  gradingEnv: Record<string, string>;
  target: GuardTarget;
  baseFiles: string[];
  rules: ReturnType<typeof protectedRules>;
  report: Record<string, unknown>;
}

/** Extracts the patch and reads the base tree and the protection rules; changes nothing yet. */
async function planGrading(
  ctx: EvalContext,
  runtime: Runtime,
  cfgDefaults: Record<string, unknown>,
  taskPaths: (baseFiles: readonly string[]) => string[],
): Promise<GradingPlan> {
  const config = { ...cfgDefaults, ...ctx.config };
  const cfg = patchConfig(config, runtime.workdir);
  const env = { ...runtime.baseEnv(), ...ctx.env };
  const tampered = await checkGraderFiles(runtime);
  const { patch, excluded, hostPath } = await extractPatch(runtime, cfg, env, ctx.signal);
  const grading = ctx.evalRuntime ?? runtime;
  // A repo inside the agent's session folder is at the same place in the fresh runtime's
  // (containers mount both at /polar/session; local runtimes have one folder each).
  const gradingCfg = { ...cfg, repoDir: samePlaceIn(runtime, grading, cfg.repoDir) };
  const gradingEnv = { ...grading.baseEnv(), ...ctx.env };
  const base = typeof config.base_commit === "string" && config.base_commit ? config.base_commit : "HEAD";
  const target: GuardTarget = {
    runtime: grading,
    repoDir: gradingCfg.repoDir,
    base,
    env: gradingEnv,
    signal: ctx.signal,
    timeoutMs: cfg.applyTimeoutMs,
  };
  const baseFiles = await listBaseFiles(target);
  const rules = protectedRules(config, taskPaths(baseFiles));
  const report: Record<string, unknown> = {
    patch_path: hostPath,
    patch_bytes: Buffer.byteLength(patch),
    excluded_paths: excluded,
    empty_generation: patch.trim() === "",
    fresh_eval_runtime: ctx.evalRuntime !== null,
    on_protected_change: rules.action,
    protected_patterns: rules.patterns,
    discarded_paths: [] as ProtectedChange[],
    verdict: "clean",
    reward_discarded: false,
    reward_discard_reason: null,
  };
  return { patch, tampered, grading, gradingCfg, gradingEnv, target, baseFiles, rules, report };
}

/** The finished result with reward 0: the report so far and `extra`. */
function zeroed(plan: GradingPlan, extra: Record<string, unknown>): Prepared {
  return { done: { outcome_reward: 0, metadata: { ...plan.report, ...extra, resolved: false } } };
}

/**
 * Records protected `changes` in the report and applies `on_protected_change`: `fail` throws
 * {@link GradingRefused}, `zero` finishes with reward 0, `revert` (or no change) goes on (null).
 */
function refuseProtected(plan: GradingPlan, changes: ProtectedChange[]): Prepared | null {
  (plan.report.discarded_paths as ProtectedChange[]).push(...changes);
  if (changes.length === 0 || plan.rules.action === "revert") return null;
  const why = `protected paths changed: ${changes.map((c) => `${c.path} (${c.reason})`).join(", ")}`;
  if (plan.rules.action === "fail")
    throw new GradingRefused(why, { ...plan.report, ...discard("failed", why) });
  return zeroed(plan, discard("zeroed", why));
}

/**
 * The verdict of a grading that dropped protected changes: `runner_config_reverted` when all of
 * them were default runner hooks or configuration (`conftest.py`, `setup.cfg`, `pyproject.toml`,
 * …), which a real fix may touch, so a trainer can tell it from tests that were tampered with
 * (`reverted`).
 */
function markReverted(plan: GradingPlan): void {
  const dropped = plan.report.discarded_paths as ProtectedChange[];
  plan.report.verdict = onlyRunnerConfig(dropped) ? "runner_config_reverted" : "reverted";
}

/** Applies the patch, without its protected sections, in the fresh eval runtime; null = applied. */
async function applyInFreshRuntime(
  ctx: EvalContext,
  evalRuntime: Runtime,
  plan: GradingPlan,
): Promise<Prepared | null> {
  const split = splitProtected(plan.patch, plan.rules);
  const early = refuseProtected(plan, split.refused);
  if (early) return early;
  if (split.refused.length > 0) markReverted(plan);
  if (split.patch.trim() === "") {
    plan.report.empty_generation = true;
    return zeroed(plan, {});
  }
  const applied = await applyPatch(evalRuntime, split.patch, plan.gradingCfg, plan.gradingEnv, ctx.signal);
  plan.report.failed_apply_patch = !applied.applied;
  plan.report.apply_method = applied.method;
  return applied.applied ? null : zeroed(plan, {});
}

/**
 * Checks what the tests will really see (the parser may have missed something; the agent's own
 * tree, in same-runtime grading, was never filtered at all) and restores protected files there.
 */
async function guardWorktree(plan: GradingPlan): Promise<Prepared | null> {
  const { target, rules, baseFiles } = plan;
  const violations = await checkWorktree(target, rules, baseFiles);
  const late = refuseProtected(plan, violations);
  if (late) return late;
  if (violations.length === 0) return null;
  await restoreWorktree(target, violations, baseFiles);
  markReverted(plan);
  const left = await checkWorktree(target, rules, baseFiles);
  if (left.length === 0) return null;
  return zeroed(
    plan,
    discard("zeroed", `protected paths could not be restored: ${left.map((c) => c.path).join(", ")}`),
  );
}

/**
 * Extracts the agent's patch, protects, applies and checks. `taskPaths` gives the paths the task
 * itself protects (from the base tree's files), e.g. the files the test command runs.
 *
 * @example
 * ```ts
 * const p = await prepareGrading(ctx, {}, (files) => commandPaths(testCommand, files));
 * if (p.done) return p.done;
 * ```
 */
export async function prepareGrading(
  ctx: EvalContext,
  cfgDefaults: Record<string, unknown>,
  taskPaths: (baseFiles: readonly string[]) => string[],
): Promise<Prepared> {
  const runtime = ctx.runtime;
  if (!runtime) throw new SessionFailure("infra", "no runtime to extract the patch from");
  const plan = await planGrading(ctx, runtime, cfgDefaults, taskPaths);
  if (plan.tampered.length > 0) {
    return zeroed(plan, {
      grader_files: plan.tampered,
      ...discard(
        "grader_files_tampered",
        `grader files replaced in the session folder: ${plan.tampered.join(", ")}`,
      ),
    });
  }
  if (ctx.evalRuntime) {
    const stopped = await applyInFreshRuntime(ctx, ctx.evalRuntime, plan);
    if (stopped) return stopped;
  } else if (plan.report.empty_generation) return zeroed(plan, {});
  const stopped = await guardWorktree(plan);
  if (stopped) return stopped;
  return {
    cfg: plan.gradingCfg,
    env: plan.gradingEnv,
    grading: plan.grading,
    report: plan.report,
    protectedFiles: plan.baseFiles.filter((f) => isProtected(f, plan.rules)),
  };
}
