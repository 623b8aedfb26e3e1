/**
 * The real harness CLIs end to end, unchanged: each one, installed at its preset's pinned version
 * by scripts/install-harnesses.sh (on demand, once), completes the calculator task
 * with 2 samples (SAMPLES; `scripts/run-harnesses.sh` runs the task files' 4) through the gateway's recording proxy (token mode, `--engine sglang`) against the
 * simulated engine, in the local runtime's bubblewrap sandbox without network. Graded by
 * `test_on_output`; the group's rewards are the mix the scripted policy draws; every turn is
 * token-exact and carries the bridge's verdict.
 *
 * `POLAR_E2E_HARNESSES=pi,qwen_code` runs a subset (default: all of them). Where the CLIs cannot be
 * installed (no npm registry) the harness suites are skipped, and fail under POLAR_TEST_REQUIRE_ALL=1;
 * without bubblewrap they run without the sandbox (plain processes) and say so in the summary.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { PRESET_PACKAGES } from "../../gateway-agent/harness";
import { ensureHarnesses } from "../../scripts/ensure-harnesses";
import {
  checkHarnessRun,
  DEFAULT_HARNESS_DIR,
  HARNESS_NAMES,
  type HarnessName,
  type HarnessRun,
  harnessGatewayArgs,
  presetsOf,
  runHarnesses,
  summarizeHarness,
} from "../../scripts/run-harnesses";
import { agentOutcome } from "../../sim/agent-policy";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { describeEachWith, harnessClis, type Needs, planFor } from "../support/optional-tools";

const HARNESSES = (process.env.POLAR_E2E_HARNESSES?.split(",") ?? [...HARNESS_NAMES]) as HarnessName[];
/**
 * Samples per CLI. The simulated policy stratifies a group over four outcomes in rotation (fix,
 * wrong, fix, none), so any two samples of a group hold one right fix and one that is not: a mix.
 */
const SAMPLES = 2;

/** API family and the tools the policy must drive, per harness, as the pinned CLIs send them. */
const EXPECTED: Record<HarnessName, { api: string; tools: string[] }> = {
  pi: { api: "openai_chat", tools: ["read", "bash", "edit", "write"] },
  qwen_code: { api: "openai_chat", tools: ["run_shell_command", "read_file", "write_file", "edit"] },
  claude_code: { api: "anthropic", tools: ["Bash", "Read", "Edit", "Write"] },
  codex: { api: "openai_responses", tools: ["exec_command"] },
  opencode: { api: "openai_chat", tools: ["bash", "read", "edit", "write"] },
  gemini_cli: { api: "google", tools: ["run_shell_command", "read_file", "replace", "write_file"] },
  copilot_cli: { api: "openai_responses", tools: ["bash", "view", "edit", "create"] },
  cline: { api: "openai_chat", tools: ["run_commands", "editor"] },
  kilo_code: { api: "openai_chat", tools: ["bash", "read", "edit", "write"] },
  continue: { api: "openai_chat", tools: ["Bash", "Read", "Write", "MultiEdit"] },
  continue_anthropic: { api: "anthropic", tools: ["Bash", "Read", "Write", "MultiEdit"] },
  grok_cli: { api: "openai_chat", tools: ["bash", "view_file", "str_replace_editor", "create_file"] },
  nanocoder: { api: "openai_chat", tools: ["execute_bash", "read_file", "diff_edit", "write_file"] },
};

/**
 * CLIs that send every reply back without the reasoning the proxy returned with it (as the pinned
 * versions do): each follow-up turn is flagged `reasoning_dropped`, and the bridge still extends
 * from the sampled ids, so the trace holds the reasoning as sampled.
 */
const DROPS_REASONING: ReadonlySet<HarnessName> = new Set([
  "continue",
  "continue_anthropic",
  "grok_cli",
  "nanocoder",
]);

// Installed once, at collection, so the suites can be skipped (or failed) when the install cannot run.
const install = await ensureHarnesses(presetsOf(HARNESSES), { log: (line) => console.log(line) });
const NEEDS: Needs = {
  require: [harnessClis(install)],
  prefer: [{ tool: "bubblewrap", without: "the CLIs ran without the sandbox" }],
};

let stack: LocalStack;
let tokenizer: ChatTokenizer;
let runs: HarnessRun[];

beforeAll(async () => {
  if (planFor(NEEDS, "").mode !== "run") return;
  process.env.POLAR_HARNESS_DIR = DEFAULT_HARNESS_DIR;
  [stack, tokenizer] = await Promise.all([
    startLocalStack({ gateways: 1, gatewayArgs: harnessGatewayArgs(4) }),
    loadChatTokenizer(),
  ]);
  // Budgets for a loaded CI machine (the suite shares two cores with two other stacks): a CLI that
  // needs 40 s alone took past the task file's 300 s there.
  runs = await runHarnesses({
    harnesses: HARNESSES,
    stack,
    timeoutMs: 1_200_000,
    samples: SAMPLES,
    sessionTimeoutSeconds: 900,
  });
}, 1_260_000);

afterAll(async () => {
  await stack?.stop();
});

const runOf = (h: HarnessName) => runs.find((r) => r.harness === h)!;

