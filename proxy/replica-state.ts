/**
 * One engine replica's state: what `status()` reports of it, and what the replica set keeps beside
 * that to route, check and version it. The set (`replicas.ts`) owns the replicas; health
 * (`replica-health.ts`), affinity (`replica-affinity.ts`) and discovery (`replica-discovery.ts`)
 * read and update them.
 *
 * @module
 */
import { SingleFlight } from "../protocol";

/** One replica as reported by `status()`. */
export interface ReplicaStatus {
  url: string;
  healthy: boolean;
  /**
   * The last health probe timed out while the replica was serving calls: it stays in (a busy
   * SGLang answers `/health` late, it is not down).
   */
  busy?: boolean;
  /** Data-parallel ranks the router listed for this server (`url@rank`, `--dp-aware`). */
  dp_ranks?: number[];
  /** What session affinity the proxy gets on this replica (set for the router itself). */
  affinity?: string;
  /** How an abandoned generation is stopped here: `abort_request` or (router) `disconnect`. */
  aborts?: "abort_request" | "disconnect";
  /** Aborts that could not be sent as `/abort_request` (the router has none): stopped by disconnect. */
  aborts_by_disconnect?: number;
  inflight: number;
  completions: number;
  failures: number;
  last_error: string | null;
  /** `static` (given), `worker` (found through the router) or `router` (the router itself). */
  source: "static" | "worker" | "router";
  /** The weight version the replica last reported (`/model_info` or an answer); null: unknown. */
  weight_version: string | null;
}

/** A replica's whole state: its status plus what routing, health checks and versions keep. */
export interface Replica extends ReplicaStatus {
  /** Until when (epoch ms) the replica stays out after an unavailable answer; 0 = none. */
  coolUntil: number;
  /** DP ranks of this server (empty: not DP-aware); sessions are pinned to one each. */
  ranks: number[];
  /** When the last completion came back (epoch ms); 0 = never. */
  lastCompletionAt: number;
  /** A health probe is in flight (probes never overlap on one replica). */
  probing: boolean;
  /** The known weight version may be out of date (never learned, or weights updated since). */
  versionStale: boolean;
  /** When `/model_info` was last asked (epoch ms); 0 = never. */
  versionCheckedAt: number;
  /** The `/model_info` request in flight, shared by every caller that asks meanwhile. */
  versionProbe: SingleFlight<void>;
}

/** How a call on a replica ended. */
export interface ReplicaOutcome {
  /** A completion came back (counted in `completions`). */
  ok: boolean;
  /** The replica itself failed (counted in `failures`); false for the caller's own 4xx. */
  failed?: boolean;
  error?: string;
  /** A refused connection: unhealthy until the health check says otherwise. */
  transport?: boolean;
  /** 502/503/504 before any byte reached the harness: unhealthy for the cool-down. */
  unavailable?: boolean;
}

/**
 * A replica not yet heard from: healthy until a check or a call says otherwise, version unknown.
 *
 * @example
 * ```ts
 * const r = freshReplica("http://127.0.0.1:30000", "static"); // r.healthy === true, r.versionStale === true
 * ```
 */
export function freshReplica(url: string, source: ReplicaStatus["source"]): Replica {
  return {
    url,
    healthy: true,
    inflight: 0,
    completions: 0,
    failures: 0,
    last_error: null,
    source,
    weight_version: null,
    coolUntil: 0,
    ranks: [],
    lastCompletionAt: 0,
    probing: false,
    versionStale: true,
    versionCheckedAt: 0,
    versionProbe: new SingleFlight<void>(),
  };
}

/**
 * What `status()` shows of a replica: its status fields, and its DP ranks when it has any.
 *
 * @example
 * ```ts
 * replicaStatus(freshReplica("http://w1:8000", "worker")); // { url: "http://w1:8000", healthy: true, … }
 * ```
 */
export function replicaStatus({
  coolUntil: _c,
  versionStale: _s,
  versionCheckedAt: _t,
  versionProbe: _p,
  ranks,
  lastCompletionAt: _l,
  probing: _b,
  ...r
}: Replica): ReplicaStatus {
  return { ...r, ...(ranks.length > 0 ? { dp_ranks: [...ranks] } : {}) };
}
