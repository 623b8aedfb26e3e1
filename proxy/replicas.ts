/**
 * The engine replicas of one node: round-robin with session affinity (a session stays on its
 * replica, and on one data-parallel rank of it, so its prefix cache is reused;
 * `replica-affinity.ts`), health checks that never fail a busy replica over, dead replicas skipped
 * (`replica-health.ts`), SGLang router support (`replica-discovery.ts`, `router.ts`), and the
 * weight version each replica serves.
 *
 * @module
 */
import { versionNumber } from "../protocol";
import { isObject } from "./json";
import { SessionAffinity } from "./replica-affinity";
import { listWorkers, routerReplicas } from "./replica-discovery";
import {
  DEFAULT_HEALTH_INTERVAL_MS,
  DEFAULT_UNAVAILABLE_COOLDOWN_MS,
  HEALTH_PROBE_TIMEOUT_MS,
  HEALTH_TIMEOUT_MS,
  type ProbeResult,
  probeHealth,
  reviveCooled,
  settleCall,
  settleProbe,
} from "./replica-health";
import {
  freshReplica,
  type Replica,
  type ReplicaOutcome,
  type ReplicaStatus,
  replicaStatus,
} from "./replica-state";
import type { RouterPolicy } from "./router";

export { MAX_AFFINITY_ENTRIES } from "./replica-affinity";
export { workersFrom } from "./replica-discovery";
export {
  DEFAULT_HEALTH_INTERVAL_MS,
  DEFAULT_UNAVAILABLE_COOLDOWN_MS,
  HEALTH_PROBE_TIMEOUT_MS,
  HEALTH_TIMEOUT_MS,
} from "./replica-health";
export type { ReplicaOutcome, ReplicaStatus } from "./replica-state";

/** Most replicas one call is tried on (each at most once). */
export const MAX_CALL_ATTEMPTS = 3;
/**
 * A replica behind a turn's `min_policy_version` is asked for its version at most this often (ms).
 *
 * @example
 * ```ts
 * if (now - checkedAt >= VERSION_RECHECK_MS) await probe();
 * ```
 */
export const VERSION_RECHECK_MS = 1_000;

/** Options of {@link ReplicaSet}. */
export interface ReplicaSetOptions {
  /** SGLang router (model gateway) to discover workers from. */
  routerUrl?: string;
  /** Health-check interval (ms); 0 disables periodic checks. Default {@link DEFAULT_HEALTH_INTERVAL_MS}. */
  healthIntervalMs?: number;
  /** Cool-down after a 502/503/504 answer (ms). Default {@link DEFAULT_UNAVAILABLE_COOLDOWN_MS}. */
  unavailableCooldownMs?: number;
  /** The engine answers `GET /model_info` with `weight_version` (SGLang); default false. */
  modelInfo?: boolean;
  /**
   * Where the replica's `weight_version` is read when `modelInfo` is set: `/model_info` (SGLang,
   * the default) or `/weight_info` (vLLM's dev-mode route, PR #49040; 404 elsewhere: unknown).
   */
  versionPath?: "/model_info" | "/weight_info";
  /** Timeout of one `/health` probe (ms). Default {@link HEALTH_PROBE_TIMEOUT_MS}. */
  healthTimeoutMs?: number;
  /**
   * The router's `--policy` as the operator states it: the router does not expose it over HTTP,
   * and only `consistent_hashing` and `manual` honour `X-SMG-Routing-Key`. Default unknown.
   */
  routerPolicy?: RouterPolicy;
  onChange?: (message: string, fields: object) => void;
  /** Start-up facts (what affinity the router gives); default none. */
  onInfo?: (message: string, fields: object) => void;
}

const trim = (url: string) => url.replace(/\/+$/, "");

/** The `weight_version` of a replica's `GET /model_info` (or `path`); null when it cannot say. */
async function probeWeightVersion(url: string, path = "/model_info"): Promise<string | null> {
  try {
    const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    const body: unknown = res.ok ? await res.json() : await res.arrayBuffer().then(() => null);
    const v = isObject(body) ? body.weight_version : undefined;
    return typeof v === "string" || typeof v === "number" ? String(v) : null;
  } catch {
    return null;
  }
}

