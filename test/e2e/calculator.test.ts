/**
 * The calculator example end to end, every part a real process: control plane (`wrangler dev`),
 * gateway agent, the `shell` harness running examples/calculator/agent.mjs (a bash/read/write/edit
 * tools agent) through the recording proxy against the simulated engine's scripted coding policy,
 * then `test_on_output` grading the agent's git diff in a fresh runtime by running the example's
 * tests. A group of 4 must get a mix of rewards, and every trace must be token-exact.
 */
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type LocalStack, startLocalStack } from "../../cli/local-stack";
import { loadTaskFile } from "../../cli/task-file";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { loadTopology } from "../../gateway-agent/topology";
import type { SessionResult } from "../../protocol";
import {
  type ChatTokenizer,
  loadChatTokenizer,
  sglangToolDumps,
  type ToolDefinition,
} from "../../tokenizer/chat-tokenizer";

let stack: LocalStack;
let tokenizer: ChatTokenizer;
let results: SessionResult[];

beforeAll(async () => {
  [stack, tokenizer] = await Promise.all([startLocalStack({ gateways: 1 }), loadChatTokenizer()]);
  const batch = loadTaskFile(join(REPO_ROOT, "examples/calculator/task.yaml"));
  const created = await stack.client.submit(batch);
  expect(created.sessions).toBe(4);
  results = [];
  for await (const { result } of stack.client.streamResults(created.batch_id, { timeoutMs: 150_000 }))
    results.push(result);
});

const batchTask = (file: string) => loadTaskFile(join(REPO_ROOT, "examples/calculator", file)).tasks[0]!;

afterAll(async () => {
  await stack?.stop();
});

describe("calculator × 4 samples with the shell agent on the simulated engine", () => {
  it("every session completes and the group has rewards 1 and 0 from test_on_output", () => {
    expect(results.map((r) => r.status)).toEqual(["COMPLETED", "COMPLETED", "COMPLETED", "COMPLETED"]);
    const rewards = results.map((r) => r.reward).sort();
    // The sim stratifies a group of four: two right fixes, one wrong edit, one session that edits nothing.
    expect(rewards).toEqual([0, 0, 1, 1]);
    for (const r of results) {
      const ev = (r.trajectory.metadata as { evaluation: Record<string, unknown> }).evaluation;
      expect(ev).toMatchObject({
        strategy: "test_on_output",
        fresh_eval_runtime: true,
        resolved: r.reward === 1,
      });
      // A zero is either an empty diff (the session left the code alone) or a diff whose tests fail.
      if (r.reward === 1) expect(ev.parsed_tests).toEqual(ev.expected_tests);
      else if (ev.empty_generation !== true)
        expect(ev.parsed_tests).toMatchObject({ test_add: "PASSED", test_subtract: "FAILED" });
    }
  });

  it("one session of the group edits nothing: its diff is empty", () => {
    const empty = results.filter(
      (r) =>
        (r.trajectory.metadata as { evaluation: { empty_generation?: boolean } }).evaluation.empty_generation,
    );
    expect(empty).toHaveLength(1);
    expect(empty[0]!.reward).toBe(0);
  });

  it("the example topology parses with the gateway's topology schema", () => {
    const topology = loadTopology(join(REPO_ROOT, "examples/calculator/topology.yaml"), {
      POLAR_URL: stack.controlPlane.url,
    });
    expect(topology.gateway.nodes[0]).toMatchObject({ model_served: "Qwen/Qwen3-0.6B" });
  });

  it("every harness's task file parses and shares the shell task's instruction and grading", () => {
    const shell = batchTask("task.yaml");
    for (const h of ["claude_code", "qwen_code", "codex", "opencode", "pi"]) {
      const task = batchTask(`task.${h}.yaml`);
      expect(task.agent.harness).toBe(h);
      expect(task.instruction).toBe(shell.instruction);
      expect(task.evaluator).toEqual(shell.evaluator);
      expect(task.runtime?.eval_prepare).toEqual(shell.runtime?.eval_prepare);
    }
  });

  it("the agent worked in several turns through the tools the harness offered", () => {
    for (const r of results) {
      const traces = r.trajectory.traces;
      expect(traces.length).toBeGreaterThanOrEqual(3);
      const names = (traces[0]!.tools ?? []).map((t) => (t as { function: { name: string } }).function.name);
      expect(names).toEqual(["bash", "read", "write", "edit"]);
      const calls = traces.flatMap((t) =>
        t.response_messages.flatMap(
          (m) => (m as { tool_calls?: Array<{ function: { name: string } }> }).tool_calls ?? [],
        ),
      );
      expect(calls.map((c) => c.function.name).slice(0, 2)).toEqual(["bash", "read"]);
      // The last call ends the episode without a tool call.
      expect(traces.at(-1)!.response_messages.at(-1)).not.toHaveProperty("tool_calls.0");
    }
  });

  it("each trace's prompt_ids decode to the Qwen3 rendering of its messages and tools; outputs align", () => {
    for (const r of results) {
      for (const trace of r.trajectory.traces) {
        const rendered = tokenizer.render(trace.prompt_messages, {
          // The engine renders tools as SGLang dumps them (key order, `strict`), so the test does too.
          ...(trace.tools ? { tools: sglangToolDumps(trace.tools as unknown as ToolDefinition[]) } : {}),
          addGenerationPrompt: true,
        });
        expect(tokenizer.decode(trace.prompt_ids)).toBe(rendered);
        expect(trace.response_ids.length).toBeGreaterThan(0);
        expect(trace.response_logprobs).not.toBeNull();
        expect(trace.response_logprobs!.length).toBe(trace.response_ids.length);
        expect(trace.loss_mask).toEqual(trace.response_ids.map(() => 1));
        // The sampled text ends with Qwen3's end-of-turn token, as the engine stopped on it.
        expect(tokenizer.decode(trace.response_ids)).toMatch(/<\|im_end\|>$/);
      }
    }
  });
});
