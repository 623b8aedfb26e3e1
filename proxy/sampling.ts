/**
 * The trainer's sampling policy over the harness's: a task's `agent.sampling` reaches the proxy in
 * the session's meta (`meta.sampling`, set by the gateway), and every model call of that session is
 * sampled with the policy's fields in place of the harness's. Applied to the internal chat form, so
 * it holds on every API family and every engine (token mode reads these fields into `/generate`'s
 * sampling parameters; the chat engines receive the body as is). Each record keeps both sides.
 *
 * @module
 */
import { type JsonObject, SamplingPolicy } from "../protocol";
import { ProxyHttpError } from "./errors";

/** The fields a policy may set, under their internal (OpenAI chat) names. */
export const POLICY_KEYS = ["temperature", "top_p", "top_k", "min_p"] as const;
type PolicyKey = (typeof POLICY_KEYS)[number];

/** What one call asked and got, as kept in the record's `metadata.sampling`. */
export interface SamplingRecord {
  /** What the harness sent (only the fields it set). */
  requested: JsonObject;
  /** The task's policy (only its set fields). */
  policy: JsonObject;
  /** What the engine was asked to sample with: the harness's values with the policy's over them. */
  applied: JsonObject;
  /** Fields whose value the policy changed (set by the policy and different from the harness's). */
  overridden: string[];
}

/**
 * The session's policy from its meta, or null when the task set none. The gateway put it there from
 * a validated task; a malformed one (a session opened by hand) is refused, 400 naming the field, rather than
 * half-applied.
 *
 * @example
 * ```ts
 * sessionSamplingPolicy({ sampling: { temperature: 1 } }); // { temperature: 1 }
 * sessionSamplingPolicy({}); // null
 * ```
 */
export function sessionSamplingPolicy(meta: JsonObject): SamplingPolicy | null {
  if (meta.sampling === undefined || meta.sampling === null) return null;
  const parsed = SamplingPolicy.safeParse(meta.sampling);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const field = ["meta", "sampling", ...(issue?.path ?? []).map(String)].join(".");
    const message = `${field}: ${issue?.message ?? "invalid"}`;
    throw new ProxyHttpError(400, "invalid_request_error", "invalid_request", message, field);
  }
  return Object.keys(parsed.data).length === 0 ? null : parsed.data;
}

/**
 * Applies `policy` to an internal chat request in place and says what changed; with no policy the
 * body is untouched and the record still says what the harness sent.
 *
 * @example
 * ```ts
 * const chat = { messages: [], temperature: 0 };
 * applySamplingPolicy(chat, { temperature: 1 });
 * // chat.temperature === 1; { requested: { temperature: 0 }, applied: { temperature: 1 }, overridden: ["temperature"], … }
 * ```
 */
export function applySamplingPolicy(chat: JsonObject, policy: SamplingPolicy | null): SamplingRecord {
  const requested: JsonObject = {};
  for (const k of POLICY_KEYS) if (chat[k] !== undefined && chat[k] !== null) requested[k] = chat[k];
  const set: JsonObject = {};
  const overridden: string[] = [];
  for (const k of POLICY_KEYS) {
    const v = policy?.[k as PolicyKey];
    if (v === undefined) continue;
    set[k] = v;
    if (requested[k] !== v) overridden.push(k);
    chat[k] = v;
  }
  return { requested, policy: set, applied: { ...requested, ...set }, overridden };
}
