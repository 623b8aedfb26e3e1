/**
 * The short variant of `npm run demo:rl` (scripts/demo-rl.ts --check loop): a few steps of async
 * GRPO on a smaller model through the real stack (wrangler dev, a gateway in token mode, a harness
 * process per session, the reference engine, the Python trainer on polar_trainer). It does not ask
 * the reward to rise (too few steps); it checks the loop: every step fenced the fleet and the
 * engine held no request while its weights changed, the versions go up one per step and the traces
 * carry them, the logprobs the engine recorded are the ones the trainer recomputes, and every group
 * the scheduler submitted is trained, dropped, rejected or still owned.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { describeWith } from "../support/optional-tools";

const OUT = join(".polar", "demo-rl-ci");
const STEPS = 4;

interface Row {
  step: number;
  policy_version: number;
  new_version: number;
  groups_accepted: number;
  policy_versions_seen: number[];
  staleness: Record<string, number>;
  logprob_abs_diff_mean: number | null;
  tokens_checked: number;
  fence_ok: boolean;
  fence_nodes: number;
  engine_requests_held_during_update: number;
  mean_reward: number;
}

describeWith(["torch"], "npm run demo:rl, short variant (4 steps, hidden 8)", () => {
  it("versions rise every step, the fence holds, logprobs match, every group is accounted for", {
    timeout: 600_000,
  }, async () => {
    const run = await execa(
      process.execPath,
      [
        "--import",
        "tsx",
        "scripts/demo-rl.ts",
        "--steps",
        String(STEPS),
        "--hidden",
        "8",
        "--group-size",
        "4",
        "--groups-per-step",
        "2",
        "--check",
        "loop",
        "--out",
        OUT,
      ],
      { cwd: REPO_ROOT, reject: false, all: true, timeout: 590_000 },
    );
    expect(run.exitCode, run.all).toBe(0);
    expect(run.all).toContain("demo:rl OK");
    const dir = join(REPO_ROOT, OUT);
    const rows = readFileSync(join(dir, "steps.jsonl"), "utf8")
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Row);
    const summary = JSON.parse(readFileSync(join(dir, "summary.json"), "utf8")) as Record<string, unknown>;

    expect(rows.map((r) => r.step)).toEqual([1, 2, 3, 4]);
    // One version per step: the trainer's version before the step, then the one it pushed.
    expect(rows.map((r) => r.policy_version)).toEqual([0, 1, 2, 3]);
    expect(rows.map((r) => r.new_version)).toEqual([1, 2, 3, 4]);
    for (const r of rows) {
      expect(r.groups_accepted).toBe(2);
      expect(r.fence_ok).toBe(true);
      expect(r.fence_nodes).toBe(1);
      expect(r.engine_requests_held_during_update).toBe(0);
      // Tokens were sampled under the step's version or one before it (async level 2), never newer.
      expect(r.policy_versions_seen.every((v) => v <= r.policy_version && v >= r.policy_version - 2)).toBe(
        true,
      );
      expect(r.tokens_checked).toBeGreaterThan(0);
      expect(r.logprob_abs_diff_mean!).toBeLessThan(1e-4);
    }
    // Later steps train on tokens of later versions: the engine served the pushed weights.
    expect(Math.max(...rows.at(-1)!.policy_versions_seen)).toBeGreaterThanOrEqual(2);
    expect(summary).toMatchObject({
      steps: STEPS,
      fence_held_every_step: true,
      groups_accounted: true,
    });
    expect(summary["logprob_share_over_1e-3"]).toBe(0);
    expect(Number(summary.logprob_abs_diff_mean)).toBeLessThan(1e-4);
    for (const key of [
      "mean_reward_first",
      "mean_reward_last",
      "logprob_abs_diff_mean",
      "policy_versions_seen",
      "groups_dropped",
    ])
      expect(summary).toHaveProperty(key);
    expect(Number(summary.groups_consumed)).toBe(STEPS * 2);
  });
});
