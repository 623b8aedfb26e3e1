/**
 * The shapes a chat template is rendered from: OpenAI chat messages (the subset templates read)
 * and the options of a render. Their own module so that what renders (`chat-tokenizer.ts`) and
 * what probes a template at load (`template-probe.ts`) share them without importing each other.
 *
 * @example
 * ```ts
 * const turn: ChatMessage = { role: "user", content: "What is 6 * 7?" };
 * tokenizer.render([turn], { addGenerationPrompt: true });
 * ```
 *
 * @module
 */

/** A content part of an OpenAI chat message (`{type: "text", text}`, `{type: "image_url", ...}`). */
export interface ChatContentPart {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/** An OpenAI tool call as echoed back by clients: `arguments` is usually a JSON string. */
export interface ChatToolCall {
  id?: string;
  type?: string;
  function: { name: string; arguments?: string | Record<string, unknown> | null };
  [key: string]: unknown;
}

/** An OpenAI chat message (the subset chat templates read). Extra keys are passed to the template. */
export interface ChatMessage {
  role: string;
  content?: string | ChatContentPart[] | null;
  reasoning_content?: string | null;
  tool_calls?: ChatToolCall[] | null;
  tool_call_id?: string | null;
  name?: string | null;
  [key: string]: unknown;
}

/** Options of {@link ChatTokenizer.render}. */
export interface RenderOptions {
  /** Tool definitions, passed to the template as `tools` (OpenAI `{type, function}` objects). */
  tools?: unknown[];
  /** Append the assistant header (`<|im_start|>assistant\n` for Qwen3). Default true. */
  addGenerationPrompt?: boolean;
  /** Extra template variables, e.g. `{enable_thinking: false}` (SGLang `chat_template_kwargs`). */
  templateKwargs?: Record<string, unknown>;
}
