/**
 * Engine adapters: how a harness request is served to one kind of inference engine and how the
 * engine's answer is turned into token ids. One adapter per engine name.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import {
  buildSglangChatRequest,
  type NormalizedCompletion,
  normalizeSglangChatResponse,
  recordableSglangResponse,
  type ServedRequest,
} from "./sglang-openai";

export type { NormalizedCompletion, ServedRequest } from "./sglang-openai";

/** Engine names the proxy can serve. */
export type EngineName = "sglang-openai";

/** What the proxy needs from an engine. */
export interface EngineAdapter {
  name: EngineName;
  /** Path of the chat endpoint on the engine. */
  chatPath: string;
  buildChatRequest(original: JsonObject, opts: { modelServed: string; sessionId: string }): ServedRequest;
  normalizeChatResponse(raw: unknown): NormalizedCompletion;
  recordableResponse(raw: JsonObject): JsonObject;
}

const ADAPTERS: Record<EngineName, EngineAdapter> = {
  "sglang-openai": {
    name: "sglang-openai",
    chatPath: "/v1/chat/completions",
    buildChatRequest: buildSglangChatRequest,
    normalizeChatResponse: normalizeSglangChatResponse,
    recordableResponse: recordableSglangResponse,
  },
};

/**
 * Looks up the adapter of an engine; throws on an unknown name.
 *
 * @example
 * ```ts
 * const engine = engineAdapter("sglang-openai");
 * ```
 */
export function engineAdapter(name: string): EngineAdapter {
  const adapter = (ADAPTERS as Record<string, EngineAdapter | undefined>)[name];
  if (!adapter)
    throw new Error(`engine: unknown engine '${name}' (known: ${Object.keys(ADAPTERS).join(", ")})`);
  return adapter;
}
