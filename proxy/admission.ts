/**
 * Admission of one harness call to the engine: through the fence (waiting while paused), to a
 * replica whose weights are recent enough for the session's `min_policy_version` (holding the
 * call, outside the fence, until one is or until `policyVersionWaitMs` of holding has passed), and
 * again after resume when a pause in `abort` mode aborted it before anything reached the harness.
 *
 * @module
 */
import type http from "node:http";
import type { JsonObject, Logger } from "../protocol";
import { ROUTING_KEY_HEADER } from "./engines/sglang-openai";
import { PolicyVersionGapError } from "./errors";
import type { FenceTicket, InferenceFence } from "./fence";
import type { ReplicaSet } from "./replicas";
import { postJson } from "./upstream";

/**
 * How long the proxy waits for SGLang to acknowledge `/abort_request` (ms); best effort.
 *
 * @example
 * ```ts
 * postJson(`${base}/abort_request`, { rid }, headers, { timeoutMs: ABORT_REQUEST_TIMEOUT_MS });
 * ```
 */
export const ABORT_REQUEST_TIMEOUT_MS = 5_000;
/**
 * How often a held call looks again for a replica with recent enough weights (ms).
 *
 * @example
 * ```ts
 * await sleep(HOLD_RECHECK_MS, signal);
 * ```
 */
export const HOLD_RECHECK_MS = 1_000;
/**
 * Default bound on how long a call is held because every replica is behind its session's
 * `min_policy_version` (ms); time at a paused fence is not counted. 120 s: past the 1 s re-check
 * and the time one replica takes to load a checkpoint in a rolling update made outside the fence
 * (tens of seconds for SGLang's `update_weights_from_disk`), yet a fifth of a session's default
 * 600 s budget, so a trainer whose update left the engines' label behind hears of it in minutes,
 * with the gap named, not after a whole budget per session.
 *
 * @example
 * ```ts
 * startProxy({ engine: "sglang", engineUrl, modelServed, policyVersionWaitMs: DEFAULT_POLICY_VERSION_WAIT_MS });
 * ```
 */
export const DEFAULT_POLICY_VERSION_WAIT_MS = 120_000;

/** One admission: the fence ticket, the signal the engine call must obey, the replicas to skip. */
export interface Admission {
  ticket: FenceTicket;
  /** The policy version in effect when the call was admitted. */
  policyVersion: string | null;
  /** Fires when the harness hangs up or a pause in `abort` mode aborts the call. */
  signal: AbortSignal;
  /** Replicas whose weights are behind the session's `min_policy_version`. */
  exclude: ReadonlySet<string>;
}

/** What {@link admitted} needs from the proxy. */
export interface AdmissionDeps {
  fence: InferenceFence;
  replicas: ReplicaSet;
  /** Longest hold for `min_policy_version` (ms); default {@link DEFAULT_POLICY_VERSION_WAIT_MS}. */
  policyVersionWaitMs?: number;
  logger?: Logger;
}

/**
 * The session's `min_policy_version` (from its meta, set by the gateway from the task), or null.
 *
 * @example
 * ```ts
 * minPolicyVersion({ min_policy_version: 3 }); // 3
 * ```
 */
