/**
 * `polar conformance --harness NAME`: is this harness safe to train on? Runs the harness on a
 * scripted multi-turn task against the simulated engine through the proxy in token mode
 * (engine `sglang`) and prints per-turn bridge verdicts and whether it honours sampling
 * parameters, streams, rewrites or compacts its history (see `proxy/conformance.ts`).
 *
 * The harness is resolved through the gateway's registry (`shell` or a preset) and its plan is
 * built from a session assignment parsed by the same schema the gateway receives (so every field a
 * preset reads, `agent.settings` and `agent.mcp_servers` included, has its default), then run on
 * this machine without a sandbox: files written, steps run with `bash -c` in the session
 * environment the gateway would give (allow-listed variables, the harness folder's `bin/` first on
 * PATH, every base URL → the proxy, every key → the session key). `shell` defaults to the scripted
 * client in `examples/conformance/`, run from the current folder. A preset runs its real CLI on the
 * calculator example's bug fix, in a scratch copy of `examples/calculator/repo`; the CLI must be
 * installed (`scripts/install-harnesses.sh NAME` into `POLAR_HARNESS_DIR`, default
 * `.polar/harnesses`), else the check stops at once naming the binary and the install command.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { cp, mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { execa } from "execa";
import { parse as parseYaml } from "yaml";
import {
  baseEnv,
  HARNESS_DIR_ENV,
  type HarnessPlan,
  harnessEnv,
  installCommand,
  type PlanContext,
  PRESET_PACKAGES,
  type PresetName,
  resolveHarness,
  SUPPORTED_HARNESSES,
} from "../../gateway-agent/harness";
import { describeIssues, fieldIssues, SamplingPolicy, SessionAssignment } from "../../protocol";
import {
  type ConformanceReport,
  conformanceReport,
  type ExpectedSampling,
  formatConformance,
} from "../../proxy/conformance";
import { startProxy } from "../../proxy/server";
import { startSimEngine } from "../../sim/server";
import { type ModelFamily, modelFamily, UnknownModelFamilyError } from "../../tokenizer/families";
import { loadTaskFile } from "../task-file";
import { UsageError } from "../usage-error";
import { REPO_ROOT } from "../wrangler-dev";

/** The scripted client `shell` runs when no command is given. */
export const DEFAULT_SHELL_COMMAND = "npx tsx examples/conformance/scripted-client.ts";
/** Default instruction handed to the harness. */
export const DEFAULT_INSTRUCTION = "What is 17 * 23? Then: what is 6 * 7? Use the calculator tool.";
/** Longest a harness may run in a conformance check (ms). */
export const CONFORMANCE_TIMEOUT_MS = 300_000;
/** The repository a preset works on: the calculator example's (copied; the original is untouched). */
export const PRESET_REPO = path.join(REPO_ROOT, "examples", "calculator", "repo");
/** The family a check runs (`--model-family`, default `qwen3`): its model name is what the harnesses are given. */
function familyOf(opts: ConformanceOptions): ModelFamily {
  try {
    return modelFamily(opts.modelFamily ?? "qwen3");
  } catch (err) {
    if (err instanceof UnknownModelFamilyError) throw new UsageError(`--model-family: ${err.message}`);
    throw err;
  }
}

/** The calculator example's instruction: the task a preset is checked on unless told otherwise. */
function presetInstruction(): string {
  return loadTaskFile(path.join(REPO_ROOT, "examples", "calculator", "task.yaml")).tasks[0]!.instruction;
}

const isPreset = (name: string): name is PresetName => Object.hasOwn(PRESET_PACKAGES, name);

