/**
 * The inference fence of a queue: the durable state a trainer sets around a weight update
 * (pause → update the engines → set the policy version → resume), the bodies of the routes that
 * change it, and the rule by which policy and weight versions are compared.
 *
 * The control plane stores the state in every dispatcher (shard) of the queue before it tells the
 * gateways, and replays it to every gateway in `welcome`, so a gateway that (re)connects during a
 * pause comes up paused with the current version.
 *
 * @module
 */
import { z } from "zod";

/**
 * What `pause` does with model calls in flight: `drain` waits for them to finish; `abort` aborts
 * them at the engine, and the proxy re-issues each after resume when nothing reached the harness.
 *
 * @example
 * ```ts
 * FenceMode.parse("abort");
 * ```
 */
export const FenceMode = z.enum(["drain", "abort"]);
export type FenceMode = z.infer<typeof FenceMode>;

/**
 * A policy version: the trainer package uses decimal integers ("0", "1", …).
 *
 * @example
 * ```ts
 * PolicyVersion.parse("12");
 * ```
 */
export const PolicyVersion = z.string().min(1).max(256);

/**
 * The fence of one queue. `fence_seq` grows on every change; `paused_at` is when the current
 * pause began (null while running).
 *
 * @example
 * ```ts
 * FenceState.parse({ queue: "default", paused: true, mode: "drain", policy_version: "3",
 *   fence_seq: 7, paused_at: 1_700_000_000_000, updated_at: 1_700_000_000_000 });
 * ```
 */
export const FenceState = z.strictObject({
  queue: z.string(),
  paused: z.boolean(),
  mode: FenceMode.nullable(),
  policy_version: z.string().nullable(),
  fence_seq: z.number().int().min(0),
  paused_at: z.number().int().nullable(),
  updated_at: z.number().int(),
});
export type FenceState = z.infer<typeof FenceState>;

/**
 * One gateway's answer to a fence change or status query.
 *
 * @example
 * ```ts
 * FenceNode.parse({ node_id: "gpu-0", ok: true, paused: true, inflight: 0, policy_version: "3" });
 * ```
 */
export const FenceNode = z.strictObject({
  node_id: z.string(),
  ok: z.boolean(),
  paused: z.boolean(),
  inflight: z.number().int().min(0),
  policy_version: z.string().nullable(),
  error: z.string().optional(),
});
export type FenceNode = z.infer<typeof FenceNode>;

/**
 * Longest `timeout_seconds` of a pause.
 *
 * @example
 * ```ts
 * Math.min(requested, MAX_FENCE_TIMEOUT_SECONDS);
 * ```
 */
export const MAX_FENCE_TIMEOUT_SECONDS = 3600;
/**
 * `timeout_seconds` of a pause that gives none.
 *
 * @example
 * ```ts
 * PauseRequest.parse({}).timeout_seconds === DEFAULT_FENCE_TIMEOUT_SECONDS; // true
 * ```
 */
export const DEFAULT_FENCE_TIMEOUT_SECONDS = 300;

/**
 * Body of `POST /v1/queues/:queue/inference/pause` (and `/v1/admin/inference/pause`). One timeout
 * governs both the gateways' drain and the control plane's wait for their answers.
 *
 * @example
 * ```ts
 * PauseRequest.parse({}); // { mode: "drain", timeout_seconds: 300 }
 * ```
 */
export const PauseRequest = z.strictObject({
  mode: FenceMode.default("drain"),
  timeout_seconds: z.number().min(0).max(MAX_FENCE_TIMEOUT_SECONDS).default(DEFAULT_FENCE_TIMEOUT_SECONDS),
});
export type PauseRequest = z.infer<typeof PauseRequest>;

/**
 * Body of `POST /v1/queues/:queue/inference/resume`: sets the version (if given), then resumes.
 *
 * @example
 * ```ts
 * ResumeRequest.parse({ policy_version: "4" });
 * ```
 */
export const ResumeRequest = z.strictObject({ policy_version: PolicyVersion.optional() });
export type ResumeRequest = z.infer<typeof ResumeRequest>;

/**
 * Body of `POST /v1/queues/:queue/policy_version`.
 *
 * @example
 * ```ts
 * PolicyVersionRequest.parse({ policy_version: "4" });
 * ```
 */
export const PolicyVersionRequest = z.strictObject({ policy_version: PolicyVersion });
export type PolicyVersionRequest = z.infer<typeof PolicyVersionRequest>;

/**
 * Answer of the routes that change a queue's fence. `ok`: every connected gateway acknowledged.
 *
 * @example
 * ```ts
 * const { ok, fence, nodes } = FenceChangeResponse.parse(await res.json());
 * ```
 */
export const FenceChangeResponse = z.strictObject({
  queue: z.string(),
  fence: FenceState,
  ok: z.boolean(),
  nodes: z.array(FenceNode),
});
export type FenceChangeResponse = z.infer<typeof FenceChangeResponse>;

/**
 * Answer of `GET /v1/queues/:queue/inference` (no side effect).
 *
 * @example
 * ```ts
 * FenceStatusResponse.parse(await res.json()).fence.paused;
 * ```
 */
export const FenceStatusResponse = z.strictObject({
  queue: z.string(),
  fence: FenceState,
  nodes: z.array(FenceNode),
});
export type FenceStatusResponse = z.infer<typeof FenceStatusResponse>;

/**
 * SGLang's weight version before any versioned update: the initial weights, policy version 0.
 *
 * @example
 * ```ts
 * versionNumber(DEFAULT_WEIGHT_VERSION); // 0
 * ```
 */
export const DEFAULT_WEIGHT_VERSION = "default";

/**
 * A weight or policy version as a number for comparisons: a decimal integer string, or SGLang's
 * `"default"` (the weights it started with, version 0); null for anything else ("unknown").
 *
 * @example
 * ```ts
 * versionNumber("12"); // 12
 * versionNumber("default"); // 0
 * versionNumber("step-3"); // null
 * ```
 */
export function versionNumber(version: string | null | undefined): number | null {
  if (version === DEFAULT_WEIGHT_VERSION) return 0;
  if (typeof version !== "string" || !/^\d{1,15}$/.test(version)) return null;
  return Number(version);
}
