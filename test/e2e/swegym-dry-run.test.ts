/**
 * The SWE-Gym example's dry run (examples/swegym_slime_grpo/dry-run.ts) end to end: the example's
 * run.sh flags, polar.yaml and topology.yaml against wrangler dev, a gateway started from the
 * topology in token mode, the simulated engine as slime's router, and slime's calls into the
 * bridge (through slime's stand-in) with the fence around a weight sync each rollout.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { execa } from "execa";
import { expect, it } from "vitest";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import type { DryRunReport } from "../../examples/swegym_slime_grpo/dry-run-checks";
import { describeWith } from "../support/optional-tools";

const OUT = join(".polar", "swegym-dry-run-ci");

describeWith(["python3"], "the SWE-Gym slime GRPO example, dry run", () => {
  it("3 rollouts of slime's calls through the bridge, the fence and the local stack pass every check", {
    timeout: 300_000,
  }, async () => {
    const run = await execa(
      process.execPath,
      ["--import", "tsx", "examples/swegym_slime_grpo/dry-run.ts", "--out", OUT],
      { cwd: REPO_ROOT, reject: false, all: true, timeout: 290_000 },
    );
    expect(run.exitCode, run.all).toBe(0);
    const summary = JSON.parse(readFileSync(join(REPO_ROOT, OUT, "summary.json"), "utf8"));
    expect(summary.ok).toBe(true);
    expect(summary.groups).toEqual([2, 2, 2]);
    expect(summary.samples).toEqual([8, 8, 8]);
    // The bridge's four hooks come from run.sh; what the dry run replaced is said.
    expect(summary.bridge_flags.rollout_function_path).toBe("polar_trainer.slime.rollout.generate_rollout");
    expect(summary.bridge_flags.data_source_path).toBe("polar_trainer.slime.data_source.PolarDataSource");
    expect(summary.replaced_template_keys).toEqual(["agent", "evaluator", "runtime"]);
    expect(summary.changed_flags).toEqual({ rollout_batch_size: 2, n_samples_per_prompt: 4 });
    // The last rollout's groups were sampled after a weight sync: the fence's version is on the traces.
    expect(
      summary.weight_versions
        .at(-1)
        .map(Number)
        .some((v: number) => v >= 1),
    ).toBe(true);
    const report = JSON.parse(readFileSync(join(REPO_ROOT, OUT, "report.json"), "utf8")) as DryRunReport;
    expect(report.rendered_tasks.map((t) => (t.runtime as { image: string }).image)).toEqual([
      "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-99901:latest",
      "xingyaoww/sweb.eval.x86_64.python_s_mypy-99902:latest",
    ]);
  });
});