/** Options of {@link runConformance}, as commander parses them. */
export interface ConformanceOptions {
  harness?: string;
  /** `shell`: the command to run (default {@link DEFAULT_SHELL_COMMAND}). */
  command?: string;
  /** YAML/JSON task file: `{harness, command?, instruction?, env?, sampling?, settings?}`. */
  task?: string;
  /** Expected sampling sent to the harness as `POLAR_TEMPERATURE` / `POLAR_TOP_P` and checked. */
  temperature?: number | string;
  topP?: number | string;
  /** The task's `agent.sampling.temperature`: the proxy samples with it whatever the harness sends. */
  samplingTemperature?: number | string;
  json?: boolean;
  /** Extra environment for the harness (tests). */
  env?: Record<string, string>;
  /** Token mode's model family (`qwen3` default): the simulated engine serves it, the proxy renders it. */
  modelFamily?: string;
  /** Folder of pre-installed CLIs (`<dir>/bin`); default `POLAR_HARNESS_DIR`, else `.polar/harnesses`. */
  harnessDir?: string;
}

interface ConformanceTask {
  harness: string;
  command: string | undefined;
  instruction: string;
  env: Record<string, string>;
  sampling: ExpectedSampling;
  /** The task's sampling policy (`agent.sampling`), applied by the proxy; empty when none. */
  policy: SamplingPolicy;
  /** `agent.settings` of the session (a preset's options, e.g. `continue`'s `provider`). */
  settings: Record<string, unknown>;
}

function num(value: number | string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isFinite(n) || n < 0) throw new UsageError(`${flag}: must be a number >= 0, got '${value}'`);
  return n;
}

async function taskFrom(opts: ConformanceOptions): Promise<ConformanceTask> {
  let file: Record<string, unknown> = {};
  if (opts.task) {
    let text: string;
    try {
      text = await readFile(opts.task, "utf8");
    } catch (err) {
      throw new UsageError(`--task: cannot read ${opts.task}: ${(err as Error).message}`);
    }
    const parsed = parseYaml(text) as unknown;
    if (!parsed || typeof parsed !== "object" || Array.isArray(parsed))
      throw new UsageError(`--task: ${opts.task} must hold a mapping`);
    file = parsed as Record<string, unknown>;
  }
  const harness = opts.harness ?? (typeof file.harness === "string" ? file.harness : undefined);
  if (!harness) throw new UsageError("--harness: required (or `harness:` in the --task file)");
  if (!SUPPORTED_HARNESSES.includes(harness))
    throw new UsageError(
      `--harness: '${harness}' is not supported (supported: ${SUPPORTED_HARNESSES.join(", ")})`,
    );
  const fileSampling = (file.sampling ?? {}) as Record<string, unknown>;
  const temperature = num(
    opts.temperature ?? (fileSampling.temperature as number | undefined),
    "--temperature",
  );
  const topP = num(opts.topP ?? (fileSampling.top_p as number | undefined), "--top-p");
  const env = { ...((file.env as Record<string, string> | undefined) ?? {}), ...(opts.env ?? {}) };
  const policyTemperature = num(opts.samplingTemperature, "--sampling-temperature");
  const filePolicy = SamplingPolicy.safeParse(file.agent_sampling ?? {});
  if (!filePolicy.success)
    throw new UsageError(`--task: agent_sampling: ${describeIssues(fieldIssues(filePolicy.error))}`);
  const settings = file.settings ?? {};
  if (typeof settings !== "object" || settings === null || Array.isArray(settings))
    throw new UsageError(`--task: settings in ${opts.task} must be a mapping (the preset's agent.settings)`);
  return {
    harness,
    command: opts.command ?? (typeof file.command === "string" ? file.command : undefined),
    instruction:
      typeof file.instruction === "string"
        ? file.instruction
        : isPreset(harness)
          ? presetInstruction()
          : DEFAULT_INSTRUCTION,
    env,
    sampling: {
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { top_p: topP } : {}),
    },
    policy: {
      ...filePolicy.data,
      ...(policyTemperature !== undefined ? { temperature: policyTemperature } : {}),
    },
    settings: settings as Record<string, unknown>,
  };
}

/**
 * The session a harness plan is built from, parsed by the gateway's own schema: a preset reads
 * `agent.settings`, `agent.mcp_servers` and `agent.env`, which only the schema's defaults fill in.
 */
