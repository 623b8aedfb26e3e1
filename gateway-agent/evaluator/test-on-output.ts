/**
 * The `test_on_output` evaluator (upstream): take the agent's diff, apply it in a fresh eval
 * runtime (when `refresh_runtime`), run `test_command`, parse `PASSED/FAILED/ERROR/SKIPPED <id>`
 * lines, and give reward 1 iff the parsed map equals `expected_output_json` (exit code ignored).
 *
 * Config: `test_command`*, `expected_output_json`* (object or JSON string), `repo_dir` (default:
 * the runtime's workdir), `patch_command`, `apply_timeout` (60 s), `test_timeout` (1200 s),
 * `exclude_patterns`.
 *
 * @module
 */
import path from "node:path";
import { isDeepStrictEqual } from "node:util";
import { SessionFailure } from "../errors";
import type { Runtime } from "../runtime/types";
import { applyPatch, extractPatch, parseTestStatusLines, patchConfig } from "./patch";
import type { EvalContext, Evaluator } from "./types";

/** The grading ran out of time: the trajectory is kept and marked TIMEOUT. */
export class EvaluationTimeout extends Error {
  constructor(message: string) {
    super(message);
    this.name = "EvaluationTimeout";
  }
}

function expectedMap(value: unknown): Record<string, string> {
  let v = value;
  if (typeof v === "string") {
    try {
      v = JSON.parse(v);
    } catch {
      throw new SessionFailure("agent", "evaluator.config.expected_output_json: not valid JSON");
    }
  }
  if (!v || typeof v !== "object" || Array.isArray(v) || Object.values(v).some((x) => typeof x !== "string"))
    throw new SessionFailure("agent", "evaluator.config.expected_output_json: must map test ids to statuses");
  return v as Record<string, string>;
}

/** Seconds-valued config key with a default. */
export function secondsOf(config: Record<string, unknown>, key: string, d: number): number {
  const v = config[key];
  if (v === undefined) return d * 1000;
  if (typeof v !== "number" || !(v > 0))
    throw new SessionFailure("agent", `evaluator.config.${key}: must be a positive number`);
  return v * 1000;
}

/** `p` as seen in `to` when it lies inside `from`'s session folder; else unchanged. */
export function samePlaceIn(from: Runtime, to: Runtime, p: string): string {
  const rel = path.posix.relative(from.sessionPath, p);
  if (rel.startsWith("..") || path.posix.isAbsolute(rel)) return p;
  return rel ? path.posix.join(to.sessionPath, rel) : to.sessionPath;
}

/** Extracts and (in a fresh runtime) applies the agent's patch; null reward means "go on". */
export async function extractAndApply(ctx: EvalContext, cfgDefaults: Record<string, unknown>) {
  const runtime = ctx.runtime;
  if (!runtime) throw new SessionFailure("infra", "no runtime to extract the patch from");
  const cfg = patchConfig({ ...cfgDefaults, ...ctx.config }, runtime.workdir);
  const env = { ...runtime.baseEnv(), ...ctx.env };
  const { patch, excluded, hostPath } = await extractPatch(runtime, cfg, env, ctx.signal);
  const report: Record<string, unknown> = {
    patch_path: hostPath,
    patch_bytes: Buffer.byteLength(patch),
    excluded_paths: excluded,
    empty_generation: patch.trim() === "",
    fresh_eval_runtime: ctx.evalRuntime !== null,
  };
  if (report.empty_generation) return { cfg, env, grading: null, report };
  const grading = ctx.evalRuntime ?? runtime;
  // A repo inside the agent's session folder is at the same place in the fresh runtime's
  // (containers mount both at /polar/session; local runtimes have one folder each).
  const gradingCfg = { ...cfg, repoDir: samePlaceIn(runtime, grading, cfg.repoDir) };
  if (ctx.evalRuntime) {
    const evalEnv = { ...ctx.evalRuntime.baseEnv(), ...ctx.env };
    const applied = await applyPatch(ctx.evalRuntime, patch, gradingCfg, evalEnv, ctx.signal);
    report.failed_apply_patch = !applied.applied;
    report.apply_method = applied.method;
    if (!applied.applied) return { cfg: gradingCfg, env, grading: null, report };
  }
  return { cfg: gradingCfg, env: { ...grading.baseEnv(), ...ctx.env }, grading, report };
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
    throw new SessionFailure("agent", "evaluator.config.test_command: required");
  const expected = expectedMap(ctx.config.expected_output_json);
  const testTimeout = secondsOf(ctx.config, "test_timeout", 1200);
  const { cfg, env, grading, report } = await extractAndApply(ctx, {});
  if (!grading) return { outcome_reward: 0, metadata: { ...report, resolved: false } };
  const r = await grading.exec(testCommand, {
    env,
    cwd: cfg.repoDir,
    signal: ctx.signal,
    timeoutMs: Math.max(1, Math.min(testTimeout, ctx.timeoutMs)),
    logName: "eval-test",
    capture: true,
  });
  if (r.interrupted) throw ctx.signal.reason;
  if (r.timedOut)
    throw new EvaluationTimeout(
      `test_command exceeded ${Math.round(Math.min(testTimeout, ctx.timeoutMs) / 1000)} s`,
    );
  const parsed = parseTestStatusLines(r.stdout ?? "");
  const resolved = isDeepStrictEqual(parsed, expected);
  return {
    outcome_reward: resolved ? 1 : 0,
    metadata: {
      ...report,
      resolved,
      exit_code: r.exitCode,
      parsed_tests: parsed,
      expected_tests: expected,
      test_output_path: "logs/eval-test.stdout.log",
    },
  };
};
