/**
 * `polar conformance` for the harness presets that `scripts/install-harnesses.sh` installs (a
 * selection of presets and model families by default, see DEFAULT_RUNS), with the real CLIs: each one, installed on demand under `.polar/harnesses` (`ensureHarnesses`, as in
 * test/e2e/harnesses.test.ts), runs the calculator example's bug fix against the simulated engine
 * through a token-mode proxy, and the report must show a multi-turn tool session in the CLI's own
 * API family with a verdict on every turn, and whether it drops reasoning. A run on another API
 * family of a preset (`continue_anthropic`) gives its settings in a `--task` file. Where the CLIs cannot be
 * installed (no npm registry) the suites are skipped, and fail under POLAR_TEST_REQUIRE_ALL=1.
 * mini_swe_agent comes from PyPI, which the install script does not use; the missing-CLI error of
 * every preset, that one included, is cli/commands/conformance.test.ts's.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { runConformance } from "../../cli/commands/conformance";
import { ensureHarnesses } from "../../scripts/ensure-harnesses";
import { DEFAULT_HARNESS_DIR, HARNESS_NAMES, type HarnessName, presetsOf } from "../../scripts/run-harnesses";
import { MODEL_FAMILIES, type ModelFamilyName } from "../../tokenizer/families";
import { describeEachWith, harnessClis } from "../support/optional-tools";

/** The API family each CLI speaks, as the pinned versions were seen, and the preset settings of a run. */
const RUNS: Record<HarnessName, { api: string; settings?: Record<string, unknown> }> = {
  claude_code: { api: "anthropic" },
  codex: { api: "openai_responses" },
  qwen_code: { api: "openai_chat" },
  opencode: { api: "openai_chat" },
  gemini_cli: { api: "google" },
  pi: { api: "openai_chat" },
  copilot_cli: { api: "openai_responses" },
  cline: { api: "openai_chat" },
  kilo_code: { api: "openai_chat" },
  continue: { api: "openai_chat" },
  continue_anthropic: { api: "anthropic", settings: { provider: "anthropic" } },
  grok_cli: { api: "openai_chat" },
  nanocoder: { api: "openai_chat" },
};

/** CLIs that send each reply back without the reasoning the proxy returned with it. */
const DROPS_REASONING = new Set<HarnessName>(["continue", "continue_anthropic", "grok_cli", "nanocoder"]);

// Installed once, at collection (a no-op when .polar/harnesses has them at their pinned versions).
const install = await ensureHarnesses(presetsOf(HARNESS_NAMES), { log: (line) => console.log(line) });
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

let scratch: string;
beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), "polar-conformance-runs-"));
});
afterAll(async () => {
  await rm(scratch, { recursive: true, force: true });
});

/** A run with preset settings goes through a `--task` file, as a user would give them. */
async function conformanceOf(name: HarnessName, modelFamily: ModelFamilyName) {
  const { settings } = RUNS[name];
  if (!settings) return runConformance({ harness: name, harnessDir: DEFAULT_HARNESS_DIR, modelFamily });
  const task = path.join(scratch, `${name}.json`);
  await writeFile(task, JSON.stringify({ harness: presetsOf([name])[0], settings }));
  return runConformance({ task, harnessDir: DEFAULT_HARNESS_DIR, modelFamily });
}

/**
 * The runs here, as `preset@family`: the five CLIs of CI's first harness set (one per API family
 * and Qwen Code) on the second model family, DeepSeek V3, and on Qwen3 the one that drops
 * reasoning and the one whose settings come from a `--task` file. Every preset's CLI also runs on
 * Qwen3 end to end through the whole stack in test/e2e/harnesses.test.ts, so the rest would repeat
 * those runs for this command's report only. `POLAR_E2E_CONFORMANCE=all` runs every preset on both
 * families (a comma list of `preset` or `preset@family` picks some; a bare preset runs on Qwen3).
 */
const DEFAULT_RUNS = [
  "claude_code@deepseek_v3",
  "codex@deepseek_v3",
  "qwen_code@deepseek_v3",
  "gemini_cli@deepseek_v3",
  "pi@deepseek_v3",
  "nanocoder@qwen3",
  "continue_anthropic@qwen3",
];
const PICKED = process.env.POLAR_E2E_CONFORMANCE;
const PICKS: string[] =
  PICKED === "all"
    ? MODEL_FAMILIES.flatMap((family) => HARNESS_NAMES.map((name) => `${name}@${family}`))
    : PICKED
      ? PICKED.split(",")
      : DEFAULT_RUNS;
/** `preset@family` as the check's flags. */
const flagsOf = (pick: string) => {
  const [name, family = "qwen3"] = pick.split("@") as [HarnessName, ModelFamilyName?];
  return `${name} --model-family ${family}`;
};

describeEachWith(NEEDS, PICKS.map(flagsOf))("polar conformance --harness %s", (flags) => {
  const [name, , family] = flags.split(" ") as [HarnessName, string, ModelFamilyName];
  it("runs the real CLI: a multi-turn tool session in its API family, a verdict on every turn", async () => {
    const report = await quietly(() => conformanceOf(name, family));
    expect(report.harness).toBe(presetsOf([name])[0]);
    expect(report.model_family).toBe(family);
    expect(report.turns.length).toBeGreaterThanOrEqual(3);
    expect(new Set(report.turns.map((t) => t.api))).toEqual(new Set([RUNS[name].api]));
    expect(report.turns[0]!.verdict).toBe("new_chain");
    // Every CLI here keeps its history append-only; OpenCode's title request is a chain of its own.
    expect(report.rewrites_history).toBe(false);
    expect(report.compacts_history).toBe(false);
    expect(report.chains).toBe(name === "opencode" ? 2 : 1);
    expect(report.safe_to_train).toBe(name !== "opencode");
    // Continue, Grok CLI and Nanocoder send replies back without the reasoning the proxy returned;
    // DeepSeek V3 returns none, so there is none to drop.
    expect(report.drops_reasoning).toBe(family === "qwen3" && DROPS_REASONING.has(name));
    for (const t of report.turns) expect(["new_chain", "extended"]).toContain(t.verdict);
  }, 200_000);
});
