/**
 * The `shell` harness: runs `agent.custom_shell.command` with `bash -lc` in the session's
 * workspace, the model reachable through the proxy under the session key.
 *
 * @module
 */
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { quote } from "shell-quote";
import type { SessionAssignment } from "../../protocol";
import { SessionFailure } from "../errors";
import type { CommandResult, LocalRuntime } from "../runtime/local";
import { baseEnv } from "./env";

/** Placeholder in `custom_shell.command` replaced by the shell-quoted instruction. */
export const INSTRUCTION_PLACEHOLDER = "{{INSTRUCTION}}";

/** Everything a harness needs to run one session. */
export interface HarnessContext {
  session: SessionAssignment;
  runtime: LocalRuntime;
  /** Proxy base URL (without `/v1`). */
  proxyUrl: string;
  /** The session's API key on the proxy. */
  sessionKey: string;
  /** Model name the harness should ask for. */
  model: string;
  signal: AbortSignal;
}

/**
 * Replaces every `{{INSTRUCTION}}` with the instruction quoted for bash, so quotes, `$`, backticks
 * and newlines in the instruction reach the command as one literal argument.
 *
 * @example
 * ```ts
 * renderShellCommand("node ask.js {{INSTRUCTION}}", "it's $5"); // node ask.js "it's \$5"
 * ```
 */
export function renderShellCommand(command: string, instruction: string): string {
  return command.split(INSTRUCTION_PLACEHOLDER).join(quote([instruction]));
}

/**
 * The harness's environment: allow-listed host variables, then the task's `runtime.env`,
 * `agent.env` and `custom_shell.env`, then the session's wiring. The wiring comes last on purpose:
 * a task variable must not route the harness around the recording proxy.
 *
 * @example
 * ```ts
 * const env = shellHarnessEnv(ctx); // env.OPENAI_BASE_URL === `${ctx.proxyUrl}/v1`
 * ```
 */
export function shellHarnessEnv(
  ctx: Omit<HarnessContext, "signal" | "runtime"> & {
    runtime: { sessionDir: string; workspace: string; logsDir: string };
  },
): Record<string, string> {
  const { session } = ctx;
  return {
    ...baseEnv(),
    ...(session.runtime?.env ?? {}),
    ...session.agent.env,
    ...(session.agent.custom_shell?.env ?? {}),
    POLAR_INSTRUCTION: session.instruction,
    POLAR_SESSION_ID: session.session_id,
    POLAR_TASK_ID: session.task_id,
    POLAR_SESSION_DIR: ctx.runtime.sessionDir,
    POLAR_WORKSPACE: ctx.runtime.workspace,
    POLAR_LOGS_DIR: ctx.runtime.logsDir,
    OPENAI_BASE_URL: `${ctx.proxyUrl}/v1`,
    OPENAI_API_KEY: ctx.sessionKey,
    OPENAI_MODEL: ctx.model,
  };
}

/**
 * Runs the shell harness to completion (or until `ctx.signal` aborts, which kills its process
 * group). Writes `instruction.txt` into the session folder first.
 *
 * @example
 * ```ts
 * const result = await runShellHarness(ctx);
 * if (result.exitCode !== 0) // agent failure
 * ```
 */
export async function runShellHarness(ctx: HarnessContext): Promise<CommandResult> {
  const shell = ctx.session.agent.custom_shell;
  if (!shell) throw new SessionFailure("infra", "agent.custom_shell: required when harness is 'shell'");
  await writeFile(path.join(ctx.runtime.sessionDir, "instruction.txt"), ctx.session.instruction);
  return ctx.runtime.exec(renderShellCommand(shell.command, ctx.session.instruction), {
    env: shellHarnessEnv(ctx),
    cwd: shell.cwd,
    signal: ctx.signal,
    logName: "harness",
  });
}