function assignment(task: ConformanceTask, sessionId: string): SessionAssignment {
  return SessionAssignment.parse({
    session_id: sessionId,
    batch_id: "conformance",
    task_id: "conformance",
    attempt: 1,
    instruction: task.instruction,
    timeout_seconds: CONFORMANCE_TIMEOUT_MS / 1000,
    runtime: null,
    agent: {
      harness: task.harness,
      settings: task.settings,
      ...(task.harness === "shell"
        ? { custom_shell: { command: task.command ?? DEFAULT_SHELL_COMMAND, env: {} } }
        : {}),
      ...(Object.keys(task.policy).length ? { sampling: task.policy } : {}),
    },
    builder: { strategy: "conversation" },
    evaluator: null,
    metadata: {},
    dispatch_priority: 0,
  });
}

/** A harness's plan for one check, with the environment and folder its steps run in. */
export interface ConformancePlan {
  ctx: PlanContext;
  plan: HarnessPlan;
  /** The whole environment of every step. */
  env: Record<string, string>;
  /** Where steps run: the scratch repository for a preset, the current folder for `shell`. */
  cwd: string;
}

/**
 * Builds the plan of a check: the session, the harness's plan for it and the step environment
 * (the gateway's allow-listed base with the harness folder's `bin/` first on PATH, then the plan's
 * own, the extra `env`, the session wiring). Writes nothing.
 *
 * @example
 * ```ts
 * const { plan } = await conformancePlan({ harness: "qwen_code" }, { proxyUrl, sessionKey, sessionPath });
 * plan.steps[0].command; // "set -o pipefail; qwen -p … --yolo --auth-type openai …"
 * ```
 */
export async function conformancePlan(
  opts: ConformanceOptions,
  at: { proxyUrl: string; sessionKey: string; sessionPath: string; sessionId?: string },
): Promise<ConformancePlan> {
  const task = await taskFrom(opts);
  const session = assignment(task, at.sessionId ?? "conformance-1");
  const harness = await resolveHarness(session.agent).catch((err: Error) => {
    throw new UsageError(`--harness: ${err.message}`);
  });
  const preset = isPreset(task.harness);
  const cwd = preset ? path.join(at.sessionPath, "workspace") : process.cwd();
  const ctx: PlanContext = {
    session,
    model: familyOf(opts).model,
    proxyUrl: at.proxyUrl,
    sessionKey: at.sessionKey,
    sessionPath: at.sessionPath,
    workdir: cwd,
  };
  const plan = harness(ctx);
  const dir = opts.harnessDir ?? process.env[HARNESS_DIR_ENV] ?? path.join(REPO_ROOT, ".polar", "harnesses");
  const sampling: Record<string, string> = {
    ...(task.sampling.temperature !== undefined
      ? { POLAR_TEMPERATURE: String(task.sampling.temperature) }
      : {}),
    ...(task.sampling.top_p !== undefined ? { POLAR_TOP_P: String(task.sampling.top_p) } : {}),
  };
  const env = {
    ...harnessEnv(baseEnv({ ...process.env, [HARNESS_DIR_ENV]: dir }), ctx, {
      env: { ...plan.env, ...task.env, ...sampling },
    }),
    // npx needs its cache; HOME is the session's own folder.
    npm_config_cache: path.join(at.sessionPath, "npm-cache"),
  };
  return { ctx, plan, env, cwd };
}

/** The preset's CLI, or null when the step environment's PATH has it. */
function missingCli(harness: string, env: Record<string, string>): string | null {
  if (!isPreset(harness)) return null;
  const { bin } = PRESET_PACKAGES[harness];
  const found = (env.PATH ?? "").split(":").some((d) => d && existsSync(path.join(d, bin)));
  if (found) return null;
  const p = PRESET_PACKAGES[harness];
  const how =
    p.via === "npm"
      ? `scripts/install-harnesses.sh ${harness} (installs ${p.pkg}@${p.version} into .polar/harnesses; another folder: ${HARNESS_DIR_ENV}=DIR)`
      : installCommand(harness, p.version).split(" || ")[1];
  return `--harness: ${harness} needs its CLI '${bin}', which is not on PATH nor in the harness folder; install it: ${how}`;
}