describe("install script and presets agree", () => {
  it("scripts/install-harnesses.sh installs exactly the versions the presets pin", () => {
    const script = readFileSync(join(REPO_ROOT, "scripts/install-harnesses.sh"), "utf8");
    const rows = [...script.matchAll(/^ {2}"(\w+) (\S+) (\S+) (\S+)"$/gm)].map((m) => m.slice(1));
    expect(rows.map((r) => r[0]).sort()).toEqual(presetsOf(HARNESS_NAMES).sort());
    for (const [name, pkg, version, bin] of rows) {
      const p = PRESET_PACKAGES[name as keyof typeof PRESET_PACKAGES];
      expect({ name, pkg, version, bin }).toEqual({ name, pkg: p.pkg, version: p.version, bin: p.bin });
    }
    // A CLI that needs another Node gets that Node pinned beside it, at the preset's version.
    const ownNode = [...script.matchAll(/^ {2}"(\w+) (\S+) (\S+)"$/gm)].map((m) => m.slice(1));
    const needNode = Object.entries(PRESET_PACKAGES).flatMap(([name, p]) =>
      "node" in p ? [[name, p.node.pkg, p.node.version]] : [],
    );
    expect(ownNode).toEqual(needNode);
  });
});

describeEachWith(NEEDS, HARNESSES)(`%s on the calculator task × ${SAMPLES}`, (harness) => {
  it("every session completes through the CLI's own API family; rewards are the policy's mix", () => {
    const run = runOf(harness);
    expect(run.sessions.map((s) => s.result.status)).toEqual(Array(SAMPLES).fill("COMPLETED"));
    // Each session scores what the sim's stratified draw gave it: 1 for a right fix, else 0.
    const outcomes = run.sessions.map((s) => agentOutcome(0, s.result.session_id, false));
    expect(outcomes.filter((o) => o === "fix")).toHaveLength(SAMPLES / 2);
    expect(run.sessions.map((s) => s.result.reward)).toEqual(outcomes.map((o) => (o === "fix" ? 1 : 0)));
    expect(summarizeHarness(run).api).toBe(EXPECTED[harness].api);
    const evs = run.sessions.map(
      ({ result }) => (result.trajectory.metadata as { evaluation: Record<string, unknown> }).evaluation,
    );
    for (const ev of evs)
      expect(ev).toMatchObject({
        strategy: "test_on_output",
        fresh_eval_runtime: true,
        verdict: "clean",
        reward_discarded: false,
      });
    // A session that edits nothing scores 0 without running the tests; those with a patch are
    // graded from the JUnit report the runner wrote where only the grader looks, not from printed lines.
    expect(evs.map((ev) => ev.empty_generation === true)).toEqual(outcomes.map((o) => o === "none"));
    for (const ev of evs.filter((e) => !e.empty_generation))
      expect(ev).toMatchObject({ report_mode: "junit", weak_report: false });
  });

  it("the policy acted through the tools the CLI offered", () => {
    for (const { records } of runOf(harness).sessions) {
      const offered = (records.at(-1)!.request.tools as Array<{ function: { name: string } }>).map(
        (t) => t.function.name,
      );
      expect(offered).toEqual(expect.arrayContaining(EXPECTED[harness].tools));
      const called = records.flatMap((r) => {
        const message = (r.response.choices as Array<{ message: { tool_calls?: unknown[] } }>)[0]!.message;
        return ((message.tool_calls ?? []) as Array<{ function: { name: string } }>).map(
          (c) => c.function.name,
        );
      });
      expect(called.length).toBeGreaterThanOrEqual(2);
      for (const name of called) expect(offered).toContain(name);
    }
  });

  it("token-exact: prompt ids decode to the template's render, logprobs aligned, chains add up", () => {
    expect(checkHarnessRun(runOf(harness), tokenizer)).toEqual([]);
  });

  it("every turn has a bridge verdict; the history stays append-only", () => {
    const { verdicts } = summarizeHarness(runOf(harness));
    // A CLI's side conversations (OpenCode's title) are new chains of their own; nothing is rewritten.
    expect(Object.keys(verdicts).sort()).toEqual(["extended", "new_chain"]);
    expect(verdicts.new_chain).toBe((harness === "opencode" ? 2 : 1) * SAMPLES);
  });

  it(
    DROPS_REASONING.has(harness)
      ? "sends each reply back without its reasoning: every follow-up is flagged reasoning_dropped, one trace each"
      : "sends each reply back with the reasoning the proxy returned: no turn is flagged reasoning_dropped",
    () => {
      const run = runOf(harness);
      const drops = DROPS_REASONING.has(harness);
      for (const { result, records } of run.sessions) {
        // Every reply of the simulated policy carries reasoning, so each follow-up had some to send back.
        for (const r of records)
          expect(
            (r.response.choices as Array<{ message: { reasoning_content?: string } }>)[0]!.message
              .reasoning_content,
          ).toBeTruthy();
        expect(result.trajectory.metadata.bridge_flags).toEqual({
          reasoning_dropped: drops ? records.length - 1 : 0,
          image_prompt_unverified: 0,
        });
        // Dropped or not, the session is one token sequence: the bridge kept the sampled reasoning.
        if (drops) expect(result.trajectory.traces).toHaveLength(1);
      }
      const summary = summarizeHarness(run);
      expect(summary.followUps).toBeGreaterThan(0);
      expect(summary.reasoningDropped).toBe(drops ? summary.followUps : 0);
    },
  );
});
