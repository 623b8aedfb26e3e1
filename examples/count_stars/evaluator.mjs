/**
 * The count_stars evaluator, loaded by the gateway by module path
 * (`evaluator.strategy: ./examples/count_stars/evaluator.mjs:countStars`, resolved from the
 * gateway's working directory). Reward 1 when the model's final answer names the number of stars
 * drawn in the task's image (`evaluator.config.expected_stars`), else 0. The answer is read from
 * the trajectory: the text of the last assistant message of the last trace (its reasoning is not
 * part of it), and the number is the last integer in that text.
 *
 * @module
 */

/** The text of an assistant message's content (string or a list of text parts). */
function textOf(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("");
  return "";
}

/**
 * @param {import("../../gateway-agent/evaluator/types").EvalContext} ctx
 * @returns {Promise<import("../../gateway-agent/evaluator/types").EvalResult>}
 * @example
 * // task.yaml: evaluator: { strategy: ./examples/count_stars/evaluator.mjs:countStars, config: { expected_stars: 5 } }
 */
export async function countStars(ctx) {
  const expected = ctx.config.expected_stars;
  if (!Number.isInteger(expected) || expected < 0)
    throw new Error(
      `evaluator.config.expected_stars: must be a non-negative integer, got ${JSON.stringify(expected)}`,
    );
  const trace = ctx.trajectory.traces.at(-1);
  const reply = trace?.response_messages.filter((m) => m.role === "assistant").at(-1);
  if (!reply)
    return { outcome_reward: 0, metadata: { expected_stars: expected, answer: null, reason: "no answer" } };
  const text = textOf(reply.content).trim();
  const numbers = text.match(/-?\d+/g);
  const answer = numbers ? Number(numbers.at(-1)) : null;
  return {
    outcome_reward: answer === expected ? 1 : 0,
    metadata: { expected_stars: expected, answer, answer_text: text.slice(0, 200) },
  };
}
