/**
 * `polar conformance --harness NAME`: is this harness safe to train on? Runs the harness on a
 * scripted multi-turn task against the simulated engine through the proxy in token mode
 * (engine `sglang`) and prints per-turn bridge verdicts and whether it honours sampling
 * parameters, streams, rewrites or compacts its history (see `proxy/conformance.ts`).
 *
 * The harness is resolved through the gateway's registry (`shell`, presets, or a custom module)
 * and its plan is run on this machine without a sandbox: files written, steps run with `bash -c`
 * and the session wiring (every base URL → the proxy, every key → the session key). `shell`
 * defaults to the scripted client in `examples/conformance/`; presets need their CLI installed.
 *
 * @module
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { execa } from "execa";
import { parse as parseYaml } from "yaml";
import { type HarnessPlan, type PlanContext, resolveHarness, wiringEnv } from "../../gateway-agent/harness";
import type { SessionAssignment } from "../../protocol";
import {
  type ConformanceReport,
  conformanceReport,
  type ExpectedSampling,
  formatConformance,
} from "../../proxy/conformance";
import { startProxy } from "../../proxy/server";
import { startSimEngine } from "../../sim/server";
import { UsageError } from "../usage-error";

/** The scripted client `shell` runs when no command is given. */
export const DEFAULT_SHELL_COMMAND = "npx tsx examples/conformance/scripted-client.ts";
/** Default instruction handed to the harness. */
export const DEFAULT_INSTRUCTION = "What is 17 * 23? Then: what is 6 * 7? Use the calculator tool.";
/** Longest a harness may run in a conformance check (ms). */
export const CONFORMANCE_TIMEOUT_MS = 300_000;

/** Options of {@link runConformance}, as commander parses them. */
export interface ConformanceOptions {
  harness?: string;
  /** `shell`: the command to run (default {@link DEFAULT_SHELL_COMMAND}). */
  command?: string;
  /** YAML/JSON task file: `{harness, command?, instruction?, env?, sampling?}`. */
  task?: string;
  /** Expected sampling sent to the harness as `POLAR_TEMPERATURE` / `POLAR_TOP_P` and checked. */
  temperature?: number | string;
  topP?: number | string;
  json?: boolean;
  /** Extra environment for the harness (tests). */
  env?: Record<string, string>;
}

interface ConformanceTask {
  harness: string;
  command: string | undefined;
  instruction: string;
  env: Record<string, string>;
  sampling: ExpectedSampling;
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
  const fileSampling = (file.sampling ?? {}) as Record<string, unknown>;
  const temperature = num(
    opts.temperature ?? (fileSampling.temperature as number | undefined),
    "--temperature",
  );
  const topP = num(opts.topP ?? (fileSampling.top_p as number | undefined), "--top-p");
  const env = { ...((file.env as Record<string, string> | undefined) ?? {}), ...(opts.env ?? {}) };
  return {
    harness,
    command: opts.command ?? (typeof file.command === "string" ? file.command : undefined),
    instruction: typeof file.instruction === "string" ? file.instruction : DEFAULT_INSTRUCTION,
    env,
    sampling: {
      ...(temperature !== undefined ? { temperature } : {}),
      ...(topP !== undefined ? { top_p: topP } : {}),
    },
  };
}

/** A session assignment with just what harness plans read. */
function assignment(task: ConformanceTask, sessionId: string): SessionAssignment {
  return {
    session_id: sessionId,
    task_id: "conformance",
    instruction: task.instruction,
    agent: {
      harness: task.harness,
      env: {},
      ...(task.harness === "shell"
        ? { custom_shell: { command: task.command ?? DEFAULT_SHELL_COMMAND, env: {} } }
        : {}),
    },
  } as unknown as SessionAssignment;
}

async function runPlan(plan: HarnessPlan, ctx: PlanContext, env: Record<string, string>): Promise<void> {
  for (const f of plan.files) {
    await mkdir(path.dirname(f.path), { recursive: true });
    await writeFile(f.path, f.content);
  }
  await mkdir(path.join(ctx.sessionPath, "home"), { recursive: true });
  await mkdir(path.join(ctx.sessionPath, "logs", "agent"), { recursive: true });
  await writeFile(path.join(ctx.sessionPath, "instruction.txt"), ctx.session.instruction);
  const fullEnv = {
    PATH: process.env.PATH ?? "",
    ...plan.env,
    ...env,
    ...wiringEnv(ctx),
    // npx needs its cache; HOME is the session's own folder.
    npm_config_cache: path.join(ctx.sessionPath, "npm-cache"),
    POLAR_INSTRUCTION: ctx.session.instruction,
  };
  for (const step of plan.steps) {
    const r = await execa("bash", ["-c", step.command], {
      cwd: step.cwd ?? process.cwd(),
      env: fullEnv,
      extendEnv: false,
      reject: false,
      timeout: CONFORMANCE_TIMEOUT_MS,
      all: true,
    });
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
  const harness = await resolveHarness(assignment(task, "probe").agent).catch((err: Error) => {
    throw new UsageError(`--harness: ${err.message}`);
  });
  const quiet = { info() {}, warn() {}, error() {} };
  const sim = await startSimEngine({});
  const proxy = await startProxy({
    engine: "sglang",
    engineUrl: sim.url,
    modelServed: "Qwen/Qwen3-0.6B",
    logger: quiet,
  });
  const dir = await mkdtemp(path.join(tmpdir(), "polar-conformance-"));
  try {
    const sessionId = "conformance-1";
    const { key } = proxy.openSession(sessionId, { task_id: "conformance", harness: task.harness });
    const session = assignment(task, sessionId);
    const ctx: PlanContext = {
      session,
      model: "Qwen/Qwen3-0.6B",
      proxyUrl: proxy.url,
      sessionKey: key,
      sessionPath: dir,
      workdir: process.cwd(),
    };
    const env: Record<string, string> = {
      ...task.env,
      ...(task.sampling.temperature !== undefined
        ? { POLAR_TEMPERATURE: String(task.sampling.temperature) }
        : {}),
      ...(task.sampling.top_p !== undefined ? { POLAR_TOP_P: String(task.sampling.top_p) } : {}),
    };
    await runPlan(harness(ctx), ctx, env);
    const report = conformanceReport(task.harness, proxy.completions(sessionId), task.sampling);
    console.log(opts.json ? JSON.stringify(report, null, 2) : formatConformance(report));
    return report;
  } finally {
    await proxy.close();
    await sim.close();
    await rm(dir, { recursive: true, force: true });
  }
}
