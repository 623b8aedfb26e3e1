/**
 * What every module of the dispatcher works on: one shard's database, its Durable Object state
 * (sockets, alarm, `waitUntil`), the Worker's bindings, and the shard's names. The QueueDO builds
 * one at construction and hands it to the plain modules (`liveness`, `handshake`, `dispatch`,
 * `stealing`, `lost-leases`, `fence-routes`, `stats`), which keep no state of their own.
 *
 * @module
 */

import type { AdminFanout } from "./admin-fanout";
import { Backlog } from "./backlog";
import type { QueueDb } from "./db";
import { parseShardName, shardsOf } from "./shards";

/**
 * One dispatcher shard. `shardName` is the Durable Object's name: the queue name for an
 * unsharded queue, `queue#i` for shard i of a sharded one; `queue` is always the queue name that
 * gateways and trainers use.
 *
 * @example
 * ```ts
 * const shard = openShard(ctx, () => env, db, new AdminFanout());
 * shard.queue; // "default"
 * ```
 */
export interface Shard {
  readonly db: QueueDb;
  readonly ctx: DurableObjectState;
  readonly env: Env;
  /** This dispatcher's name: `queue`, or `queue#i` for shard i of a sharded queue. */
  readonly shardName: string;
  /** The queue this shard belongs to. */
  readonly queue: string;
  /** The other shards of this queue (none for an unsharded queue). */
  readonly siblings: readonly string[];
  /** Admin requests waiting for gateways' acks. */
  readonly admins: AdminFanout;
  /** When the object last had every frame sent to it in hand (liveness judges silence as of then). */
  readonly backlog: Backlog;
}

/** Key of the shard's own name in the Durable Object's key-value storage. */
const NAME_KEY = "polar:shard-name";

/**
 * The Durable Object's name, remembered in its storage. `ctx.id.name` is set when a request
 * reached the object through `getByName`, but not when its alarm started it (workerd: an
 * alarm-started instance has an id without a name). After a control-plane restart that is how a
 * shard with a pending alarm comes up first, and it used to call itself "unknown" for its whole
 * life: wrong siblings to steal from, and /metrics labelled `queue="unknown"`.
 *
 * @example
 * ```ts
 * rememberedName(ctx); // "default#1", also when ctx.id.name is undefined
 * ```
 */
export function rememberedName(ctx: Pick<DurableObjectState, "id" | "storage">): string {
  const name = ctx.id.name;
  const stored = ctx.storage.kv.get<string>(NAME_KEY);
  if (name) {
    if (stored !== name) ctx.storage.kv.put(NAME_KEY, name);
    return name;
  }
  return stored ?? "unknown";
}

/**
 * Builds the shard context of a QueueDO.
 *
 * @example
 * ```ts
 * this.shard = openShard(ctx, () => this.env, drizzle(ctx.storage, { schema }), new AdminFanout());
 * ```
 */
export function openShard(ctx: DurableObjectState, env: () => Env, db: QueueDb, admins: AdminFanout): Shard {
  const shardName = rememberedName(ctx);
  const { queue } = parseShardName(shardName);
  return {
    db,
    ctx,
    // Read through the object on each use: the Durable Object owns `env` (tests may swap a binding).
    get env() {
      return env();
    },
    shardName,
    queue,
    admins,
    backlog: new Backlog(Date.now()),
    // Read on each use, as the variable is: a bad POLAR_QUEUE_SHARDS fails the call, not the object.
    get siblings() {
      return shardsOf(queue, env().POLAR_QUEUE_SHARDS).filter((name) => name !== shardName);
    },
  };
}
