/**
 * Copilot CLI on its two other wires (OpenAI Chat Completions and Anthropic Messages), where it
 * sends `temperature: 0`: with the task's `agent.sampling.temperature: 1` the proxy samples at 1
 * whatever the CLI sends, so the calculator group of four comes out mixed, one trace per session in
 * token mode, and every record says what the CLI asked and what was applied. The Responses wire is
 * in harnesses.test.ts. Skipped (failed under POLAR_TEST_REQUIRE_ALL=1) where the CLI cannot be
 * installed.
 */
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { JsonObject } from "../../protocol";
import { ensureHarnesses } from "../../scripts/ensure-harnesses";
import {
  checkHarnessRun,
  DEFAULT_HARNESS_DIR,
  fetchRecords,
  type HarnessRun,
  harnessGatewayArgs,
  summarizeHarness,
} from "../../scripts/run-harnesses";
import { type ChatTokenizer, loadChatTokenizer } from "../../tokenizer/chat-tokenizer";
import { describeWith, harnessClis, type Needs, planFor } from "../support/optional-tools";

const WIRES = [
  { wire: "completions", api: "openai_chat" },
  { wire: "anthropic", api: "anthropic" },
] as const;

const install = await ensureHarnesses(["copilot_cli"], { log: (line) => console.log(line) });
const NEEDS: Needs = {
  require: [harnessClis(install)],
  prefer: [{ tool: "bubblewrap", without: "the CLI ran without the sandbox" }],
};

let stack: LocalStack;
let tokenizer: ChatTokenizer;
const runs = new Map<string, HarnessRun>();

beforeAll(async () => {
  if (planFor(NEEDS, "").mode !== "run") return;
  process.env.POLAR_HARNESS_DIR = DEFAULT_HARNESS_DIR;
  [stack, tokenizer] = await Promise.all([
    startLocalStack({ gateways: 1, gatewayArgs: harnessGatewayArgs(4) }),
    loadChatTokenizer(),
  ]);
  const tasks = WIRES.map(
    ({ wire }) =>
      loadTaskFile(join(REPO_ROOT, "examples/calculator", `task.copilot_cli.${wire}.yaml`)).tasks[0]!,
  );
  for (const t of tasks) runs.set(t.task_id, { harness: "copilot_cli", task_id: t.task_id, sessions: [] });
  const created = await stack.client.submit({ tasks });
  for await (const { result } of stack.client.streamResults(created.batch_id, { timeoutMs: 400_000 }))
    runs
      .get(result.task_id)!
      .sessions.push({ result, records: await fetchRecords(stack, result.session_id) });
}, 480_000);

afterAll(async () => {
  await stack?.stop();
});

const runOf = (wire: string) => runs.get(`calculator-copilot-cli-${wire}`)!;

describeWith(NEEDS, "Copilot CLI under the task's sampling policy", () => {
  for (const { wire, api } of WIRES) {
    it(`${wire}: a mixed group through ${api}, token-exact, one trace per session`, () => {
      const run = runOf(wire);
      expect(run.sessions.map((s) => s.result.status)).toEqual(Array(4).fill("COMPLETED"));
      expect(run.sessions.map((s) => s.result.reward).sort()).toEqual([0, 0, 1, 1]);
      expect(summarizeHarness(run).api).toBe(api);
      expect(checkHarnessRun(run, tokenizer)).toEqual([]);
      for (const { result } of run.sessions) expect(result.trajectory.traces).toHaveLength(1);
    });

    it(`${wire}: every record shows the CLI's temperature 0 and the policy's 1 that was sampled`, () => {
      for (const { records } of runOf(wire).sessions) {
        expect(records.length).toBeGreaterThanOrEqual(2);
        for (const r of records) {
          expect(r.metadata.sampling).toMatchObject({
            requested: { temperature: 0 },
            policy: { temperature: 1 },
            applied: { temperature: 1 },
            overridden: ["temperature"],
          });
          const generate = r.request.generate as { sampling_params: JsonObject };
          expect(generate.sampling_params.temperature).toBe(1);
        }
      }
    });
  }
});
