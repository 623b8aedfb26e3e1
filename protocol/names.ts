/**
 * The built-in names a task may use: harness presets, runtime backends, evaluator and trajectory
 * builder strategies. One list each, shared by the task schema (so the control plane refuses an
 * unknown name at submit with a 400 naming the field) and by the gateway's and the proxy's
 * registries (typed against these lists, so a registry cannot drift from what is accepted).
 *
 * A *module path* (`./my-eval.mjs:evaluate`, `/opt/x.mjs`, `pkg/mod:Class`) is the escape hatch
 * for custom code: the control plane cannot load it, so it accepts any such string and the gateway
 * resolves it at INIT (a failure there is an `error.kind = "configuration"` result).
 *
 * @module
 */

/**
 * Harness presets a gateway ships (`agent.harness`); `shell` runs `agent.custom_shell`.
 *
 * @example
 * ```ts
 * HARNESS_NAMES.includes("codex"); // true
 * ```
 */
export const HARNESS_NAMES = [
  "shell",
  "claude_code",
  "codex",
  "qwen_code",
  "opencode",
  "gemini_cli",
  "pi",
  "mini_swe_agent",
  "copilot_cli",
  "cline",
  "kilo_code",
  "continue",
  "grok_cli",
  "nanocoder",
] as const;
export type HarnessNameValue = (typeof HARNESS_NAMES)[number];

/**
 * Runtime backends built into the gateway (`runtime.backend`).
 *
 * @example
 * ```ts
 * z.enum(RUNTIME_BACKENDS).parse("docker");
 * ```
 */
export const RUNTIME_BACKENDS = ["local", "docker", "apptainer"] as const;
export type RuntimeBackend = (typeof RUNTIME_BACKENDS)[number];

/**
 * Built-in evaluator strategies (`evaluator.strategy`).
 *
 * @example
 * ```ts
 * strategyProblem("test_on_output", EVALUATOR_STRATEGIES); // null
 * ```
 */
export const EVALUATOR_STRATEGIES = [
  "session_completed",
  "test_on_output",
  "harbor",
  "swebench_harness",
] as const;
export type EvaluatorStrategy = (typeof EVALUATOR_STRATEGIES)[number];

/**
 * Built-in trajectory builders (`builder.strategy`).
 *
 * @example
 * ```ts
 * strategyProblem("tree", BUILDER_STRATEGIES); // "'tree' is not a built-in strategy (…)"
 * ```
 */
export const BUILDER_STRATEGIES = ["per_request", "prefix_merging", "conversation"] as const;
export type BuilderStrategy = (typeof BUILDER_STRATEGIES)[number];

/**
 * True when `value` names custom code rather than a built-in: it contains `:` (`file.mjs:export`,
 * upstream's `module:Class`) or starts with `.` or `/` (a file, default export).
 *
 * @example
 * ```ts
 * isModulePath("./my-eval.mjs:evaluate"); // true
 * isModulePath("test_on_output");         // false
 * ```
 */
export function isModulePath(value: string): boolean {
  return value.includes(":") || value.startsWith(".") || value.startsWith("/");
}

/**
 * The message for a strategy that is neither built in nor a module path (null when it is fine).
 *
 * @example
 * ```ts
 * strategyProblem("vibes", EVALUATOR_STRATEGIES);
 * // "'vibes' is not a built-in strategy (session_completed, …) nor a module path ('./file.mjs:export')"
 * ```
 */
export function strategyProblem(value: string, known: readonly string[]): string | null {
  if (known.includes(value) || isModulePath(value)) return null;
  return `'${value}' is not a built-in strategy (${known.join(", ")}) nor a module path ('./file.mjs:export')`;
}
