/**
 * The evaluator of the SWE-Gym example's dry run (dry-run.ts), in place of `swebench_harness`,
 * which needs the instance's image. It receives the same `config` as the real one (the template's
 * `config.instance: "{sample.metadata.instance}"`, rendered by the bridge into the raw dataset row)
 * and checks what the real grader relies on: the row is a mapping, its `instance_id` is the task's
 * `metadata.instance_id`, and FAIL_TO_PASS / PASS_TO_PASS parse as lists of test ids. A row that
 * fails the check is an evaluator error (the session ends in ERROR), so a template or conversion
 * that breaks the row cannot pass the dry run. The reward: 1 when the model answered at all (the
 * dry run grades the plumbing, not the policy).
 *
 * @module
 */

/**
 * Test ids of a SWE-bench list field (a JSON string in the dataset, or already a list).
 *
 * @example
 * testIds('["a::b"]', "FAIL_TO_PASS"); // ["a::b"]
 */
export function testIds(value, field) {
  const list = typeof value === "string" ? JSON.parse(value) : value;
  if (!Array.isArray(list) || !list.every((t) => typeof t === "string"))
    throw new Error(`evaluator.config.instance.${field}: must be a list of test ids`);
  return list;
}

/**
 * @param {import("../../gateway-agent/evaluator/types").EvalContext} ctx
 * @returns {Promise<import("../../gateway-agent/evaluator/types").EvalResult>}
 * @example
 * // evaluator: { strategy: ./examples/swegym_slime_grpo/dry-run-evaluator.mjs:instanceReceived, config: { instance: {...} } }
 */
export async function instanceReceived(ctx) {
  const instance = ctx.config.instance;
  if (instance === null || typeof instance !== "object" || Array.isArray(instance))
    throw new Error(`evaluator.config.instance: must be the dataset row (a mapping), got ${typeof instance}`);
  const expected = ctx.session.metadata?.instance_id;
  if (instance.instance_id !== expected)
    throw new Error(
      `evaluator.config.instance.instance_id: ${JSON.stringify(instance.instance_id)} is not the task's metadata.instance_id ${JSON.stringify(expected)}`,
    );
  const failToPass = testIds(instance.FAIL_TO_PASS, "FAIL_TO_PASS");
  const passToPass = testIds(instance.PASS_TO_PASS, "PASS_TO_PASS");
  const reply = ctx.trajectory.traces
    .at(-1)
    ?.response_messages.filter((m) => m.role === "assistant")
    .at(-1);
  const answered = typeof reply?.content === "string" ? reply.content.trim() !== "" : Boolean(reply);
  return {
    outcome_reward: answered ? 1 : 0,
    metadata: {
      instance_id: instance.instance_id,
      fail_to_pass: failToPass.length,
      pass_to_pass: passToPass.length,
    },
  };
}
