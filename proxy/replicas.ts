/**
 * The engine replicas of one node: round-robin with session affinity (a session stays on its
 * replica, and on one data-parallel rank of it, so its prefix cache is reused), health checks that
 * never fail a busy replica over, dead replicas skipped, and SGLang router support — the router's
 * `GET /workers` lists its workers; when every HTTP worker is `regular` the proxy calls them
 * directly (a router's typed chat path drops SGLang's token extensions, and it has no
 * `/abort_request`), otherwise it calls the router itself and says at start what that costs.
 * See `router.ts` for the router's listing and policies.
 *
 * @module
 */
import { SingleFlight, versionNumber } from "../protocol";
import { isObject } from "./json";
import { parseWorkerList, type RouterPolicy, routerAffinity, type WorkerEntry } from "./router";

/** Default interval between health checks (ms). */
export const DEFAULT_HEALTH_INTERVAL_MS = 5_000;
/** Timeout of one discovery (`GET /workers`) or `/model_info` call (ms). */
export const HEALTH_TIMEOUT_MS = 2_000;
/**
 * Default timeout of one `GET /health` probe (ms). SGLang's `/health` (like `/health_generate`)
 * runs a one-token generation through the scheduler and polls for output once a second, answering
 * 503 itself only after `SGLANG_HEALTH_CHECK_TIMEOUT` (default 20 s) without progress
 * (`http_server.py` `health_generate`): a shorter client timeout would call a loaded replica dead
 * before SGLang has made up its mind.
 *
 * @example
 * ```ts
 * fetch(`${url}/health`, { signal: AbortSignal.timeout(HEALTH_PROBE_TIMEOUT_MS) });
 * ```
 */
export const HEALTH_PROBE_TIMEOUT_MS = 25_000;
/** Most session → replica pins kept; the oldest pin is forgotten past it. */
export const MAX_AFFINITY_ENTRIES = 100_000;
/**
 * How long a replica that answered 502/503/504 is skipped (ms): SGLang answers 503 while it starts
 * or shuts down, yet its `/health` may already (or still) say 200, so the health check alone would
 * send the next call straight back to it. After the cool-down the health check (or, with checks
 * disabled, the next pick) lets it back in.
 */
export const DEFAULT_UNAVAILABLE_COOLDOWN_MS = 2_000;
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

