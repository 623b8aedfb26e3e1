/**
 * Probe renders of a chat template at load: the conversations an agent sends, rendered once
 * before any request, so that a template the renderer cannot take through them fails at start.
 * See `template-support.ts` for the static half of the check.
 *
 * @module
 */
import type { ChatMessage, RenderOptions } from "./chat-messages";
import {
  featureOfRenderError,
  type TemplateOrigin,
  UnsupportedTemplateFeatureError,
} from "./template-support";

const TOOLS = [
  {
    type: "function",
    function: {
      description: "Evaluates an arithmetic expression.",
      name: "calculator",
      parameters: {
        type: "object",
        properties: { expression: { type: "string", description: "e.g. 6 * 7" } },
        required: ["expression"],
      },
      strict: false,
    },
  },
];

const TOOL_TURNS: ChatMessage[] = [
  { role: "system", content: "You are a careful assistant." },
  { role: "user", content: "What is 6 * 7?" },
  {
    role: "assistant",
    content: "Let me compute it.",
    tool_calls: [
      {
        id: "call_0",
        type: "function",
        function: { name: "calculator", arguments: '{"expression": "6 * 7"}' },
      },
    ],
  },
  { role: "tool", tool_call_id: "call_0", name: "calculator", content: "42" },
  { role: "assistant", content: "6 * 7 = 42." },
  { role: "user", content: "Thanks." },
];

/** The probes, each with what it holds (for the message when one fails). */
export const PROBES: ReadonlyArray<{ holds: string; messages: ChatMessage[]; options: RenderOptions }> = [
  {
    holds: "system, user, an assistant tool call, its output, an answer and a new user turn, with tools",
    messages: TOOL_TURNS,
    options: { tools: TOOLS },
  },
  {
    holds: "system, user, assistant, user, without tools",
    messages: [TOOL_TURNS[0]!, TOOL_TURNS[1]!, { role: "assistant", content: "42." }, TOOL_TURNS[5]!],
    options: {},
  },
  { holds: "a lone user message", messages: [TOOL_TURNS[1]!], options: {} },
];

/** What a probe render needs of the tokenizer: its `render`, errors passed through with their cause. */
export type ProbeRender = (messages: ChatMessage[], options: RenderOptions) => string;

/**
 * Renders each probe (with and without the generation prompt); throws
 * {@link UnsupportedTemplateFeatureError} for the first failure that is not the template's own
 * `raise_exception` (`raisedByTemplate` tells them apart by the message: the renderer's
 * `raise_exception` throws a plain `Error`, and a template cannot be given another one).
 *
 * @example
 * ```ts
 * probeChatTemplate((m, o) => tok.render(m, o), origin, templateRaises(template));
 * ```
 */
export function probeChatTemplate(
  render: ProbeRender,
  origin: TemplateOrigin,
  raisedByTemplate: (message: string) => boolean,
): void {
  for (const probe of PROBES) {
    for (const addGenerationPrompt of [true, false]) {
      try {
        render(probe.messages, { ...probe.options, addGenerationPrompt });
      } catch (error) {
        const cause = causeOf(error);
        if (raisedByTemplate(cause.message)) break;
        throw new UnsupportedTemplateFeatureError(
          featureOfRenderError(cause.message),
          origin,
          `cannot render a probe conversation (${probe.holds}): it uses`,
        );
      }
    }
  }
}

/** The innermost error (render errors are wrapped, with the renderer's error as `cause`). */
function causeOf(error: unknown): Error {
  let e = error as Error;
  while (e.cause instanceof Error) e = e.cause;
  return e;
}
