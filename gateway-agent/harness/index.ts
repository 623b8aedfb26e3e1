/**
 * Harness registry: `shell`, the presets, or a custom harness module (`agent.import_path`
 * `./module.mjs:exportName`, the export being a {@link Harness}: plan context in, plan out).
 *
 * @module
 */
import { type AgentSpec, HARNESS_NAMES, type HarnessNameValue } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";
import { importByPath } from "../runtime";
import type { Harness } from "./plan";
import { PRESETS } from "./presets";
import { shellHarness } from "./shell";

export { HarnessAvailability, type HarnessCheck } from "./availability";
export { baseEnv, HARNESS_DIR_ENV, harnessDir, INHERITED_ENV } from "./env";
export * from "./plan";
export {
  installCommand,
  OFFLINE_KNOBS,
  PRESET_PACKAGES,
  PRESETS,
  PROVIDER,
  type PresetName,
} from "./presets";
export { INSTRUCTION_PLACEHOLDER, renderShellCommand, shellHarness } from "./shell";

// Typed against the shared list: every name the control plane accepts has a harness here.
const BUILTIN: Record<HarnessNameValue, Harness> = { shell: shellHarness, ...PRESETS };
const HARNESSES: ReadonlyMap<string, Harness> = new Map(Object.entries(BUILTIN));

/** Harness names this gateway knows (the shared list of `protocol/names.ts`). */
export const SUPPORTED_HARNESSES: readonly string[] = HARNESS_NAMES;

/**
 * The harness of an `AgentSpec`. An unknown name or a failing import is a `configuration` failure
 * naming the field.
 *
 * @example
 * ```ts
 * const harness = await resolveHarness(session.agent);
 * const plan = harness(ctx);
 * ```
 */
export async function resolveHarness(agent: AgentSpec): Promise<Harness> {
  if (agent.import_path !== undefined) {
    const fn = (await importByPath(agent.import_path, "agent.import_path")) as unknown as Harness;
    return (ctx) => {
      try {
        return fn(ctx);
      } catch (err) {
        throw new SessionFailure("configuration", `agent.import_path: harness threw: ${messageOf(err)}`);
      }
    };
  }
  const name = agent.harness ?? "";
  const harness = HARNESSES.get(name);
  if (!harness) {
    throw new SessionFailure(
      "configuration",
      `agent.harness: '${name}' is not supported by this gateway (supported: ${SUPPORTED_HARNESSES.join(", ")})`,
    );
  }
  return harness;
}
