/**
 * What both sim policies (the arithmetic one in `policy.ts`, the coding agent in `agent-policy.ts`)
 * take from a prompt: its ChatML turns, and the stable hash and PRNG every draw is made with. Apart
 * from both so the policies do not import each other.
 *
 * @module
 */

/** One chat turn read back from a ChatML prompt. */
export interface Turn {
  role: string;
  content: string;
}

/**
 * 32-bit FNV-1a hash of a string. Cheap and stable across platforms; used for all draws.
 *
 * @example
 * ```ts
 * hash32("abc"); // 440920331
 * ```
 */
export function hash32(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h >>> 0;
}

/**
 * mulberry32: a small deterministic PRNG giving floats in [0, 1).
 *
 * @example
 * ```ts
 * const random = prng(hash32("seed")); random(); // e.g. 0.4172
 * ```
 */
export function prng(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * Reads the ChatML turns (`<|im_start|>role\n...<|im_end|>`); raw text is one user turn.
 *
 * @example
 * ```ts
 * readTurns("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"); // [{ role: "user", content: "Hi" }]
 * ```
 */
export function readTurns(prompt: string): Turn[] {
  const turns: Turn[] = [];
  const re = /<\|im_start\|>(\w+)\n([\s\S]*?)(?=<\|im_end\|>|<\|im_start\|>|$)/g;
  for (const m of prompt.matchAll(re)) turns.push({ role: m[1]!, content: m[2]! });
  if (turns.length === 0) return [{ role: "user", content: prompt }];
  // The generation prompt is an empty (or think-prefilled) assistant turn: it is not history.
  const last = turns.at(-1);
  if (last?.role === "assistant" && /^(<think>\s*<\/think>\s*)?$/.test(last.content)) turns.pop();
  return turns;
}

/**
 * Blocks harnesses wrap around a request that say where and when, not what to do. A list, not
 * "every tag": Cline puts the request itself in `<task>…</task>`.
 */
const CONTEXT_TAGS =
  "current_datetime|system-reminder|environment_details|environment_context|session_context|system_notification";
const CONTEXT_BLOCK = new RegExp(`<(${CONTEXT_TAGS})>[\\s\\S]*?<\\/\\1>`, "g");

/**
 * A user turn without the context a harness wraps around the request: tagged blocks such as
 * Copilot CLI's `<current_datetime>2026-12-02T02:28:53+00:00</current_datetime>` or Claude Code's
 * `<system-reminder>…</system-reminder>`, and bare ISO dates and times. What is left is what the
 * user asked; a date is never read as a task (`2026-12` is no subtraction).
 *
 * @example
 * ```ts
 * withoutHarnessContext("<current_datetime>2026-12-02</current_datetime>\n\nWhat is 2 + 3?"); // "What is 2 + 3?"
 * ```
 */
export function withoutHarnessContext(text: string): string {
  return text
    .replace(CONTEXT_BLOCK, " ")
    .replace(/\b\d{4}-\d{2}-\d{2}(?:[T ][\d:.]+(?:Z|[+-]\d{2}:?\d{2})?)?/g, " ")
    .trim();
}
