/**
 * What the proxy knows of the SGLang model gateway (router, `sgl-model-gateway` / `smg`): the
 * shape of its `GET /workers` listing and what its routing policies do with `X-SMG-Routing-Key`.
 * Read from the gateway's source (`server.rs`, `protocols/worker_spec.rs`, `core/worker.rs`,
 * policies) as of SGLang main 2026-11; nothing here calls the network.
 *
 * @module
 */
import { isObject } from "./json";

/**
 * The router's `--policy` values. The router does not expose its policy over HTTP (only its
 * start-up log line and, in mesh/HA mode, `/ha/policies` show it), so the proxy takes it from the
 * operator; `unknown` when not given.
 *
 * @example
 * ```ts
 * ROUTER_POLICIES.includes("consistent_hashing"); // true
 * ```
 */
export const ROUTER_POLICIES = [
  "unknown",
  "cache_aware",
  "round_robin",
  "random",
  "power_of_two",
  "bucket",
  "prefix_hash",
  "consistent_hashing",
  "manual",
] as const;
/** One of {@link ROUTER_POLICIES}. */
export type RouterPolicy = (typeof ROUTER_POLICIES)[number];

/** One callable worker of a router listing. */
export interface WorkerEntry {
  /** Base URL to call (`http://host:port`, without the `@rank` suffix). */
  url: string;
  /** The DP rank of a `--dp-aware` entry (`http://host:port@rank`); null otherwise. */
  dpRank: number | null;
}

const trim = (url: string) => url.replace(/\/+$/, "");

/**
 * Splits a DP-aware worker URL: the router lists each data-parallel rank of one server as
 * `http://host:port@rank` (`DPAwareWorker` in `core/worker.rs`), which `new URL()` would read as
 * a user name. The rank is sent on `/generate` as `routed_dp_rank`.
 *
 * @example
 * ```ts
 * splitDpRank("http://10.0.0.5:30000@3"); // { url: "http://10.0.0.5:30000", dpRank: 3 }
 * splitDpRank("http://10.0.0.5:30000"); // { url: "http://10.0.0.5:30000", dpRank: null }
 * ```
 */
export function splitDpRank(raw: string): WorkerEntry {
  const m = /^(.*?:\/\/[^/@]+(?::\d+)?)(?:\/*)@(\d+)\/*$/.exec(raw.trim());
  if (m) return { url: trim(m[1]!), dpRank: Number(m[2]) };
  return { url: trim(raw.trim()), dpRank: null };
}

/**
 * Whether a listed worker can be called over HTTP. The router reports `connection_mode` as
 * `http`/`HTTP`, or `grpc`, `gRPC(port:N)`, `zmq` for workers it reaches another way (their URL
 * takes no HTTP request); an entry without the field is an older router's HTTP worker.
 */
function isHttp(entry: Record<string, unknown>): boolean {
  const mode = entry.connection_mode;
  if (mode === undefined || mode === null) return !/^grpcs?:\/\//i.test(String(entry.url));
  return typeof mode === "string" && mode.toLowerCase() === "http";
}

/**
 * The callable workers of a router's `GET /workers` answer (`{workers: [{url, worker_type,
 * connection_mode}], total, stats}`, older `{urls: [...]}`), or null when the router must be
 * called itself: a prefill/decode split (the router pairs the two), or no HTTP worker at all.
 *
 * @example
 * ```ts
 * parseWorkerList({ workers: [
 *   { url: "http://w1:8000@0", worker_type: "regular", connection_mode: "HTTP" },
 *   { url: "grpc://w2:9000", worker_type: "regular", connection_mode: "gRPC" },
 * ] }); // [{ url: "http://w1:8000", dpRank: 0 }]
 * ```
 */
export function parseWorkerList(body: unknown): WorkerEntry[] | null {
  const list = isObject(body) ? (Array.isArray(body.workers) ? body.workers : body.urls) : body;
  if (!Array.isArray(list)) return null;
  const entries: WorkerEntry[] = [];
  for (const w of list) {
    if (typeof w === "string") {
      if (!/^grpcs?:\/\//i.test(w)) entries.push(splitDpRank(w));
    } else if (isObject(w) && typeof w.url === "string") {
      const type = w.worker_type ?? w.type ?? "regular";
      if (type !== "regular") return null;
      if (isHttp(w)) entries.push(splitDpRank(w.url));
    }
  }
  return entries.length > 0 ? entries : null;
}

/**
 * What session affinity `X-SMG-Routing-Key` gives under a router policy: only
 * `consistent_hashing` and `manual` route by it; `cache_aware` (the default) and the others ignore
 * it, so a session's turns may land on different workers and lose their prefix cache.
 *
 * @example
 * ```ts
 * routerAffinity("consistent_hashing").honoured; // true
 * routerAffinity("unknown").message; // "router policy unknown (default cache_aware): …"
 * ```
 */
export function routerAffinity(policy: RouterPolicy): { honoured: boolean; message: string } {
  if (policy === "consistent_hashing" || policy === "manual")
    return {
      honoured: true,
      message: `router policy ${policy}: X-SMG-Routing-Key keeps each session on one worker`,
    };
  const name = policy === "unknown" ? "unknown (default cache_aware)" : policy;
  return {
    honoured: false,
    message:
      `router policy ${name}: X-SMG-Routing-Key is ignored, a session's turns may change worker; ` +
      "start the router with --policy consistent_hashing for session affinity",
  };
}
