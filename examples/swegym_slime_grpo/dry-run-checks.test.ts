/**
 * The SWE-Gym dry run's checks on their own: a good report passes, and a report that breaks one
 * promise fails naming that problem (the end-to-end run is test/e2e/swegym-dry-run.test.ts).
 */
import { describe, expect, it } from "vitest";
import { checkReport, type DryRunReport, type SampleReport } from "./dry-run-checks";

describe("checkReport", () => {
  const sample = (over: Partial<SampleReport> = {}): SampleReport => ({
    tokens: 60,
    response_length: 20,
    loss_mask: 20,
    trainable_tokens: 20,
    rollout_log_probs: 20,
    logprobs_finite_nonpositive: true,
    reward: { score: 1 },
    status: "Status.COMPLETED",
    removed: false,
    weight_versions: ["1"],
    session_kind: "trainable",
    policy_version: 1,
    policy_staleness: 0,
    ...over,
  });
  const row = { instance_id: "a__b-1", FAIL_TO_PASS: "[]" };
  const good = (): DryRunReport => ({
    flags: { rollout_batch_size: 1, n_samples_per_prompt: 2 },
    polar_keys: [],
    replaced_template_keys: [],
    changed_flags: {},
    rendered_tasks: [
      {
        instruction: "fix it",
        runtime: { backend: "docker", image: "img:a" },
        agent: { harness: "codex" },
        evaluator: { strategy: "swebench_harness", config: { instance: row } },
        metadata: { instance_id: "a__b-1" },
      },
    ],
    prompts: [
      {
        prompt: "fix it",
        label: "a__b-1",
        metadata: { instance_id: "a__b-1", image: "img:a", instance: row },
      },
    ],
    rollouts: [
      {
        rollout_id: 1,
        groups: [[sample(), sample()]],
        metrics: {},
        reward_func: [1, 0],
        raw_rewards: [1, 0],
        advantages: [0.5, -0.5],
        weight_sync: true,
      },
    ],
  });

  it("passes a good report and names each broken promise", () => {
    expect(checkReport(good())).toEqual([]);
    const r = good();
    (r.rendered_tasks[0]!.evaluator as { config: { instance: unknown } }).config.instance =
      "{sample.metadata.instance}";
    r.rollouts[0]!.groups[0]![1] = sample({ rollout_log_probs: 19 });
    r.rollouts[0]!.raw_rewards = [1, 1];
    expect(checkReport(r)).toEqual([
      "rendered task 0: evaluator.config.instance is not the dataset row",
      "rollout 1 sample 1: 19 rollout_log_probs for 20 response tokens",
      "rollout 1: reward_func and post_process_rewards disagree on the raw rewards",
    ]);
    const excluded = good();
    excluded.rollouts[0]!.groups[0]![0] = sample({
      session_kind: "failed",
      removed: true,
      weight_versions: [],
    });
    excluded.rollouts[0]!.groups[0]![1] = sample({ weight_versions: ["0"] });
    expect(checkReport(excluded)).toEqual([
      "rollout 1 sample 0: session failed, not trainable",
      "rollout 1: no trace sampled after the first weight sync",
    ]);
  });
});
