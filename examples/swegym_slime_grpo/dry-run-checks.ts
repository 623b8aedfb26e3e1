/**
 * What the SWE-Gym example's dry run (dry-run.ts) asks of the report its slime side
 * (dry_run_slime.py) writes: the template as written renders into valid tasks carrying each
 * instance's row and image, and every rollout gives slime what its trainer needs.
 *
 * @module
 */
import { isDeepStrictEqual } from "node:util";
import { TaskSpec } from "../../protocol";

/** One sample as the slime side reports it. */
export interface SampleReport {
  tokens: number;
  response_length: number;
  loss_mask: number | null;
  trainable_tokens: number;
  rollout_log_probs: number;
  logprobs_finite_nonpositive: boolean;
  reward: unknown;
  status: string;
  removed: boolean;
  weight_versions: string[];
  session_kind: string | null;
  policy_version: number | null;
  policy_staleness: number | null;
}

/** The slime side's report (dry_run_slime.py). */
export interface DryRunReport {
  flags: Record<string, unknown>;
  polar_keys: string[];
  replaced_template_keys: string[];
  changed_flags: Record<string, unknown>;
  rendered_tasks: Array<Record<string, unknown>>;
  prompts: Array<{ prompt: string; label: string; metadata: Record<string, unknown> }>;
  rollouts: Array<{
    rollout_id: number;
    groups: SampleReport[][];
    metrics: Record<string, number>;
    reward_func: number[];
    raw_rewards: number[];
    advantages: number[];
    weight_sync: boolean;
  }>;
}

/**
 * The problems of a report (empty when the dry run passed), one line each.
 *
 * @example
 * ```ts
 * const problems = checkReport(JSON.parse(readFileSync("report.json", "utf8")));
 * if (problems.length) throw new Error(problems.join("\n"));
 * ```
 */
export function checkReport(r: DryRunReport): string[] {
  const out: string[] = [];
  const batch = Number(r.flags.rollout_batch_size);
  const n = Number(r.flags.n_samples_per_prompt);
  r.rendered_tasks.forEach((task, i) => {
    const where = `rendered task ${i}`;
    const parsed = TaskSpec.safeParse({ ...task, task_id: `dry-run-${i}` });
    if (!parsed.success) out.push(`${where}: not a valid task: ${parsed.error.issues[0]?.message}`);
    const meta = r.prompts[i]?.metadata ?? {};
    const evaluator = task.evaluator as { config?: { instance?: unknown } } | undefined;
    if (!isDeepStrictEqual(evaluator?.config?.instance, meta.instance))
      out.push(`${where}: evaluator.config.instance is not the dataset row`);
    if ((task.runtime as { image?: unknown } | undefined)?.image !== meta.image)
      out.push(`${where}: runtime.image is not ${String(meta.image)}`);
    if ((task.metadata as { instance_id?: unknown } | undefined)?.instance_id !== meta.instance_id)
      out.push(`${where}: metadata.instance_id is not ${String(meta.instance_id)}`);
  });
  if (r.rendered_tasks.length !== r.prompts.length) out.push("not every prompt was rendered");
  if (r.rollouts.length === 0) out.push("no rollout ran");
  for (const ro of r.rollouts) {
    const where = `rollout ${ro.rollout_id}`;
    if (ro.groups.length !== batch)
      out.push(`${where}: ${ro.groups.length} groups, not rollout_batch_size ${batch}`);
    const flat = ro.groups.flat();
    ro.groups.forEach((g, gi) => {
      if (g.length < n)
        out.push(`${where} group ${gi}: ${g.length} samples, fewer than n_samples_per_prompt ${n}`);
    });
    flat.forEach((s, si) => {
      const w = `${where} sample ${si}`;
      // dry-run-evaluator.mjs fails a session whose row did not arrive intact: none may be excluded.
      if (s.removed || s.session_kind !== "trainable") {
        out.push(`${w}: session ${s.session_kind ?? "missing"}, not trainable`);
        return;
      }
      if (s.trainable_tokens <= 0) out.push(`${w}: no trainable token`);
      if (s.loss_mask !== s.response_length)
        out.push(`${w}: loss_mask has ${s.loss_mask} entries, response ${s.response_length}`);
      if (s.rollout_log_probs !== s.response_length)
        out.push(`${w}: ${s.rollout_log_probs} rollout_log_probs for ${s.response_length} response tokens`);
      if (!s.logprobs_finite_nonpositive) out.push(`${w}: a logprob that is not a number <= 0`);
      if (s.tokens <= s.response_length) out.push(`${w}: no prompt tokens`);
      if (s.policy_version === null || s.policy_version > ro.rollout_id)
        out.push(`${w}: policy_version ${s.policy_version} at rollout ${ro.rollout_id}`);
      if (!s.weight_versions.every((v) => Number(v) <= ro.rollout_id))
        out.push(`${w}: weight versions ${s.weight_versions.join(",")} newer than the rollout`);
    });
    if (!isDeepStrictEqual(ro.reward_func, ro.raw_rewards))
      out.push(`${where}: reward_func and post_process_rewards disagree on the raw rewards`);
    if (ro.advantages.length !== flat.length)
      out.push(`${where}: ${ro.advantages.length} advantages for ${flat.length} samples`);
    if (!ro.advantages.every(Number.isFinite)) out.push(`${where}: an advantage that is not finite`);
    if (!ro.weight_sync) out.push(`${where}: the weight sync failed`);
  }
  const last = r.rollouts.at(-1);
  if (
    last &&
    last.rollout_id > 0 &&
    !last.groups.flat().some((s) => s.weight_versions.some((v) => Number(v) > 0))
  )
    out.push(`rollout ${last.rollout_id}: no trace sampled after the first weight sync`);
  return out;
}