/**
 * Chooses the replica of each call.
 *
 * @example
 * ```ts
 * const set = new ReplicaSet(["http://127.0.0.1:30000", "http://127.0.0.1:30001"]);
 * await set.start();
 * const url = set.pick("sess-1", new Set()); // the same url for every call of sess-1
 * set.stop();
 * ```
 */
export class ReplicaSet {
  private replicas: Replica[];
  private readonly affinity = new SessionAffinity();
  private timer: NodeJS.Timeout | null = null;
  /** Aborts the probes in flight when the set stops (a probe may wait up to its long timeout). */
  private stopped = new AbortController();
  private readonly routerUrl: string | null;

  constructor(
    urls: readonly string[],
    private readonly opts: ReplicaSetOptions = {},
  ) {
    this.routerUrl = opts.routerUrl ? trim(opts.routerUrl) : null;
    this.replicas = urls.map((u) => freshReplica(trim(u), "static"));
    if (this.replicas.length === 0 && !this.routerUrl)
      throw new Error("engineUrls: at least one engine URL is required");
  }

  /** Discovers router workers (if any) and starts periodic health checks. */
  async start(): Promise<void> {
    if (this.routerUrl) await this.discover();
    const every = this.opts.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
    if (every > 0) {
      this.timer = setInterval(() => void this.refresh(), every);
      // Health checks must never keep a process alive on their own.
      this.timer.unref();
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.stopped.abort();
    this.stopped = new AbortController();
  }

  /**
   * Re-reads the router's workers and probes every replica once (see `settleProbe` for what a
   * probe's result means: a timeout while serving is `busy`, never down).
   */
  async refresh(): Promise<void> {
    if (this.routerUrl) await this.discover();
    const timeoutMs = this.opts.healthTimeoutMs ?? HEALTH_PROBE_TIMEOUT_MS;
    await Promise.all(this.replicas.map((r) => this.check(r, timeoutMs)));
  }

  /** Probes one replica, unless it is cooling down or already being probed. */
  private async check(r: Replica, timeoutMs: number): Promise<void> {
    // A replica cooling down after a 503 stays out even if its /health already answers 200.
    if (r.coolUntil > Date.now() || r.probing) return;
    r.probing = true;
    const started = Date.now();
    const stopped = this.stopped.signal;
    let result: ProbeResult;
    try {
      result = await probeHealth(r.url, timeoutMs, stopped);
    } finally {
      r.probing = false;
    }
    // Cut short by stop(): it says nothing about the replica.
    if (stopped.aborted) return;
    const interval = this.opts.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
    const serving = r.inflight > 0 || r.lastCompletionAt >= started - interval;
    settleProbe(r, result, serving, this.opts.onChange);
  }

  private async discover(): Promise<void> {
    const router = this.routerUrl!;
    const entries = await listWorkers(router);
    const known = new Map(this.replicas.map((r) => [r.url, r]));
    const statics = this.replicas.filter((r) => r.source === "static");
    const found = routerReplicas(router, entries, known, this.opts);
    this.replicas = [...statics, ...found.filter((r) => r.source !== "static")];
  }

  /** Whether `url` is the router itself (its parse endpoints and aborts differ from a worker's). */
  isRouter(url: string): boolean {
    return this.find(url)?.source === "router";
  }

  /**
   * Whether an abort of a call on `url` can only be done by closing its connection (the router
   * has no `/abort_request`; SGLang aborts a request whose client went away); counts it.
   *
   * @example
   * ```ts
   * if (!replicas.abortByDisconnect(base)) await postJson(`${base}/abort_request`, { rid });
   * ```
   */
  abortByDisconnect(url: string): boolean {
    const r = this.find(url);
    if (r?.aborts !== "disconnect") return false;
    r.aborts_by_disconnect = (r.aborts_by_disconnect ?? 0) + 1;
    return true;
  }

  /**
   * The DP rank session `sessionId` is pinned to on `url` (send it as `routed_dp_rank`), or null
   * when the replica is not DP-aware or the session is not on it.
   *
   * @example
   * ```ts
   * const rank = replicas.dpRank("s1", url); // 0, 1, … for a `--dp-aware` worker
   * ```
   */
  dpRank(sessionId: string, url: string): number | null {
    return this.affinity.dpRank(sessionId, url);
  }

  /**
   * The replica for a call of `sessionId`, skipping `exclude` (replicas that already failed this
   * call) and unhealthy ones while a healthy one is left.
   */
  pick(sessionId: string, exclude: ReadonlySet<string>): string | null {
    const candidates = this.replicas.filter((r) => !exclude.has(r.url));
    if (candidates.length === 0) return null;
    // No health checks run: a cool-down that ran out is the only way back in.
    if (!this.checking) reviveCooled(candidates, Date.now());
    return this.affinity.choose(sessionId, candidates).url;
  }

  /** Counts a call on a replica; returns the function that ends it. */
  begin(url: string): (outcome: ReplicaOutcome) => void {
    const r = this.find(url);
    if (r) r.inflight++;
    return (outcome) => {
      if (!r) return;
      const cooldownMs = this.opts.unavailableCooldownMs ?? DEFAULT_UNAVAILABLE_COOLDOWN_MS;
      settleCall(r, outcome, cooldownMs, this.opts.onChange);
    };
  }

  /** Forgets a session's pin. */
  forget(sessionId: string): void {
    this.affinity.forget(sessionId);
  }

  /** Number of replicas a call may be tried on. */
  get size(): number {
    return this.replicas.length;
  }

  private get checking(): boolean {
    return this.timer !== null;
  }

  private find(url: string): Replica | undefined {
    return this.replicas.find((r) => r.url === url);
  }

  status(): ReplicaStatus[] {
    return this.replicas.map(replicaStatus);
  }

  // ---- weight versions ----------------------------------------------------------------------

  /** The weight version the proxy knows for `url` (null: unknown). */
  weightVersion(url: string): string | null {
    return this.find(url)?.weight_version ?? null;
  }

  /** A version the replica reported in an answer (`meta_info.weight_version`). */
  observeWeightVersion(url: string, version: string | null): void {
    const r = this.find(url);
    if (!r || version === null) return;
    r.weight_version = version;
    r.versionStale = false;
  }

  /** Weights may have changed everywhere (a fence resumed): re-ask before the next dispatch. */
  markVersionsStale(): void {
    for (const r of this.replicas) r.versionStale = true;
  }

  /** Asks `/model_info` of one replica (single flight); without `modelInfo`, does nothing. */
  private refreshVersion(r: Replica): Promise<void> {
    if (!this.opts.modelInfo) return Promise.resolve();
    return r.versionProbe.run(async () => {
      r.versionCheckedAt = Date.now();
      const v = await probeWeightVersion(r.url, this.opts.versionPath);
      if (v !== null) r.weight_version = v;
      r.versionStale = false;
    });
  }

  /** Re-reads the version of `url` when the known one may be out of date (before a dispatch). */
  async ensureVersion(url: string): Promise<void> {
    const r = this.find(url);
    if (r?.versionStale) await this.refreshVersion(r);
  }

  /**
   * Replicas that must not serve a turn needing policy version `min`: their known version is
   * below it or unknown, after asking `/model_info` again (at most every {@link VERSION_RECHECK_MS})
   * of those. Version 0 is the initial weights: every replica serves at least that.
   *
   * @example
   * ```ts
   * const behind = await replicas.behind(3); // Set of urls still below version 3
   * ```
   */
  async behind(min: number): Promise<Set<string>> {
    if (min <= 0) return new Set();
    const short = (r: Replica) => (versionNumber(r.weight_version) ?? -1) < min;
    const now = Date.now();
    await Promise.all(
      this.replicas
        .filter((r) => short(r) && (r.versionStale || now - r.versionCheckedAt >= VERSION_RECHECK_MS))
        .map((r) => this.refreshVersion(r)),
    );
    return new Set(this.replicas.filter(short).map((r) => r.url));
  }
}