export function minPolicyVersion(meta: JsonObject): number | null {
  const v = meta.min_policy_version;
  return typeof v === "number" && Number.isInteger(v) && v >= 0 ? v : null;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(Object.assign(new Error("request aborted by the client"), { name: "AbortError" }));
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(Object.assign(new Error("request aborted by the client"), { name: "AbortError" }));
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Runs `serve` admitted: enters the fence; with a `min_policy_version`, finds the replicas still
 * behind it (re-asking their `/model_info`) and, when none is left to serve, leaves the fence and
 * holds the call for {@link HOLD_RECHECK_MS} before trying again. Once it has been held
 * `policyVersionWaitMs` in all (time the fence was paused not counted: waiting out a weight update
 * is expected), it throws {@link PolicyVersionGapError} naming the version and what each replica
 * reports; 0 fails it at the first look. A call aborted by the fence before any byte went to the
 * harness is admitted again (after resume) and served anew.
 *
 * @example
 * ```ts
 * const record = await admitted(deps, call.session.meta, call.res, clientGone.signal, (a) => serve(a));
 * ```
 */
export async function admitted<T>(
  deps: AdmissionDeps,
  meta: JsonObject,
  res: http.ServerResponse,
  clientGone: AbortSignal,
  serve: (admission: Admission) => Promise<T>,
): Promise<T> {
  const min = minPolicyVersion(meta);
  const waitMs = deps.policyVersionWaitMs ?? DEFAULT_POLICY_VERSION_WAIT_MS;
  let holding = false;
  // Held time so far, and where the current hold began (wall clock and the fence's paused clock).
  let heldMs = 0;
  let holdStart: { at: number; paused: number } | null = null;
  for (;;) {
    const ticket = await deps.fence.enter(clientGone);
    let held = false;
    try {
      const exclude = min === null ? new Set<string>() : await deps.replicas.behind(min);
      if (exclude.size >= deps.replicas.size && deps.replicas.size > 0) {
        held = true;
      } else {
        if (holding) deps.logger?.info("held call released: a replica serves its policy version", { min });
        holding = false;
        return await serve({
          ticket,
          policyVersion: ticket.policyVersion,
          signal: AbortSignal.any([clientGone, ticket.signal]),
          exclude,
        });
      }
    } catch (err) {
      // Aborted by a pause before the harness saw anything: serve it again once resumed.
      if (ticket.aborted && !clientGone.aborted && !res.headersSent) {
        deps.fence.noteReissue();
        continue;
      }
      throw err;
    } finally {
      deps.fence.leave(ticket);
    }
    if (held && min !== null) {
      // Since the last look: wall time less the time the fence was paused meanwhile.
      const now = Date.now();
      const paused = deps.fence.pausedMs();
      if (holdStart) heldMs += Math.max(0, now - holdStart.at - (paused - holdStart.paused));
      holdStart = { at: now, paused };
      if (heldMs >= waitMs) {
        const err = new PolicyVersionGapError({
          needed: min,
          reported: deps.replicas.status().map((r) => ({ url: r.url, weight_version: r.weight_version })),
          held_ms: heldMs,
          wait_ms: waitMs,
        });
        deps.logger?.warn("held call failed: no replica reached its min_policy_version in time", {
          error: err.message,
        });
        throw err;
      }
      if (!holding)
        deps.logger?.info("holding a call: every replica is behind its min_policy_version", { min });
      holding = true;
      await sleep(Math.min(HOLD_RECHECK_MS, waitMs - heldMs), clientGone);
    }
  }
}

/**
 * Tells SGLang to stop request `rid` (`POST /abort_request`). Never throws: a dead engine has
 * nothing left to abort. With `replicas`, a call that went to the SGLang router itself is not
 * posted there: the router has no `/abort_request` (its fallback answers 404), so the generation
 * is stopped by the call's closed connection (SGLang aborts a request whose client went away),
 * and the replica's status counts it as `aborts_by_disconnect`.
 *
 * @example
 * ```ts
 * await abortRequest("http://127.0.0.1:30000", "s1-t0-ab12", "s1", replicas);
 * ```
 */
export async function abortRequest(
  base: string,
  rid: string,
  sessionId: string,
  replicas?: Pick<ReplicaSet, "abortByDisconnect">,
): Promise<void> {
  if (replicas?.abortByDisconnect(base)) return;
  try {
    await postJson(
      `${base}/abort_request`,
      { rid },
      { "content-type": "application/json", [ROUTING_KEY_HEADER]: sessionId },
      { timeoutMs: ABORT_REQUEST_TIMEOUT_MS },
    );
  } catch {
    // Best effort.
  }
}
