/**
 * The `shell` harness: runs `agent.custom_shell.command` with `{{INSTRUCTION}}` replaced by the
 * shell-quoted instruction; the instruction is also in `POLAR_INSTRUCTION` and in
 * `instruction.txt` in the session folder (`POLAR_INSTRUCTION_FILE`).
 *
 * @module
 */
import { quote } from "shell-quote";
import { SessionFailure } from "../errors";
import type { Harness } from "./plan";

/** Placeholder in `custom_shell.command` replaced by the shell-quoted instruction. */
export const INSTRUCTION_PLACEHOLDER = "{{INSTRUCTION}}";

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
 * The shell harness's plan: one step, no install, `custom_shell.env` added.
 *
 * @example
 * ```ts
 * const plan = shellHarness(ctx); // plan.steps[0].command has the instruction substituted
 * ```
 */
export const shellHarness: Harness = (ctx) => {
  const shell = ctx.session.agent.custom_shell;
  if (!shell)
    throw new SessionFailure("configuration", "agent.custom_shell: required when harness is 'shell'");
  return {
    name: "shell",
    install: null,
    files: [],
    env: shell.env,
    steps: [{ command: renderShellCommand(shell.command, ctx.session.instruction), cwd: shell.cwd }],
    postprocess: [],
  };
};
