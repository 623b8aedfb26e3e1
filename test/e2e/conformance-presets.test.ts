/**
 * `polar conformance` for every harness preset that `scripts/install-harnesses.sh` installs, with
 * the real CLIs: each one, installed on demand under `.polar/harnesses` (`ensureHarnesses`, as in
 * test/e2e/harnesses.test.ts), runs the calculator example's bug fix against the simulated engine
 * through a token-mode proxy, and the report must show a multi-turn tool session in the CLI's own
 * API family with a verdict on every turn and no reasoning dropped. Where the CLIs cannot be
 * installed (no npm registry) the suites are skipped, and fail under POLAR_TEST_REQUIRE_ALL=1.
 * mini_swe_agent comes from PyPI, which the install script does not use; the missing-CLI error of
 * every preset, that one included, is cli/commands/conformance.test.ts's.
 */
import { expect, it } from "vitest";
import { runConformance } from "../../cli/commands/conformance";
import { ensureHarnesses } from "../../scripts/ensure-harnesses";
import { DEFAULT_HARNESS_DIR, HARNESS_NAMES, type HarnessName } from "../../scripts/run-harnesses";
import { describeEachWith, harnessClis } from "../support/optional-tools";

/** The API family each CLI speaks, as the pinned versions were seen. */
const API: Record<HarnessName, string> = {
  claude_code: "anthropic",
  codex: "openai_responses",
  qwen_code: "openai_chat",
  opencode: "openai_chat",
  gemini_cli: "google",
  pi: "openai_chat",
  copilot_cli: "openai_responses",
  cline: "openai_chat",
};

// Installed once, at collection (a no-op when .polar/harnesses has them at their pinned versions).
const install = await ensureHarnesses(HARNESS_NAMES, { log: (line) => console.log(line) });
const NEEDS = [harnessClis(install)];

const quietly = async <T>(fn: () => Promise<T>): Promise<T> => {
  const log = console.log;
  console.log = () => {};
  try {
    return await fn();
  } finally {
    console.log = log;
  }
};

describeEachWith(NEEDS, HARNESS_NAMES)("polar conformance --harness %s", (name) => {
  it("runs the real CLI: a multi-turn tool session in its API family, a verdict on every turn", async () => {
    const report = await quietly(() => runConformance({ harness: name, harnessDir: DEFAULT_HARNESS_DIR }));
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
