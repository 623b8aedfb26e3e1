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

/**
 * Engine names the proxy can serve: `sglang` is the token mode (the proxy renders the template and
 * calls `/generate` with ids; the default for SGLang), the others go through the engine's chat API.
 */
export type EngineName = "sglang" | "sglang-openai" | "vllm";

/** Every engine name the proxy accepts. */
export const ENGINE_NAMES: readonly EngineName[] = ["sglang", "sglang-openai", "vllm"];

/** Engines served through their OpenAI chat endpoint (names accepted by {@link engineAdapter}). */
export type ChatEngineName = Exclude<EngineName, "sglang">;

/**
 * True for the token-mode engine (`sglang`), which has no chat adapter.
 *
 * @example
 * ```ts
 * isTokenEngine("sglang"); // true
 * isTokenEngine("vllm"); // false
 * ```
 */
export function isTokenEngine(name: string): name is "sglang" {
  return name === "sglang";
}

/** What the proxy needs from an engine. */
export interface EngineAdapter {
  name: ChatEngineName;
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

const ADAPTERS: Record<ChatEngineName, EngineAdapter> = {
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
 * Looks up the chat adapter of an engine; throws on an unknown name and for `sglang` (token mode
 * has no chat adapter: see `proxy/engines/sglang-token/`).
 *
 * @example
 * ```ts
 * const engine = engineAdapter("vllm");
 * ```
 */
export function engineAdapter(name: string): EngineAdapter {
  const adapter = (ADAPTERS as Record<string, EngineAdapter | undefined>)[name];
  if (!adapter) {
    const known = Object.keys(ADAPTERS).join(", ");
    throw new Error(
      isTokenEngine(name)
        ? "engine: 'sglang' is the token mode and has no chat adapter"
        : `engine: unknown engine '${name}' (known: ${ENGINE_NAMES.join(", ")}; chat adapters: ${known})`,
    );
  }
  return adapter;
}
