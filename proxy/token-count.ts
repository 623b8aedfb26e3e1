/**
 * The token count routes: Anthropic's `POST /v1/messages/count_tokens` and Gemini's
 * `models/{model}:countTokens`, answered with the prompt tokens of the request's chat form.
 *
 * @module
 */
import type http from "node:http";
import type { JsonObject } from "../protocol";
import type { ChatTokenizer } from "../tokenizer/chat-tokenizer";
import type { TokenMode } from "./engines/sglang-token/mode";
import { anthropicToChat, googleModelFromPath, googleToChat } from "./families";
import { isObject } from "./json";
import { sendJson } from "./request-io";

/**
 * Counts prompt tokens: exactly with a tokenizer (token mode's own, else the one at
 * `tokenizerPath`, loaded on first use), else about 4 characters per token.
 *
 * @example
 * ```ts
 * const counter = new TokenCounter(null, "/models/Qwen3-8B");
 * if (await counter.serve(res, path, body)) return;
 * ```
 */
export class TokenCounter {
  private tokenizer: Promise<ChatTokenizer> | null = null;

  constructor(
    private readonly tokenMode: TokenMode | null,
    private readonly tokenizerPath: string | undefined,
  ) {}

  /** Answers a token count route; false for any other path. */
  async serve(res: http.ServerResponse, path: string, body: unknown): Promise<boolean> {
    if (path.endsWith("/messages/count_tokens")) {
      sendJson(res, 200, { input_tokens: await this.count(anthropicToChat(body)) });
      return true;
    }
    if (path.includes(":countTokens")) {
      const inner =
        isObject(body) && isObject(body.generateContentRequest) ? body.generateContentRequest : body;
      sendJson(res, 200, {
        totalTokens: await this.count(googleToChat(inner, googleModelFromPath(path))),
      });
      return true;
    }
    return false;
  }

  /** Prompt tokens of a chat request, the generation prompt included. */
  async count(chat: JsonObject): Promise<number> {
    if (this.tokenMode) this.tokenizer ??= Promise.resolve(this.tokenMode.tokenizer);
    else if (!this.tokenizerPath) return Math.ceil(JSON.stringify(chat.messages ?? []).length / 4);
    if (!this.tokenizer) {
      const { loadChatTokenizer } = await import("../tokenizer/chat-tokenizer");
      this.tokenizer = loadChatTokenizer(this.tokenizerPath);
    }
    const tok = await this.tokenizer;
    const tools = Array.isArray(chat.tools) ? chat.tools : undefined;
    return tok.encode(
      tok.render(chat.messages as JsonObject[], { ...(tools ? { tools } : {}), addGenerationPrompt: true }),
    ).length;
  }
}
