/**
 * The simulated policies read ChatML prompts (Qwen3's template: `<|im_start|>` turns, a `<tools>`
 * block, `<tool_call>` and `<tool_response>` blocks) and answer in Qwen3's output format. This module
 * lets them serve DeepSeek V3 unchanged: it reads a prompt rendered with the DeepSeek V3 tool template
 * (`tokenizer/families/deepseek-v3-template.ts`) back as the ChatML prompt of the same conversation,
 * and writes a ChatML-format answer as DeepSeek V3 would sample it.
 *
 * @module
 */
import { deepseekV3ToolCallParser, DEEPSEEK_V3_TOOL_TOKENS as T } from "../../tokenizer/parsers";
import { pythonJsonDumps, tryParseJson } from "../../tokenizer/parsers/json-text";

const BOS = "<｜begin▁of▁sentence｜>";
const EOS = "<｜end▁of▁sentence｜>";
const USER = "<｜User｜>";
const ASSISTANT = "<｜Assistant｜>";
const OUTPUTS_BEGIN = "<｜tool▁outputs▁begin｜>";
const OUTPUTS_END = "<｜tool▁outputs▁end｜>";
const OUTPUT = /<｜tool▁output▁begin｜>([\s\S]*?)<｜tool▁output▁end｜>/g;
const CALL =
  /<｜tool▁call▁begin｜>([^\n]*?)<｜tool▁sep｜>([^\n]+)\n```(?:json)?\n([\s\S]*?)\n?```<｜tool▁call▁end｜>/g;
/** Where the template's tool section starts, and the header its JSON blocks follow. */
const TOOLS_HEADER = "## Tools\n\n";
const FUNCTIONS_HEADER = "### Functions\n";

interface ChatTurn {
  role: "system" | "user" | "assistant";
  content: string;
}

/** An assistant text with its DeepSeek call section turned into Qwen3 `<tool_call>` blocks. */
function callsAsChatml(text: string): string {
  const begin = text.indexOf(T.callsBegin);
  if (begin < 0) return text;
  const blocks = [...text.slice(begin).matchAll(CALL)].map((m) => {
    const args = tryParseJson(m[3]!.trim());
    return `<tool_call>\n${pythonJsonDumps({ name: m[2]!.trim(), arguments: args ?? {} })}\n</tool_call>`;
  });
  const head = text.slice(0, begin);
  return `${head}${head && blocks.length ? "\n" : ""}${blocks.join("\n")}`;
}

/** The system text and the tools (one JSON per element) of the prompt's head. */
function systemAndTools(head: string): { system: string; tools: string[] } {
  const at = head.indexOf(TOOLS_HEADER);
  if (at < 0) return { system: head, tools: [] };
  const list = head.slice(head.indexOf(FUNCTIONS_HEADER, at) + FUNCTIONS_HEADER.length);
  const tools = [...list.matchAll(/```json\n([\s\S]*?)\n```/g)].map((m) => m[1]!);
  return { system: head.slice(0, at).replace(/\n\n$/, ""), tools };
}

/**
 * Reads a DeepSeek V3 prompt as the ChatML prompt of the same conversation: the system text and a
 * `<tools>` block (one tool's JSON per line) as the system turn, each user turn, each assistant
 * turn with its calls as `<tool_call>` blocks, the tool outputs of one round as one user turn of
 * `<tool_response>` blocks, and the open assistant turn at the end.
 *
 * @example
 * ```ts
 * deepseekPromptAsChatml("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>");
 * // "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
 * ```
 */
