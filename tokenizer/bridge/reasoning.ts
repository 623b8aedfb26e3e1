/**
 * Did the harness send back the reasoning the proxy returned? Some CLIs do not: they drop
 * `reasoning_content` from the history (Continue's `cn`), or replace the opaque field that carried
 * it (a Gemini `thoughtSignature`, which the Google family decodes back into `reasoning_content`).
 * The bridge still extends the turn from the sampled ids, so the engine sees the `<think>` block
 * it sampled; the turn is flagged so the difference from what the harness holds is visible.
 *
 * Compared on the internal chat form, after the API family decoded whatever carried the reasoning
 * (`thinking` blocks and their signatures, Responses `reasoning` items, Gemini thought parts and
 * signatures): the assistant message(s) a request echoes for a turn are checked against the
 * message the proxy returned for it.
 *
 * @module
 */
import type { ChatMessage } from "../chat-tokenizer";

const reasoningText = (messages: readonly ChatMessage[]): string =>
  messages
    .map((m) => (typeof m.reasoning_content === "string" ? m.reasoning_content : ""))
    .join("")
    .trim();

/**
 * True when `returned` carried reasoning that `echoed` (the request's copy of that assistant turn,
 * possibly split into several messages) does not carry as it was returned.
 *
 * @example
 * ```ts
 * reasoningDropped(
 *   { role: "assistant", content: "4", reasoning_content: "2+2" },
 *   [{ role: "assistant", content: "4" }],
 * ); // true
 * ```
 */
export function reasoningDropped(returned: ChatMessage, echoed: readonly ChatMessage[]): boolean {
  const sent = reasoningText([returned]);
  return sent !== "" && reasoningText(echoed) !== sent;
}
