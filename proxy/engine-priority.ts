/**
 * Request priority at the engine. A task's `engine_priority` (higher runs first, Polar's one
 * convention) reaches the proxy in the session's meta; the proxy sends it on each of the session's
 * engine requests in the engine's own convention, and only to an engine that schedules by it.
 *
 * Why the proxy decides and not the harness: an engine that does not schedule by priority either
 * ignores the field (SGLang) or refuses the request (vLLM: `Got priority … but Priority scheduling
 * is not enabled.`, HTTP 400; SGLang too with `--abort-on-priority-when-disabled`), so a priority
 * must never be sent blindly.
 *
 * How each engine says it (checked against their sources; docs/engines.md "Request priority"):
 * - SGLang: `--enable-priority-scheduling`; HIGHER values first unless
 *   `--schedule-low-priority-values-first`. Both are server arguments, which `GET /server_info`
 *   (`/get_server_info` before 0.5) returns flat, so `auto` reads them at start.
 * - vLLM: `--scheduling-policy priority`; LOWER values first. vLLM does not report its policy
 *   (its `/server_info` exists only in dev mode), so `auto` sends nothing to vLLM: the operator
 *   says `lower_first` when the server runs with that policy.
 *
 * @module
 */
import type { JsonObject, Logger } from "../protocol";
import { LIMITS } from "../protocol/limits";
import type { EngineName } from "./engines";
import { ProxyHttpError } from "./errors";

/** Which requests an engine runs first, by the integer `priority` they carry. */
export type PriorityOrder = "higher_first" | "lower_first";

/**
 * The proxy's `--engine-priority`: `auto` asks the engine (SGLang) and sends nothing where it
 * cannot tell (vLLM); `off` never sends; `higher_first` / `lower_first` state the engine's order.
 */
export type EnginePrioritySetting = "auto" | "off" | PriorityOrder;

/** Every value of {@link EnginePrioritySetting}, for option parsers. */
export const ENGINE_PRIORITY_SETTINGS: readonly EnginePrioritySetting[] = [
  "auto",
  "off",
  "higher_first",
  "lower_first",
];

/** What the proxy does with sessions' priorities, and why (said once at start). */
export interface EnginePriorityPlan {
  /** The order priorities are sent in; null: they are not sent. */
  order: PriorityOrder | null;
  /** Why, in words for the start-up log. */
  reason: string;
}

/** The replicas disagree on how they schedule by priority (the proxy refuses to start). */
export class EnginePriorityError extends Error {
  override readonly name = "EnginePriorityError";
}

/** What one replica's server arguments say about priority scheduling; null when it does not say. */
interface ReplicaPriority {
  url: string;
  enabled: boolean;
  order: PriorityOrder;
}

async function serverInfo(base: string, timeoutMs: number): Promise<JsonObject | null> {
  for (const path of ["/server_info", "/get_server_info"]) {
    try {
      const r = await fetch(`${base}${path}`, { signal: AbortSignal.timeout(timeoutMs) });
      if (!r.ok) continue;
      const body = (await r.json()) as unknown;
      if (body && typeof body === "object" && !Array.isArray(body)) return body as JsonObject;
    } catch {
      // Unreachable, or not JSON: try the older path, then say nothing.
    }
  }
  return null;
}

/**
 * What one SGLang replica's server arguments say about priority scheduling, or null when it
 * reports none (unreachable, a router, an older build without the flag).
 *
 * @example
 * ```ts
 * await sglangPriority("http://127.0.0.1:30000");
 * // { url: "http://127.0.0.1:30000", enabled: true, order: "higher_first" }
 * ```
 */
export async function sglangPriority(
  url: string,
  opts: { timeoutMs?: number } = {},
): Promise<ReplicaPriority | null> {
  const info = await serverInfo(url.replace(/\/+$/, ""), opts.timeoutMs ?? 3_000);
  if (!info || typeof info.enable_priority_scheduling !== "boolean") return null;
  return {
    url,
    enabled: info.enable_priority_scheduling,
    order: info.schedule_low_priority_values_first === true ? "lower_first" : "higher_first",
  };
}

/** Input of {@link resolveEnginePriority}. */
export interface ResolveEnginePriorityInput {
  engine: EngineName;
  setting: EnginePrioritySetting;
  /** The engine replicas (each SGLang replica is asked under `auto`; those that answer must agree). */
  urls: readonly string[];
  logger?: Logger;
  timeoutMs?: number;
}

/**
 * Decides, once at start, whether and how sessions' priorities are sent, and logs it in one line.
 *
 * @example
 * ```ts
 * await resolveEnginePriority({ engine: "sglang", setting: "auto", urls: [engineUrl] });
 * // { order: "higher_first", reason: "the engine schedules by priority (…)" }
 * ```
 */
