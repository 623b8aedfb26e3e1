/**
 * The `harbor` evaluator (Harbor-style verifier, upstream): in the live runtime, reset the tests
 * and verifier folders, upload `tests_dir` from the gateway host, run `bash <tests>/test.sh`, and
 * read `<verifier>/reward.txt` (a float, clamped to 0..1) or else `reward.json` (a number, or the
 * mean of an object's numbers); neither means 0.
 *
 * Config: `tests_dir`* (host folder), `verifier_timeout` (120 s), `tests_target` (`/tests`;
 * `<session>/tests` on the local runtime), `verifier_dir` (`/logs/verifier`; `<session>/verifier`
 * locally), `test_command` (default `bash <tests_target>/test.sh`).
 *
 * @module
 */
import { SessionFailure } from "../errors";
import { EvaluationTimeout, secondsOf } from "./grading";
import type { Evaluator } from "./types";

/**
 * Reward from the verifier's files (`reward.txt` wins over `reward.json`).
 *
 * @example
 * ```ts
 * harborReward("0.75\n", null); // 0.75
 * harborReward(null, '{"a": 1, "b": 0}'); // 0.5
 * ```
 */
export function harborReward(txt: string | null, json: string | null): number {
  const clamp = (x: number) => Math.min(1, Math.max(0, x));
  if (txt !== null && txt.trim() !== "") {
    const n = Number(txt.trim());
    if (Number.isFinite(n)) return clamp(n);
  }
  if (json !== null && json.trim() !== "") {
    try {
      const v: unknown = JSON.parse(json);
      if (typeof v === "number") return clamp(v);
      if (v && typeof v === "object") {
        const nums = Object.values(v).filter((x): x is number => typeof x === "number");
        if (nums.length) return clamp(nums.reduce((a, b) => a + b, 0) / nums.length);
      }
    } catch {
      // Not JSON: no reward from it.
    }
  }
  return 0;
}

const str = (config: Record<string, unknown>, key: string, d: string | undefined) => {
  const v = config[key];
  if (v === undefined) return d;
  if (typeof v !== "string" || !v)
    throw new SessionFailure("configuration", `evaluator.config.${key}: must be a non-empty string`);
  return v;
};

/**
 * @example
 * ```ts
 * const { outcome_reward } = await harbor(ctx);
 * ```
 */
export const harbor: Evaluator = async (ctx) => {
  const runtime = ctx.runtime;
  if (!runtime) throw new SessionFailure("infra", "no live runtime to verify in");
  const testsDir = str(ctx.config, "tests_dir", undefined);
  if (!testsDir) throw new SessionFailure("configuration", "evaluator.config.tests_dir: required");
  const local = runtime.backend === "local";
  const testsTarget = str(
    ctx.config,
    "tests_target",
    local ? `${runtime.sessionPath}/tests` : "/tests",
  ) as string;
  const verifierDir = str(
    ctx.config,
    "verifier_dir",
    local ? `${runtime.sessionPath}/verifier` : "/logs/verifier",
  ) as string;
  const command = str(ctx.config, "test_command", `bash '${testsTarget}/test.sh'`) as string;
  const timeoutMs = Math.max(1, Math.min(secondsOf(ctx.config, "verifier_timeout", 120), ctx.timeoutMs));
  const env = { ...runtime.baseEnv(), ...ctx.env, TESTS_DIR: testsTarget, VERIFIER_DIR: verifierDir };
  const reset = await runtime.exec(`rm -rf '${testsTarget}' '${verifierDir}' && mkdir -p '${verifierDir}'`, {
    env,
    signal: ctx.signal,
    logName: "eval-harbor-reset",
  });
  if (reset.exitCode !== 0) throw new SessionFailure("infra", "harbor: could not reset the verifier folders");
  await runtime.uploadDir(testsDir, testsTarget);
  await runtime.exec(`chmod -R a+rx '${testsTarget}'`, {
    env,
    signal: ctx.signal,
    logName: "eval-harbor-reset",
  });
  const r = await runtime.exec(command, { env, signal: ctx.signal, timeoutMs, logName: "eval-harbor" });
  if (r.interrupted) throw ctx.signal.reason;
  if (r.timedOut) throw new EvaluationTimeout(`harbor verifier exceeded ${Math.round(timeoutMs / 1000)} s`);
  const read = async (file: string) => {
    const out = await runtime.exec(`cat '${verifierDir}/${file}'`, {
      env,
      signal: ctx.signal,
      logName: "eval-harbor-read",
      capture: true,
    });
    return out.exitCode === 0 ? (out.stdout ?? "") : null;
  };
  const txt = await read("reward.txt");
  const json = txt === null ? await read("reward.json") : null;
  return {
    outcome_reward: harborReward(txt, json),
    metadata: {
      mode: "harbor",
      exit_code: r.exitCode,
      reward_source: txt !== null ? "reward.txt" : json !== null ? "reward.json" : null,
    },
  };
};
