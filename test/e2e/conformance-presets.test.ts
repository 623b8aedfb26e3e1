/**
 * `polar conformance` for every harness preset, with the real CLIs: each one installed under
 * `.polar/harnesses` (scripts/install-harnesses.sh) runs the calculator example's bug fix against
 * the simulated engine through a token-mode proxy, and the report must show a multi-turn tool
 * session in the CLI's own API family with a verdict on every turn and no reasoning dropped. A
 * preset whose CLI is not installed there (mini_swe_agent comes from PyPI, which the install
 * script does not use) must stop at once with the install hint, never crash building its plan.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { runConformance } from "../../cli/commands/conformance";
import { UsageError } from "../../cli/usage-error";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { PRESET_PACKAGES, PRESETS, type PresetName } from "../../gateway-agent/harness";

const HARNESS_DIR = path.join(REPO_ROOT, ".polar", "harnesses");
const installed = (name: PresetName) => existsSync(path.join(HARNESS_DIR, "bin", PRESET_PACKAGES[name].bin));

/** The API family each CLI speaks, as the pinned versions were seen. */
const API: Record<PresetName, string> = {
  claude_code: "anthropic",
  codex: "openai_responses",
  qwen_code: "openai_chat",
  opencode: "openai_chat",
  gemini_cli: "google",
  pi: "openai_chat",
  mini_swe_agent: "openai_chat",
};

const quietly = async <T>(fn: () => Promise<T>): Promise<T> => {
  const log = console.log;
  console.log = () => {};
  try {
    return await fn();
  } finally {
    console.log = log;
  }
};

describe.each(Object.keys(PRESETS) as PresetName[])("polar conformance --harness %s", (name) => {
  it(installed(name)
    ? "runs the real CLI: a multi-turn tool session in its API family, a verdict on every turn"
    : "stops at once without its CLI, naming the binary and the install command", async () => {
    if (!installed(name)) {
      await expect(runConformance({ harness: name, harnessDir: HARNESS_DIR })).rejects.toThrow(UsageError);
      await expect(runConformance({ harness: name, harnessDir: HARNESS_DIR })).rejects.toThrow(
        `needs its CLI '${PRESET_PACKAGES[name].bin}'`,
      );
      return;
    }
    const report = await quietly(() => runConformance({ harness: name, harnessDir: HARNESS_DIR }));
    expect(report.harness).toBe(name);
    expect(report.turns.length).toBeGreaterThanOrEqual(3);
    expect(new Set(report.turns.map((t) => t.api))).toEqual(new Set([API[name]]));
    expect(report.turns[0]!.verdict).toBe("new_chain");
    // Every CLI here keeps its history append-only; OpenCode's title request is a chain of its own.
    expect(report.rewrites_history).toBe(false);
    expect(report.compacts_history).toBe(false);
    expect(report.chains).toBe(name === "opencode" ? 2 : 1);
    expect(report.safe_to_train).toBe(name !== "opencode");
    // None of the six sends a reply back without the reasoning the proxy returned with it.
    expect(report.drops_reasoning).toBe(false);
    for (const t of report.turns) expect(["new_chain", "extended"]).toContain(t.verdict);
  }, 200_000);
});
