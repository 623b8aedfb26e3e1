/**
 * The harness contract: a harness turns a session into a {@link HarnessPlan} (install step,
 * config files, environment, commands), and {@link runHarnessPlan} executes it in the session's
 * runtime in three timed stages — `setup` (files, install), `exec` (the commands, first non-zero
 * exit stops), `postprocess` (best-effort log collection, always run). Plans are plain data, so
 * each preset is unit-tested without running its CLI.
 *
 * @module
 */
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import type { SessionAssignment, StepOf } from "../../protocol";
import { SessionFailure } from "../errors";
import { hostPathOf } from "../runtime/prepare";
import type { CommandResult, Runtime } from "../runtime/types";

/** A command of a plan. */
export interface PlanStep {
  command: string;
  /** Working directory inside the sandbox (default: the runtime's workdir). */
  cwd?: string;
}

/** What a harness will do for one session. */
export interface HarnessPlan {
  /** Name used for logs (`logs/agent/<name>.*`). */
  name: string;
  /** Install command (pinned version; skipped when the CLI is already there), or null. */
  install: string | null;
  /** Files written before the run; paths are inside the session folder (`ctx.sessionPath/...`). */
  files: Array<{ path: string; content: string }>;
  /** Environment of every step, on top of the session wiring. */
  env: Record<string, string>;
  steps: PlanStep[];
  /** Best-effort commands after the run (collect the CLI's own logs into `AGENT_LOG_DIR`). */
  postprocess: PlanStep[];
  /** Host folders copied into the sandbox before the run (skills). */
  uploads?: Array<{ source: string; target: string }>;
}

/** What a plan is built from. */
export interface PlanContext {
  session: SessionAssignment;
  /** Model name the harness asks for (the proxy forces the served one anyway). */
  model: string;
  /** Proxy base URL as the sandbox reaches it (no `/v1`). */
  proxyUrl: string;
  /** The session's proxy key: every API key the harness sees is this. */
  sessionKey: string;
  /** Session folder inside the sandbox. */
  sessionPath: string;
  /** Default working directory inside the sandbox. */
  workdir: string;
}

/** A harness: a preset, `shell`, or a custom module's export. */
export type Harness = (ctx: PlanContext) => HarnessPlan;

/** Steps of a harness run: the steps of the RUNNING stage (`protocol/stage.ts`). */
export type HarnessStage = StepOf<"RUNNING">;

/** How a harness run ended. */
export interface AgentRunResult {
  status: "completed" | "failed" | "interrupted";
  exitCode: number | null;
  signal: string | null;
  /** The step that failed (`setup` for install/config failures). */
  failedAt?: string;
  /** The runtime's resource limit that ended the step, if one did. */
  limitHit?: string;
}

/**
 * Paths every plan uses: HOME, instruction file and log folder inside the sandbox.
 *
 * @example
 * ```ts
 * const { home, instructionFile } = sessionPaths(ctx);
 * ```
 */
export function sessionPaths(ctx: Pick<PlanContext, "sessionPath">) {
  const p = ctx.sessionPath;
  return {
    home: `${p}/home`,
    instructionFile: `${p}/instruction.txt`,
    logsDir: `${p}/logs`,
    agentLogDir: `${p}/logs/agent`,
    artifactsDir: `${p}/artifacts`,
  };
}

/**
 * The session wiring every harness gets: every API family's base URL points at the proxy and
 * every key is the session key (upstream's env names kept), plus the session's folders.
 *
 * @example
 * ```ts
 * wiringEnv(ctx).ANTHROPIC_BASE_URL; // the proxy
 * ```
 */
export function wiringEnv(ctx: PlanContext): Record<string, string> {
  const paths = sessionPaths(ctx);
  const s = ctx.session;
  return {
    HOME: paths.home,
    POLAR_INSTRUCTION_FILE: paths.instructionFile,
    POLAR_SESSION_ID: s.session_id,
    POLAR_TASK_ID: s.task_id,
    POLAR_SESSION_DIR: ctx.sessionPath,
    POLAR_WORKSPACE: ctx.workdir,
    POLAR_LOGS_DIR: paths.logsDir,
    SESSION_ID: s.session_id,
    TASK_ID: s.task_id,
    SESSION_DIR: ctx.sessionPath,
    ARTIFACTS_DIR: paths.artifactsDir,
    LOGS_DIR: paths.logsDir,
    AGENT_LOG_DIR: paths.agentLogDir,
    OPENAI_BASE_URL: `${ctx.proxyUrl}/v1`,
    OPENAI_API_BASE: `${ctx.proxyUrl}/v1`,
    OPENAI_API_KEY: ctx.sessionKey,
    OPENAI_MODEL: ctx.model,
    ANTHROPIC_BASE_URL: ctx.proxyUrl,
    ANTHROPIC_API_KEY: ctx.sessionKey,
    GOOGLE_API_URL: ctx.proxyUrl,
    GOOGLE_GEMINI_BASE_URL: ctx.proxyUrl,
    GOOGLE_API_KEY: ctx.sessionKey,
    GEMINI_API_KEY: ctx.sessionKey,
  };
}

