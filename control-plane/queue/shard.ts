/**
 * What every module of the dispatcher works on: one shard's database, its Durable Object state
 * (sockets, alarm, `waitUntil`), the Worker's bindings, and the shard's names. The QueueDO builds
 * one at construction and hands it to the plain modules (`liveness`, `handshake`, `dispatch`,
 * `stealing`, `lost-leases`, `fence-routes`, `stats`), which keep no state of their own.
 *
 * @module
 */
import type { AdminFanout } from "./admin-fanout";
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
  const shardName = ctx.id.name ?? "unknown";
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
    // Read on each use, as the variable is: a bad POLAR_QUEUE_SHARDS fails the call, not the object.
    get siblings() {
      return shardsOf(queue, env().POLAR_QUEUE_SHARDS).filter((name) => name !== shardName);
    },
  };
}
