/**
 * Admission of one harness call to the engine: through the fence (waiting while paused), to a
 * replica whose weights are recent enough for the session's `min_policy_version` (holding the
 * call, outside the fence, until one is), and again after resume when a pause in `abort` mode
 * aborted it before anything reached the harness.
 *
 * @module
 */
import type http from "node:http";
import type { JsonObject, Logger } from "../protocol";
import { ROUTING_KEY_HEADER } from "./engines/sglang-openai";
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
 * holds the call for {@link HOLD_RECHECK_MS} before trying again — never failing it, so only the
 * harness hanging up (or the session's budget killing it) ends the wait. A call aborted by the
 * fence before any byte went to the harness is admitted again (after resume) and served anew.
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
  let holding = false;
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
    if (held) {
      if (!holding)
        deps.logger?.info("holding a call: every replica is behind its min_policy_version", { min });
      holding = true;
      await sleep(HOLD_RECHECK_MS, clientGone);
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