/**
 * The full environment of a harness step: the runtime's base, `runtime.env`, `agent.env`, the
 * preset's own, then the wiring last so no task variable routes the harness around the proxy.
 *
 * @example
 * ```ts
 * const env = harnessEnv(runtime.baseEnv(), ctx, plan);
 * ```
 */
export function harnessEnv(
  base: Record<string, string>,
  ctx: PlanContext,
  plan: Pick<HarnessPlan, "env">,
): Record<string, string> {
  return {
    ...base,
    ...(ctx.session.runtime?.env ?? {}),
    ...ctx.session.agent.env,
    ...plan.env,
    ...wiringEnv(ctx),
    // Linux caps one environment string at 128 KiB (MAX_ARG_STRLEN): a longer instruction would
    // make every spawn fail with E2BIG, so it is only in the file then.
    ...(Buffer.byteLength(ctx.session.instruction) <= MAX_INSTRUCTION_ENV_BYTES
      ? { POLAR_INSTRUCTION: ctx.session.instruction }
      : {}),
  };
}

/** Longest instruction also passed as `POLAR_INSTRUCTION` (bytes); `POLAR_INSTRUCTION_FILE` always has it. */
export const MAX_INSTRUCTION_ENV_BYTES = 64 * 1024;

/** Shell-quotes one word for `bash -c` (single quotes). */
export function sq(word: string): string {
  return `'${word.replace(/'/g, `'\\''`)}'`;
}

/** `"$(cat "$POLAR_INSTRUCTION_FILE")"`: the instruction as one argument, any length, any bytes. */
export const INSTRUCTION_ARG = `"$(cat "$POLAR_INSTRUCTION_FILE")"`;

/** Options of {@link runHarnessPlan}. */
export interface RunPlanOptions {
  runtime: Runtime;
  ctx: PlanContext;
  plan: HarnessPlan;
  /** Aborts the setup and exec stages (session budget, agent budget, cancel). */
  signal: AbortSignal;
  /**
   * Aborts postprocess (the session's own signal): after an agent-budget timeout postprocess
   * still runs to collect logs, as upstream does, unless the whole session is over.
   */
  postSignal?: AbortSignal;
  onStage(stage: HarnessStage): void;
}

/** Longest postprocess may take after the run (ms). */
export const POSTPROCESS_TIMEOUT_MS = 120_000;

function outcome(r: CommandResult, at: string): AgentRunResult | null {
  if (r.interrupted) return { status: "interrupted", exitCode: r.exitCode, signal: r.signal, failedAt: at };
  if (r.exitCode !== 0 || r.limitHit)
    return { status: "failed", exitCode: r.exitCode, signal: r.signal, failedAt: at, limitHit: r.limitHit };
  return null;
}

/**
 * Runs a plan: setup, exec, postprocess (postprocess even after a failure; not after an interrupt
 * of the whole session, whose runtime is being torn down).
 *
 * @example
 * ```ts
 * const result = await runHarnessPlan({ runtime, ctx, plan, signal, onStage: (s) => (stage = s) });
 * ```
 */
export async function runHarnessPlan(o: RunPlanOptions): Promise<AgentRunResult> {
  const { runtime, ctx, plan, signal } = o;
  const paths = sessionPaths(ctx);
  const env = harnessEnv(runtime.baseEnv(), ctx, plan);
  o.onStage("setup");
  for (const dir of [paths.home, paths.agentLogDir, paths.artifactsDir]) {
    const host = hostPathOf(runtime, dir);
    if (host) await mkdir(host, { recursive: true });
  }
  await mkdir(path.join(runtime.logsDir, "agent"), { recursive: true });
  const files = [{ path: paths.instructionFile, content: ctx.session.instruction }, ...plan.files];
  for (const file of files) {
    const host = hostPathOf(runtime, file.path);
    if (!host)
      throw new SessionFailure(
        "infra",
        `harness '${plan.name}': config path '${file.path}' is outside the session`,
      );
    await mkdir(path.dirname(host), { recursive: true });
    await writeFile(host, file.content);
  }
  for (const u of plan.uploads ?? []) await runtime.uploadDir(u.source, u.target);
  if (plan.install) {
    const r = await runtime.exec(plan.install, { env, signal, logName: `agent/${plan.name}.install` });
    const bad = outcome(r, "install");
    if (bad) return bad;
  }
  o.onStage("exec");
  let result: AgentRunResult = { status: "completed", exitCode: 0, signal: null };
  for (const [i, step] of plan.steps.entries()) {
    const r = await runtime.exec(step.command, {
      env,
      cwd: step.cwd,
      signal,
      logName: `agent/${plan.name}.step${String(i).padStart(2, "0")}`,
    });
    const bad = outcome(r, `step ${i}`);
    if (bad) {
      result = bad;
      break;
    }
  }
  if (signal.aborted) result = { ...result, status: "interrupted" };
  const postSignal = o.postSignal ?? signal;
  if (postSignal.aborted) return result;
  o.onStage("postprocess");
  for (const [i, step] of plan.postprocess.entries()) {
    await runtime.exec(step.command, {
      env,
      cwd: step.cwd,
      signal: postSignal,
      timeoutMs: POSTPROCESS_TIMEOUT_MS,
      logName: `agent/${plan.name}.post${String(i).padStart(2, "0")}`,
    });
  }
  return result;
}
