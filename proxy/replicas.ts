/**
 * The engine replicas of one node: round-robin with session affinity (a session stays on its
 * replica so its prefix cache is reused), health checks, dead replicas skipped, and SGLang router
 * support — the router's `GET /workers` lists its workers; when all are `regular` the proxy calls
 * them directly (a router's typed chat path drops SGLang's token extensions), otherwise it calls
 * the router, whose `X-SMG-Routing-Key` header keeps the session's affinity.
 *
 * @module
 */
import { SingleFlight, versionNumber } from "../protocol";
import { isObject } from "./json";

/** Default interval between health checks (ms). */
export const DEFAULT_HEALTH_INTERVAL_MS = 5_000;
/** Timeout of one health check or discovery call (ms). */
export const HEALTH_TIMEOUT_MS = 2_000;
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
  onChange?: (message: string, fields: object) => void;
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

async function probe(url: string): Promise<boolean> {
  try {
    const res = await fetch(`${url}/health`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    await res.arrayBuffer();
    return res.ok;
  } catch {
    return false;
  }
}

/**
 * Worker URLs from a router's `GET /workers` answer (`{workers: [{url, worker_type}]}`, older
 * `{urls: [...]}`), or null when the router cannot be called directly around (a prefill/decode split).
 *
 * @example
 * ```ts
 * workersFrom({ workers: [{ url: "http://w1:8000", worker_type: "regular" }] }); // ["http://w1:8000"]
 * ```
 */
export function workersFrom(body: unknown): string[] | null {
  const list = isObject(body) ? (Array.isArray(body.workers) ? body.workers : body.urls) : body;
  if (!Array.isArray(list)) return null;
  const urls: string[] = [];
  for (const w of list) {
    if (typeof w === "string") urls.push(trim(w));
    else if (isObject(w) && typeof w.url === "string") {
      const type = w.worker_type ?? w.type ?? "regular";
      if (type !== "regular") return null;
      urls.push(trim(w.url));
    }
  }
  return urls.length > 0 ? urls : null;
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
  private next = 0;
  private timer: NodeJS.Timeout | null = null;
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
  }

  /** Re-reads the router's workers and probes every replica once. */
  async refresh(): Promise<void> {
    if (this.routerUrl) await this.discover();
    await Promise.all(
      this.replicas.map(async (r) => {
        // A replica cooling down after a 503 stays out even if its /health already answers 200.
        if (r.coolUntil > Date.now()) return;
        const ok = await probe(r.url);
        if (ok !== r.healthy)
          this.opts.onChange?.(ok ? "replica healthy" : "replica unhealthy", { url: r.url });
        r.healthy = ok;
        if (ok) r.coolUntil = 0;
        else r.last_error = "health check failed";
      }),
    );
  }

  private async discover(): Promise<void> {
    const router = this.routerUrl!;
    let urls: string[] | null = null;
    try {
      const res = await fetch(`${router}/workers`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
      urls = res.ok ? workersFrom(await res.json()) : null;
    } catch {
      urls = null;
    }
    const known = new Map(this.replicas.map((r) => [r.url, r]));
    const statics = this.replicas.filter((r) => r.source === "static");
    const found = urls
      ? urls.map((u) => known.get(u) ?? this.fresh(u, "worker"))
      : [known.get(router) ?? this.fresh(router, "router")];
    this.replicas = [...statics, ...found.filter((r) => r.source !== "static")];
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
    if (pin) return pin.url;
    const healthy = candidates.filter((r) => r.healthy);
    const pool = healthy.length > 0 ? healthy : candidates;
    const chosen = pool[this.next++ % pool.length]!;
    this.affinity.delete(sessionId);
    this.affinity.set(sessionId, chosen.url);
    if (this.affinity.size > MAX_AFFINITY_ENTRIES) this.affinity.delete(this.affinity.keys().next().value!);
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
      ({ coolUntil: _c, versionStale: _s, versionCheckedAt: _t, versionProbe: _p, ...r }) => ({ ...r }),
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
