/**
 * Harness registry: which harnesses this gateway can run.
 *
 * @module
 */
import type { AgentSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import type { CommandResult } from "../runtime/local";
import { type HarnessContext, runShellHarness } from "./shell";

export { baseEnv, INHERITED_ENV } from "./env";
export {
  type HarnessContext,
  INSTRUCTION_PLACEHOLDER,
  renderShellCommand,
  runShellHarness,
  shellHarnessEnv,
} from "./shell";

/** Runs one harness for one session. */
export type HarnessRunner = (ctx: HarnessContext) => Promise<CommandResult>;

const HARNESSES: ReadonlyMap<string, HarnessRunner> = new Map([["shell", runShellHarness]]);

/** Harness names this gateway advertises in `hello`. */
export const SUPPORTED_HARNESSES: readonly string[] = [...HARNESSES.keys()];

/**
 * The runner of the task's harness; an unsupported one is an `infra` failure (another gateway
 * with the preset may run it), with a message naming the harness.
 *
 * @example
 * ```ts
 * const run = resolveHarness(session.agent);
 * ```
 */
export function resolveHarness(agent: AgentSpec): HarnessRunner {
  if (agent.import_path !== undefined) {
    throw new SessionFailure(
      "infra",
      `agent.import_path: custom harness imports are not supported by this gateway`,
    );
  }
  const name = agent.harness ?? "";
  const runner = HARNESSES.get(name);
  if (!runner) {
    throw new SessionFailure(
      "infra",
      `agent.harness: '${name}' is not supported by this gateway (supported: ${SUPPORTED_HARNESSES.join(", ")})`,
    );
  }
  return runner;
}
