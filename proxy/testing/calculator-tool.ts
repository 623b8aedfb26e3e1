/**
 * The calculator tool the scripted policies drive (`sim/agent-policy.ts` answers arithmetic with
 * it), in the OpenAI `{type: "function", function}` shape that both the SDK's tool type and the
 * tokenizer's `ToolDefinition` accept: one definition for the tests that render or call it.
 *
 * @example
 * ```ts
 * await openai.chat.completions.create({ model: "m", messages, tools: [CALCULATOR_TOOL] });
 * tok.render(messages, { tools: sglangToolDumps([CALCULATOR_TOOL]) });
 * ```
 *
 * @module
 */

/** An OpenAI function tool: `calculator(expression)`. */
export const CALCULATOR_TOOL = {
  type: "function" as const,
  function: {
    name: "calculator",
    description: "Evaluates an arithmetic expression.",
    parameters: {
      type: "object",
      properties: { expression: { type: "string" } },
      required: ["expression"],
    },
  },
};
