/**
 * Discovery of the engine replicas behind an SGLang router: the router's `GET /workers` lists its
 * workers; when every HTTP worker is `regular` the proxy calls them directly (a router's typed
 * chat path drops SGLang's token extensions, and it has no `/abort_request`), otherwise it calls
 * the router itself and says at start what that costs. See `router.ts` for the listing and
 * policies.
 *
 * @module
 */
import { HEALTH_TIMEOUT_MS } from "./replica-health";
import { freshReplica, type Replica } from "./replica-state";
import { parseWorkerList, type RouterPolicy, routerAffinity, type WorkerEntry } from "./router";

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
 * The router's callable workers (`GET /workers`), or null when it must be called itself (or did
 * not answer).
 *
 * @example
 * ```ts
 * const entries = await listWorkers("http://router:30000"); // [{ url: "http://w1:8000", dpRank: null }]
 * ```
 */
export async function listWorkers(router: string): Promise<WorkerEntry[] | null> {
  try {
    const res = await fetch(`${router}/workers`, { signal: AbortSignal.timeout(HEALTH_TIMEOUT_MS) });
    return res.ok ? parseWorkerList(await res.json()) : null;
  } catch {
    return null;
  }
}

/** What discovery needs besides the router's URL (from `ReplicaSetOptions`). */
export interface DiscoveryOptions {
  routerPolicy?: RouterPolicy;
  onInfo?: (message: string, fields: object) => void;
}

/**
 * The replicas the router stands for, from its listing: one per worker server (DP-aware workers
 * `url@rank` share one server: one replica per URL, its ranks listed), or the router itself when
 * `entries` is null. Replicas in `known` are kept (with their counters), new ones start fresh.
 *
 * @example
 * ```ts
 * const found = routerReplicas(routerUrl, await listWorkers(routerUrl), new Map(replicas.map((r) => [r.url, r])), opts);
 * ```
 */
export function routerReplicas(
  router: string,
  entries: readonly WorkerEntry[] | null,
  known: ReadonlyMap<string, Replica>,
  opts: DiscoveryOptions,
): Replica[] {
  if (!entries) return [known.get(router) ?? routerReplica(router, opts)];
  const ranks = new Map<string, number[]>();
  for (const e of entries) {
    const list = ranks.get(e.url) ?? [];
    if (e.dpRank !== null && !list.includes(e.dpRank)) list.push(e.dpRank);
    ranks.set(e.url, list);
  }
  return [...ranks].map(([u, list]) => {
    const r = known.get(u) ?? freshReplica(u, "worker");
    r.ranks = list.sort((a, b) => a - b);
    return r;
  });
}

/** The router as the one replica, with the affinity and aborts it gives, said once at start. */
function routerReplica(router: string, opts: DiscoveryOptions): Replica {
  const r = freshReplica(router, "router");
  const affinity = routerAffinity(opts.routerPolicy ?? "unknown");
  r.affinity = affinity.message;
  r.aborts = "disconnect";
  r.aborts_by_disconnect = 0;
  // Said once, when the proxy starts calling the router itself: what the user gets.
  opts.onInfo?.("calling the SGLang router itself", {
    url: router,
    affinity: affinity.message,
    aborts: "the router has no /abort_request: an abandoned generation is stopped by closing its connection",
    parsing: "delegated parsing uses the router's /parse/function_call and /parse/reasoning",
  });
  return r;
}
