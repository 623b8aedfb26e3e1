/**
 * API family detection (path, then header, then body — upstream's order) and the session key a
 * harness sends in whichever header its SDK uses.
 *
 * @module
 */
import type { IncomingHttpHeaders } from "node:http";
import { isObject } from "../json";
import { anthropic } from "./anthropic";
import { google } from "./google";
import { openAiChat } from "./openai-chat";
import { responses } from "./responses";
import type { Family } from "./types";

export { anthropic, anthropicToChat } from "./anthropic";
export { completionDeltas, mergeSystem } from "./common";
export { google, googleModelFromPath, googleToChat } from "./google";
export { openAiChat } from "./openai-chat";
export { responses } from "./responses";
export type * from "./types";

/**
 * The family of a request, from its path, else its headers, else its body; OpenAI Chat by default.
 *
 * @example
 * ```ts
 * detectFamily("/v1/messages", {}, {}).api; // "anthropic"
 * detectFamily("/anything", {}, { contents: [] }).api; // "google"
 * ```
 */
export function detectFamily(path: string, headers: IncomingHttpHeaders, body: unknown): Family {
  if (path.includes("/messages")) return anthropic;
  if (path.includes("/chat/completions")) return openAiChat;
  if (path.includes("/responses")) return responses;
  if (/:(stream)?generateContent$/i.test(path) || path.includes(":countTokens")) return google;
  if (headers["anthropic-version"] !== undefined) return anthropic;
  if (isObject(body)) {
    if (body.contents !== undefined) return google;
    if (body.input !== undefined) return responses;
  }
  return openAiChat;
}

/**
 * The session key of a request: `Authorization: Bearer` (OpenAI), `x-api-key` (Anthropic),
 * `x-goog-api-key` or `?key=` (Gemini SDKs); null when none is given.
 *
 * @example
 * ```ts
 * requestKey({ "x-api-key": "sk-polar-…" }, new URLSearchParams()); // "sk-polar-…"
 * ```
 */
export function requestKey(headers: IncomingHttpHeaders, query: URLSearchParams): string | null {
  const auth = headers.authorization;
  if (typeof auth === "string") {
    const m = /^Bearer\s+(.+)$/i.exec(auth.trim());
    if (m?.[1]) return m[1].trim();
  }
  for (const name of ["x-api-key", "x-goog-api-key"]) {
    const v = headers[name];
    if (typeof v === "string" && v.trim()) return v.trim();
  }
  return query.get("key");
}
