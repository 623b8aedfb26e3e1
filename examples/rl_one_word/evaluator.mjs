/**
 * The RL demo's evaluator, loaded by the gateway by module path
 * (`evaluator.strategy: ./examples/rl_one_word/evaluator.mjs:oneWord`). The model must answer
 * with exactly one given word (`config.target`). Its answer is split into the known words of
 * `config.words` (the words the initial policy favours; anything else counts as one unknown
 * piece per character run), and the reward is partial credit:
 *
 *   reward = [first piece is the target] / number of pieces
 *
 * so "red" scores 1, "redblue" 0.5, "blue" or an empty answer 0. A random policy over the favoured
 * words already scores above 0 in some sessions of every few groups, and the only way to 1 is the
 * target alone, followed by the end of the turn.
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
 * Splits `text` into the known words (longest first) and runs of anything else.
 *
 * @example
 * pieces("redblue!red", ["red", "blue"]); // ["red", "blue", "!", "red"]
 */
export function pieces(text, words) {
  const known = [...words].sort((a, b) => b.length - a.length);
  const out = [];
  let other = "";
  let i = 0;
  while (i < text.length) {
    const w = known.find((k) => text.startsWith(k, i));
    if (w) {
      if (other) out.push(other);
      other = "";
      out.push(w);
      i += w.length;
    } else {
      if (!/\s/.test(text[i])) other += text[i];
      else if (other) {
        out.push(other);
        other = "";
      }
      i += 1;
    }
  }
  if (other) out.push(other);
  return out;
}

/**
 * @param {import("../../gateway-agent/evaluator/types").EvalContext} ctx
 * @returns {Promise<import("../../gateway-agent/evaluator/types").EvalResult>}
 * @example
 * // task.yaml: evaluator: { strategy: ./examples/rl_one_word/evaluator.mjs:oneWord, config: { target: red, words: [red, blue] } }
 */
export async function oneWord(ctx) {
  const { target, words } = ctx.config;
  if (typeof target !== "string" || target === "")
    throw new Error(`evaluator.config.target: must be a non-empty string, got ${JSON.stringify(target)}`);
  if (
    !Array.isArray(words) ||
    !words.every((w) => typeof w === "string" && w !== "") ||
    !words.includes(target)
  )
    throw new Error("evaluator.config.words: must be a list of non-empty strings that includes the target");
  const reply = ctx.trajectory.traces
    .at(-1)
    ?.response_messages.filter((m) => m.role === "assistant")
    .at(-1);
  const text = reply ? textOf(reply.content).trim() : "";
  const parts = pieces(text, words);
  const reward = parts.length > 0 && parts[0] === target ? 1 / parts.length : 0;
  return { outcome_reward: reward, metadata: { answer: text.slice(0, 200), pieces: parts.length } };
}