interface Replica extends ReplicaStatus {
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

/** How one `/health` probe ended. */
type ProbeResult = "ok" | "down" | "timeout";

async function probe(url: string, timeoutMs: number, stopped: AbortSignal): Promise<ProbeResult> {
  try {
    const signal = AbortSignal.any([AbortSignal.timeout(timeoutMs), stopped]);
    const res = await fetch(`${url}/health`, { signal });
    await res.arrayBuffer();
    return res.ok ? "ok" : "down";
  } catch (err) {
    // A timeout is not a refusal: the replica may only be slow to run the probe's generation.
    return err instanceof Error && err.name === "TimeoutError" ? "timeout" : "down";
  }
}

/**
 * Worker URLs from a router's `GET /workers` answer (`{workers: [{url, worker_type}]}`, older
 * `{urls: [...]}`), or null when the router cannot be called directly around (a prefill/decode
 * split, or no HTTP worker). A DP-aware `url@rank` entry gives its base URL once.
 *
 * @example
 * ```ts
 * workersFrom({ workers: [{ url: "http://w1:8000", worker_type: "regular" }] }); // ["http://w1:8000"]
 * ```
 */
export function workersFrom(body: unknown): string[] | null {
  const entries = parseWorkerList(body);
  return entries ? [...new Set(entries.map((e) => e.url))] : null;
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
  private readonly affinity = new Map<string, string>();
  /** The DP rank each session is pinned to on its replica (DP-aware router workers only). */
  private readonly rankPins = new Map<string, number>();
  private readonly nextRank = new Map<string, number>();
  private next = 0;
  private timer: NodeJS.Timeout | null = null;
  /** Aborts the probes in flight when the set stops (a probe may wait up to its long timeout). */
  private stopped = new AbortController();
  private readonly routerUrl: string | null;

  constructor(
    urls: readonly string[],
    private readonly opts: ReplicaSetOptions = {},
  ) {
    this.routerUrl = opts.routerUrl ? trim(opts.routerUrl) : null;
    this.replicas = urls.map((u) => this.fresh(trim(u), "static"));
    if (this.replicas.length === 0 && !this.routerUrl)
      throw new Error("engineUrls: at least one engine URL is required");
  }

  private fresh(url: string, source: ReplicaStatus["source"]): Replica {
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
   * Re-reads the router's workers and probes every replica once. A probe that times out while
   * the replica is serving calls (one in flight, or a completion since the last check) leaves it
   * as it was and marks it `busy`: SGLang's `/health` queues a one-token generation, so it is late
   * exactly when the replica is working hardest. A refused connection or a non-2xx answer (SGLang
   * answers 503 while starting, shutting down, or after 20 s without scheduler progress) and a
   * timeout on an idle replica mark it unhealthy.
   */
  async refresh(): Promise<void> {
    if (this.routerUrl) await this.discover();
    const timeoutMs = this.opts.healthTimeoutMs ?? HEALTH_PROBE_TIMEOUT_MS;
    await Promise.all(
      this.replicas.map(async (r) => {
        // A replica cooling down after a 503 stays out even if its /health already answers 200.
        if (r.coolUntil > Date.now() || r.probing) return;
        r.probing = true;
        const started = Date.now();
        const stopped = this.stopped.signal;
        let result: ProbeResult;
        try {
          result = await probe(r.url, timeoutMs, stopped);
        } finally {
          r.probing = false;
        }
        // Cut short by stop(): it says nothing about the replica.
        if (stopped.aborted) return;
        const interval = this.opts.healthIntervalMs ?? DEFAULT_HEALTH_INTERVAL_MS;
        const serving = r.inflight > 0 || r.lastCompletionAt >= started - interval;
        if (result === "timeout" && serving) {
          if (!r.busy)
            this.opts.onChange?.("replica busy: health check timed out while serving", { url: r.url });
          r.busy = true;
          return;
        }
        delete r.busy;
        const ok = result === "ok";
        if (ok !== r.healthy)
          this.opts.onChange?.(ok ? "replica healthy" : "replica unhealthy", { url: r.url });
        r.healthy = ok;
        if (ok) r.coolUntil = 0;
        else r.last_error = result === "timeout" ? "health check timed out" : "health check failed";
      }),
    );
  }

  private async discover(): Promise<void> {
    const router = this.routerUrl!;
    let entries: WorkerEntry[] | null = null;
    try {
      const res = await fetch(`${router}/workers`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
      entries = res.ok ? parseWorkerList(await res.json()) : null;
    } catch {
      entries = null;
    }
    const known = new Map(this.replicas.map((r) => [r.url, r]));
    const statics = this.replicas.filter((r) => r.source === "static");
    let found: Replica[];
    if (entries) {
      // DP-aware workers (`url@rank`) share one server: one replica per URL, its ranks listed.
      const ranks = new Map<string, number[]>();
      for (const e of entries) {
        const list = ranks.get(e.url) ?? [];
        if (e.dpRank !== null && !list.includes(e.dpRank)) list.push(e.dpRank);
        ranks.set(e.url, list);
      }
      found = [...ranks].map(([u, list]) => {
        const r = known.get(u) ?? this.fresh(u, "worker");
        r.ranks = list.sort((a, b) => a - b);
        return r;
      });
    } else {
      let r = known.get(router);
      if (!r) {
        r = this.fresh(router, "router");
        const affinity = routerAffinity(this.opts.routerPolicy ?? "unknown");
        r.affinity = affinity.message;
        r.aborts = "disconnect";
        r.aborts_by_disconnect = 0;
        // Said once, when the proxy starts calling the router itself: what the user gets.
        this.opts.onInfo?.("calling the SGLang router itself", {
          url: router,
          affinity: affinity.message,
          aborts:
            "the router has no /abort_request: an abandoned generation is stopped by closing its connection",
          parsing: "delegated parsing uses the router's /parse/function_call and /parse/reasoning",
        });
      }
      found = [r];
    }
    this.replicas = [...statics, ...found.filter((r) => r.source !== "static")];
  }

  /** Whether `url` is the router itself (its parse endpoints and aborts differ from a worker's). */
  isRouter(url: string): boolean {
    return this.replicas.find((r) => r.url === url)?.source === "router";
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
    const r = this.replicas.find((x) => x.url === url);
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
    if (this.affinity.get(sessionId) !== url) return null;
    return this.rankPins.get(sessionId) ?? null;
  }

  private pinRank(sessionId: string, r: Replica): void {
    const current = this.rankPins.get(sessionId);
    if (r.ranks.length === 0) {
      this.rankPins.delete(sessionId);
      return;
    }
    if (current !== undefined && r.ranks.includes(current)) return;
    const n = this.nextRank.get(r.url) ?? 0;
    this.nextRank.set(r.url, n + 1);
    this.rankPins.set(sessionId, r.ranks[n % r.ranks.length]!);
  }

  /**
   * The replica for a call of `sessionId`, skipping `exclude` (replicas that already failed this
   * call) and unhealthy ones while a healthy one is left.
   */
  pick(sessionId: string, exclude: ReadonlySet<string>): string | null {
    const candidates = this.replicas.filter((r) => !exclude.has(r.url));
    if (candidates.length === 0) return null;
    if (!this.checking) {
      // No health checks run: a cool-down that ran out is the only way back in.
      const now = Date.now();
      for (const r of candidates)
        if (!r.healthy && r.coolUntil > 0 && r.coolUntil <= now) {
          r.healthy = true;
          r.coolUntil = 0;
        }
    }
    const pinned = this.affinity.get(sessionId);
    const pin = candidates.find((r) => r.url === pinned && r.healthy);
    if (pin) {
      this.pinRank(sessionId, pin);
      return pin.url;
    }
    const healthy = candidates.filter((r) => r.healthy);
    const pool = healthy.length > 0 ? healthy : candidates;
    const chosen = pool[this.next++ % pool.length]!;
    this.affinity.delete(sessionId);
    this.affinity.set(sessionId, chosen.url);
    if (pinned !== chosen.url) this.rankPins.delete(sessionId);
    this.pinRank(sessionId, chosen);
    if (this.affinity.size > MAX_AFFINITY_ENTRIES) {
      const oldest = this.affinity.keys().next().value!;
      this.affinity.delete(oldest);
      this.rankPins.delete(oldest);
    }
    return chosen.url;
  }

  /** Counts a call on a replica; returns the function that ends it. */
  begin(url: string): (outcome: ReplicaOutcome) => void {
    const r = this.replicas.find((x) => x.url === url);
    if (r) r.inflight++;
    return ({ ok, failed = !ok, error, transport, unavailable }) => {
      if (!r) return;
      r.inflight = Math.max(0, r.inflight - 1);
      if (ok) {
        r.completions++;
        r.lastCompletionAt = Date.now();
        return;
      }
      if (!failed) return;
      r.failures++;
      r.last_error = error ?? null;
      // A refused connection means the replica is gone; an unavailable answer means it is
      // overloaded, starting or stopping. Either way the health check brings it back.
      if (transport || unavailable) {
        if (r.healthy) this.opts.onChange?.("replica unhealthy", { url, error });
        r.healthy = false;
        if (unavailable)
          r.coolUntil = Date.now() + (this.opts.unavailableCooldownMs ?? DEFAULT_UNAVAILABLE_COOLDOWN_MS);
      }
    };
  }

  /** Forgets a session's pin. */
  forget(sessionId: string): void {
    this.affinity.delete(sessionId);
    this.rankPins.delete(sessionId);
  }

  /** Number of replicas a call may be tried on. */
  get size(): number {
    return this.replicas.length;
  }

  private get checking(): boolean {
    return this.timer !== null;
  }

  status(): ReplicaStatus[] {
    return this.replicas.map(
      ({
        coolUntil: _c,
        versionStale: _s,
        versionCheckedAt: _t,
        versionProbe: _p,
        ranks,
        lastCompletionAt: _l,
        probing: _b,
        ...r
      }) => ({ ...r, ...(ranks.length > 0 ? { dp_ranks: [...ranks] } : {}) }),
    );
  }

  // ---- weight versions ----------------------------------------------------------------------

  /** The weight version the proxy knows for `url` (null: unknown). */
  weightVersion(url: string): string | null {
    return this.replicas.find((r) => r.url === url)?.weight_version ?? null;
  }

  /** A version the replica reported in an answer (`meta_info.weight_version`). */
  observeWeightVersion(url: string, version: string | null): void {
    const r = this.replicas.find((x) => x.url === url);
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
    const r = this.replicas.find((x) => x.url === url);
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