export async function resolveEnginePriority(input: ResolveEnginePriorityInput): Promise<EnginePriorityPlan> {
  const plan = await decide(input);
  input.logger?.info(
    plan.order === null
      ? `engine priority: not sent (${plan.reason})`
      : `engine priority: sent, ${plan.order === "higher_first" ? "higher" : "lower"} values first (${plan.reason})`,
    { engine_priority: plan.order ?? "off" },
  );
  return plan;
}

async function decide(input: ResolveEnginePriorityInput): Promise<EnginePriorityPlan> {
  if (input.setting === "off") return { order: null, reason: "--engine-priority off" };
  if (input.setting !== "auto") return { order: input.setting, reason: `--engine-priority ${input.setting}` };
  if (input.engine === "vllm") {
    return {
      order: null,
      reason:
        "vLLM does not report its scheduling policy; give --engine-priority lower_first when it runs with --scheduling-policy priority",
    };
  }
  const opts = input.timeoutMs !== undefined ? { timeoutMs: input.timeoutMs } : {};
  const reports = (await Promise.all(input.urls.map((u) => sglangPriority(u, opts)))).filter(
    (r): r is ReplicaPriority => r !== null,
  );
  const first = reports[0];
  if (!first) {
    return {
      order: null,
      reason:
        "the engine reports no enable_priority_scheduling at /server_info; give --engine-priority higher_first or lower_first when it schedules by priority",
    };
  }
  const key = (r: ReplicaPriority) => (r.enabled ? r.order : "off");
  const other = reports.find((r) => key(r) !== key(first));
  if (other) {
    throw new EnginePriorityError(
      `the engines disagree on priority scheduling: ${first.url} is ${describe(first)}, ${other.url} is ${describe(other)}; start them alike or give --engine-priority`,
    );
  }
  return first.enabled
    ? { order: first.order, reason: `${first.url} runs with --enable-priority-scheduling` }
    : {
        order: null,
        reason: `${first.url} runs without --enable-priority-scheduling, so sessions' priorities would be ignored or refused`,
      };
}

function describe(r: ReplicaPriority): string {
  return r.enabled ? `scheduling by priority, ${r.order.replace("_", " ")}` : "not scheduling by priority";
}

/**
 * The session's `engine_priority` from its meta (set by the gateway from a validated task), or
 * null when it has none. A malformed one (a session opened by hand) is refused, 400 naming the
 * field, before anything is sent.
 *
 * @example
 * ```ts
 * sessionEnginePriority({ engine_priority: -12 }); // -12
 * sessionEnginePriority({}); // null
 * ```
 */
export function sessionEnginePriority(meta: JsonObject): number | null {
  const p = meta.engine_priority;
  if (p === undefined || p === null) return null;
  if (typeof p !== "number" || !Number.isSafeInteger(p) || Math.abs(p) > LIMITS.maxEnginePriority) {
    throw new ProxyHttpError(
      400,
      "invalid_request_error",
      "invalid_request",
      `meta.engine_priority: must be an integer between -${LIMITS.maxEnginePriority} and ${LIMITS.maxEnginePriority}, got ${JSON.stringify(p)}`,
      "meta.engine_priority",
    );
  }
  return p;
}

/**
 * The `priority` to put on an engine request for a session of priority `p` (higher runs first),
 * or null when none is sent: no order (the engine does not schedule by priority) or no priority.
 *
 * @example
 * ```ts
 * enginePriorityValue(5, "higher_first"); // 5
 * enginePriorityValue(5, "lower_first"); // -5
 * enginePriorityValue(5, null); // null
 * ```
 */
export function enginePriorityValue(p: number | null, order: PriorityOrder | null): number | null {
  if (p === null || order === null) return null;
  // `0 - p`, not `-p`: a priority of 0 stays 0, never -0 (JSON has no -0, but a test's deep equal does).
  return order === "higher_first" ? p : 0 - p;
}

/**
 * Puts the session's priority on an engine request body (`priority`, top level: SGLang's
 * `/generate` and both engines' chat endpoints), or removes one the harness sent: the proxy
 * alone decides what the engine is asked to schedule by. Returns the value sent, or null.
 *
 * @example
 * ```ts
 * const body = { messages, priority: 99 };
 * applyEnginePriority(body, { engine_priority: 3 }, "lower_first"); // -3, body.priority === -3
 * applyEnginePriority(body, {}, "lower_first"); // null, no body.priority
 * ```
 */
export function applyEnginePriority(
  body: JsonObject,
  meta: JsonObject,
  order: PriorityOrder | null,
): number | null {
  delete body.priority;
  const value = enginePriorityValue(sessionEnginePriority(meta), order);
  if (value !== null) body.priority = value;
  return value;
}