export function deepseekPromptAsChatml(prompt: string): string {
  const text = prompt.startsWith(BOS) ? prompt.slice(BOS.length) : prompt;
  const firstTurn = [USER, ASSISTANT, OUTPUTS_BEGIN]
    .map((m) => text.indexOf(m))
    .filter((i) => i >= 0)
    .reduce((a, b) => Math.min(a, b), text.length);
  const { system, tools } = systemAndTools(text.slice(0, firstTurn));
  const turns: ChatTurn[] = [];
  if (system || tools.length)
    turns.push({
      role: "system",
      content: `${system}${system && tools.length ? "\n\n" : ""}${tools.length ? `# Tools\n\n<tools>\n${tools.join("\n")}\n</tools>` : ""}`,
    });
  let open = false;
  let rest = text.slice(firstTurn);
  while (rest.length > 0) {
    if (rest.startsWith(USER)) {
      const body = rest.slice(USER.length);
      const end = [body.indexOf(ASSISTANT), body.indexOf(USER)].filter((i) => i >= 0);
      const stop = end.length ? Math.min(...end) : body.length;
      turns.push({ role: "user", content: body.slice(0, stop) });
      rest = body.slice(stop);
    } else if (rest.startsWith(ASSISTANT) || rest.startsWith(OUTPUTS_END)) {
      const marker = rest.startsWith(ASSISTANT) ? ASSISTANT : OUTPUTS_END;
      const body = rest.slice(marker.length);
      const end = body.indexOf(EOS);
      if (end < 0) {
        // The open turn the model is asked to write (its sampled start, if any, is ignored).
        open = true;
        rest = "";
      } else {
        turns.push({ role: "assistant", content: callsAsChatml(body.slice(0, end)) });
        rest = body.slice(end + EOS.length);
      }
    } else if (rest.startsWith(OUTPUTS_BEGIN)) {
      const end = rest.indexOf(OUTPUTS_END);
      const section = rest.slice(OUTPUTS_BEGIN.length, end < 0 ? rest.length : end);
      const outputs = [...section.matchAll(OUTPUT)].map((m) => `<tool_response>\n${m[1]!}\n</tool_response>`);
      turns.push({ role: "user", content: outputs.join("\n") });
      // The outputs' end opens the next assistant turn (the template writes no `<｜Assistant｜>`),
      // which the branch above reads: a finished one, or the open one at the end.
      rest = end < 0 ? "" : rest.slice(end);
    } else {
      // Text outside any turn (not written by the template): kept as a user turn.
      const next = [USER, ASSISTANT, OUTPUTS_BEGIN].map((m) => rest.indexOf(m)).filter((i) => i > 0);
      const stop = next.length ? Math.min(...next) : rest.length;
      turns.push({ role: "user", content: rest.slice(0, stop) });
      rest = rest.slice(stop);
    }
  }
  return `${turns.map((t) => `<|im_start|>${t.role}\n${t.content}<|im_end|>\n`).join("")}${open ? "<|im_start|>assistant\n" : ""}`;
}

/**
 * Writes an answer in Qwen3's output format as DeepSeek V3 samples it: no `<think>` block (V3
 * has no reasoning), and its `<tool_call>` blocks as one call section after the text.
 *
 * @example
 * ```ts
 * chatmlAnswerAsDeepseek('<think>\nAdd.\n</think>\n\n<tool_call>\n{"name": "calc", "arguments": {"x": 1}}\n</tool_call>');
 * // '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calc\n```json\n{"x": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>'
 * ```
 */
export function chatmlAnswerAsDeepseek(answer: string): string {
  const text = answer.replace(/^\s*<think>[\s\S]*?<\/think>\s*/, "");
  const calls: string[] = [];
  const prose = text.replace(/\s*<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g, (whole, json: string) => {
    const call = tryParseJson(json) as { name?: unknown; arguments?: unknown } | undefined;
    if (!call || typeof call.name !== "string") return whole;
    calls.push(
      `${T.callBegin}function${T.sep}${call.name}\n\`\`\`json\n${pythonJsonDumps(call.arguments ?? {})}\n\`\`\`${T.callEnd}`,
    );
    return "";
  });
  return calls.length ? `${prose.trimEnd()}${T.callsBegin}${calls.join("\n")}${T.callsEnd}` : prose;
}

/**
 * Where DeepSeek V3's assistant turns open: after `<｜Assistant｜>`, and after the outputs of a
 * round of tool calls (the template writes no new `<｜Assistant｜>` there); `<｜end▁of▁sentence｜>`
 * closes a turn.
 */
export const DEEPSEEK_V3_TURN = {
  opens: [ASSISTANT, OUTPUTS_END],
  end: EOS,
} as const;

/**
 * The tool calls of a chat completion's text, as SGLang's `deepseekv3` detector reads them: the
 * text before the call section, stripped, is the content; each call to a listed tool is a call.
 *
 * @example
 * ```ts
 * deepseekChatToolCalls("Let me add.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>calc\n```json\n{\"x\": 1}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", ["calc"]);
 * // { normal: "Let me add.", calls: [{ name: "calc", arguments: '{"x": 1}' }] }
 * ```
 */
export function deepseekChatToolCalls(
  text: string,
  toolNames: readonly string[],
): { normal: string; calls: { name: string; arguments: string }[] } {
  const tools = toolNames.map((name) => ({ type: "function", function: { name } }));
  const split = deepseekV3ToolCallParser.parse(text, { tools });
  return { normal: split.text.trim(), calls: split.calls };
}
