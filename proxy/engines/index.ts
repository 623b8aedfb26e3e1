/**
 * Engine adapters: how an internal chat request is served to one kind of inference engine and how
 * the engine's answer is turned into token ids. One adapter per engine name.
 *
 * @module
 */
import type { JsonObject } from "../../protocol";
import { isObject, objects } from "../json";
import {
  buildSglangChatRequest,
  type NormalizedCompletion,
  normalizeSglangChatResponse,
  recordableSglangResponse,
  type ServedRequest,
  SGLANG_CHOICE_EXTENSIONS,
} from "./sglang-openai";
import {
  buildVllmChatRequest,
  normalizeVllmChatResponse,
  recordableVllmResponse,
  vllmClientCompletion,
} from "./vllm";

export type { NormalizedCompletion, ServedRequest } from "./sglang-openai";
export { VllmStreamAccumulator } from "./vllm";

/** Engine names the proxy can serve. */
export type EngineName = "sglang-openai" | "vllm";

/** Names accepted by {@link engineAdapter}. */
export const ENGINE_NAMES: readonly EngineName[] = ["sglang-openai", "vllm"];

/** What the proxy needs from an engine. */
export interface EngineAdapter {
  name: EngineName;
  /** Path of the chat endpoint on the engine. */
  chatPath: string;
  /** True when the engine returns token ids on streamed answers (so the proxy can stream for real). */
  streamsWithIds: boolean;
  buildChatRequest(
    chat: JsonObject,
    opts: { modelServed: string; sessionId: string; stream?: boolean },
  ): ServedRequest;
  normalizeChatResponse(raw: unknown): NormalizedCompletion;
  recordableResponse(raw: JsonObject): JsonObject;
  /** The completion in the internal (OpenAI chat) form, with the engine's token extensions removed. */
  clientCompletion(raw: JsonObject): JsonObject;
}

function sglangClientCompletion(raw: JsonObject): JsonObject {
  return {
    ...raw,
    choices: objects(raw.choices).map((c) => {
      const out: JsonObject = { ...c };
      for (const key of SGLANG_CHOICE_EXTENSIONS) delete out[key];
      if (isObject(out.logprobs)) {
        // Patched builds stamp token ids on logprob entries; OpenAI clients know no such field.
        out.logprobs = {
          ...out.logprobs,
          content: objects(out.logprobs.content).map(({ token_id: _t, ...e }) => e),
        };
      }
      return out;
    }),
  };
}

const ADAPTERS: Record<EngineName, EngineAdapter> = {
  "sglang-openai": {
    name: "sglang-openai",
    chatPath: "/v1/chat/completions",
    streamsWithIds: false,
    buildChatRequest: buildSglangChatRequest,
    normalizeChatResponse: normalizeSglangChatResponse,
    recordableResponse: recordableSglangResponse,
    clientCompletion: sglangClientCompletion,
  },
  vllm: {
    name: "vllm",
    chatPath: "/v1/chat/completions",
    streamsWithIds: true,
    buildChatRequest: buildVllmChatRequest,
    normalizeChatResponse: normalizeVllmChatResponse,
    recordableResponse: recordableVllmResponse,
    clientCompletion: vllmClientCompletion,
  },
};

/**
 * Looks up the adapter of an engine; throws on an unknown name.
 *
 * @example
 * ```ts
 * const engine = engineAdapter("vllm");
 * ```
 */
export function engineAdapter(name: string): EngineAdapter {
  const adapter = (ADAPTERS as Record<string, EngineAdapter | undefined>)[name];
  if (!adapter) throw new Error(`engine: unknown engine '${name}' (known: ${ENGINE_NAMES.join(", ")})`);
  return adapter;
}