async function runPlan({ plan, ctx, env, cwd }: ConformancePlan): Promise<void> {
  for (const f of plan.files) {
    await mkdir(path.dirname(f.path), { recursive: true });
    await writeFile(f.path, f.content);
  }
  await mkdir(path.join(ctx.sessionPath, "home"), { recursive: true });
  await mkdir(path.join(ctx.sessionPath, "logs", "agent"), { recursive: true });
  await writeFile(path.join(ctx.sessionPath, "instruction.txt"), ctx.session.instruction);
  if (cwd !== process.cwd()) {
    await cp(PRESET_REPO, cwd, { recursive: true });
    // Some CLIs look for a repository root (Codex, Gemini CLI's git-aware tools).
    await execa("git", ["init", "-q"], { cwd, reject: false });
  }
  for (const step of plan.steps) {
    const proc = execa("bash", ["-c", step.command], {
      cwd: step.cwd ?? cwd,
      env,
      extendEnv: false,
      // As in a session: no terminal and nothing on stdin (Pi and Codex would wait to read it).
      stdin: "ignore",
      reject: false,
      timeout: CONFORMANCE_TIMEOUT_MS,
      all: true,
      // Its own process group, ended whole below: a CLI may leave a child behind (Cline's writes
      // into home/.cline/data after the CLI exits), which would race the folder's removal.
      // In a gateway session bubblewrap's PID namespace does this; here nothing else would.
      detached: true,
    });
    const r = await proc;
    if (proc.pid !== undefined) {
      try {
        process.kill(-proc.pid, "SIGKILL");
      } catch {
        // ESRCH: the group is already gone.
      }
    }
    if (r.exitCode !== 0) {
      throw new Error(
        `harness step failed (exit ${r.exitCode}): ${step.command}\n${String(r.all ?? "").slice(-2000)}`,
      );
    }
  }
}

/**
 * Runs the check and prints the table (or JSON); returns the report.
 *
 * @example
 * ```ts
 * const report = await runConformance({ harness: "shell", temperature: 0.6 });
 * report.safe_to_train; // true for the scripted append-only client
 * ```
 */
export async function runConformance(opts: ConformanceOptions): Promise<ConformanceReport> {
  const task = await taskFrom(opts);
  const family = familyOf(opts);
  const quiet = { info() {}, warn() {}, error() {} };
  const dir = await mkdtemp(path.join(tmpdir(), "polar-conformance-"));
  const sim = await startSimEngine({ modelFamily: family.name });
  const proxy = await startProxy({
    engine: "sglang",
    engineUrl: sim.url,
    modelServed: family.model,
    modelFamily: family.name,
    logger: quiet,
  });
  try {
    const sessionId = "conformance-1";
    const { key } = proxy.openSession(sessionId, {
      task_id: "conformance",
      harness: task.harness,
      // As the gateway hands a task's agent.sampling over: the proxy applies it on every turn.
      ...(Object.keys(task.policy).length ? { sampling: task.policy } : {}),
    });
    const prepared = await conformancePlan(opts, {
      proxyUrl: proxy.url,
      sessionKey: key,
      sessionPath: dir,
      sessionId,
    });
    const missing = missingCli(task.harness, prepared.env);
    if (missing) throw new UsageError(missing);
    await runPlan(prepared);
    const report = conformanceReport(task.harness, proxy.completions(sessionId), task.sampling, family.name);
    console.log(opts.json ? JSON.stringify(report, null, 2) : formatConformance(report));
    return report;
  } finally {
    await proxy.close();
    await sim.close();
    // Retries: a process of the group may still be closing files as the kill lands (ENOTEMPTY).
    await rm(dir, { recursive: true, force: true, maxRetries: 5, retryDelay: 200 });
  }
}
