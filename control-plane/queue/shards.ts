/**
 * Queue sharding: a queue name may be spread over N dispatchers (QueueDO instances named
 * `name#0` … `name#N-1`) for throughput. N comes from the Worker variable `POLAR_QUEUE_SHARDS`,
 * a comma list of `pattern=N` where a pattern is a queue name or a prefix ending in `*`
 * (`"default=4,gpu-*=8"`). A queue that matches nothing has one shard, whose dispatcher keeps the
 * plain queue name — an unsharded queue is exactly what it was before sharding existed.
 *
 * Placement is by stable hashes (FNV-1a, 32 bits): a session goes to the shard of its session id
 * (so outbox redeliveries land on the same dispatcher), a gateway to the shard of its node id (so
 * a reconnect lands on the dispatcher that holds its leases). `#` is not allowed in queue names
 * (see `Identifier`), so a shard name can never collide with a queue name.
 *
 * @module
 */

/** Most shards one queue may have: stealing and admin fan-out visit every sibling. */
export const MAX_QUEUE_SHARDS = 64;

/** Separator between a queue name and its shard index in a dispatcher's name. */
const SHARD_SEPARATOR = "#";

/**
 * Thrown when `POLAR_QUEUE_SHARDS` cannot be parsed; the message names the variable and the entry.
 *
 * @example
 * ```ts
 * throw new ShardConfigError("POLAR_QUEUE_SHARDS: entry 'x' is not pattern=N");
 * ```
 */
export class ShardConfigError extends Error {
  override name = "ShardConfigError";
}

interface ShardRule {
  /** Queue name, or prefix when `prefix` is true. */
  pattern: string;
  prefix: boolean;
  shards: number;
}

const parsedConfigs = new Map<string, ShardRule[]>();

function parseConfig(raw: string): ShardRule[] {
  const cached = parsedConfigs.get(raw);
  if (cached) return cached;
  const rules: ShardRule[] = [];
  for (const entry of raw.split(",").map((e) => e.trim())) {
    if (entry === "") continue;
    const match = /^([A-Za-z0-9_.:*-]+)=(\d+)$/.exec(entry);
    const shards = match ? Number(match[2]) : Number.NaN;
    if (!match || !Number.isInteger(shards) || shards < 1 || shards > MAX_QUEUE_SHARDS) {
      throw new ShardConfigError(
        `POLAR_QUEUE_SHARDS: entry '${entry}' must be 'queue=N' or 'prefix*=N' with N from 1 to ${MAX_QUEUE_SHARDS}`,
      );
    }
    const pattern = match[1]!;
    const prefix = pattern.endsWith("*");
    if (pattern.slice(0, -1).includes("*") || (!prefix && pattern.includes("*"))) {
      throw new ShardConfigError(`POLAR_QUEUE_SHARDS: entry '${entry}': '*' is allowed only at the end`);
    }
    rules.push({ pattern: prefix ? pattern.slice(0, -1) : pattern, prefix, shards });
  }
  parsedConfigs.set(raw, rules);
  return rules;
}

/**
 * Number of shards of `queue` under the configuration `raw` (the `POLAR_QUEUE_SHARDS` value): an
 * exact entry wins, then the longest matching prefix, else 1.
 *
 * @example
 * ```ts
 * shardCount("gpu-a", "default=4,gpu-*=8"); // 8
 * shardCount("other", "default=4");         // 1
 * ```
 */
export function shardCount(queue: string, raw: string | undefined): number {
  if (!raw) return 1;
  let best: ShardRule | null = null;
  for (const rule of parseConfig(raw)) {
    if (!rule.prefix && rule.pattern === queue) return rule.shards;
    if (rule.prefix && queue.startsWith(rule.pattern) && (!best || rule.pattern.length > best.pattern.length))
      best = rule;
  }
  return best?.shards ?? 1;
}

/**
 * FNV-1a 32-bit hash of a string's UTF-16 code units: stable across processes and deploys.
 *
 * @example
 * ```ts
 * stableHash("node-a") % 4; // the same shard every time
 * ```
 */
export function stableHash(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/**
 * The dispatcher name of shard `index` of `queue` with `shards` shards (`queue` itself when 1).
 *
 * @example
 * ```ts
 * shardName("default", 2, 4); // "default#2"
 * shardName("default", 0, 1); // "default"
 * ```
 */
export function shardName(queue: string, index: number, shards: number): string {
  return shards <= 1 ? queue : `${queue}${SHARD_SEPARATOR}${index}`;
}

/**
 * Every dispatcher name of `queue` under the configuration `raw`.
 *
 * @example
 * ```ts
 * shardsOf("default", "default=2"); // ["default#0", "default#1"]
 * ```
 */
export function shardsOf(queue: string, raw: string | undefined): string[] {
  const n = shardCount(queue, raw);
  return Array.from({ length: n }, (_, i) => shardName(queue, i, n));
}

/**
 * The dispatcher of session `sessionId` in `queue`.
 *
 * @example
 * ```ts
 * sessionShard("default", "b_1.0.3", "default=4"); // e.g. "default#1"
 * ```
 */
export function sessionShard(queue: string, sessionId: string, raw: string | undefined): string {
  const n = shardCount(queue, raw);
  return shardName(queue, n <= 1 ? 0 : stableHash(sessionId) % n, n);
}

/**
 * The dispatcher a gateway connects to: by its node id when known, else shard 0 (stable, so a
 * reconnect without a node id still finds its leases).
 *
 * @example
 * ```ts
 * gatewayShard("default", "gpu-01", "default=4"); // e.g. "default#3"
 * ```
 */
export function gatewayShard(queue: string, nodeId: string | null, raw: string | undefined): string {
  const n = shardCount(queue, raw);
  return shardName(queue, n <= 1 || nodeId === null ? 0 : stableHash(nodeId) % n, n);
}

/**
 * Splits a dispatcher name into its queue and shard index (index 0 for an unsharded name).
 *
 * @example
 * ```ts
 * parseShardName("default#2"); // { queue: "default", index: 2 }
 * parseShardName("default");   // { queue: "default", index: 0 }
 * ```
 */
export function parseShardName(name: string): { queue: string; index: number } {
  const at = name.lastIndexOf(SHARD_SEPARATOR);
  if (at < 0) return { queue: name, index: 0 };
  const index = Number(name.slice(at + 1));
  return Number.isInteger(index) && index >= 0
    ? { queue: name.slice(0, at), index }
    : { queue: name, index: 0 };
}

/**
 * Every dispatcher to visit for the queues the registry has seen gateways on (`recorded` holds
 * dispatcher names): each recorded queue expanded to all its configured shards, so admin fan-out
 * and listings also reach shards that hold only pending sessions or whose gateways are new.
 *
 * @example
 * ```ts
 * dispatchersOf(["default#1"], "default=2"); // ["default#0", "default#1"]
 * ```
 */
export function dispatchersOf(recorded: string[], raw: string | undefined): string[] {
  const out = new Set<string>();
  for (const name of recorded) {
    for (const shard of shardsOf(parseShardName(name).queue, raw)) out.add(shard);
    // A shard recorded under an older configuration still holds gateways until they move.
    out.add(name);
  }
  return [...out].sort();
}
