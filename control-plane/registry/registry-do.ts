/**
 * RegistryDO: the control plane's small global index (one instance, named "global"): batches for
 * listing, queues and nodes for gateway listing, admin fan-out and drain, and the SHA-256 hashes
 * of per-gateway tokens and of path credentials (upstream-compatible base URLs).
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { and, desc, eq, gte, isNull, lt, or, type SQL, sql } from "drizzle-orm";
import { type DrizzleSqliteDODatabase, drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import migrations from "./drizzle/migrations.js";
import * as schema from "./schema";

/** Name of the one registry instance. */
export const REGISTRY_NAME = "global";

/** A batch in the listing. */
export interface BatchListItem {
  batch_id: string;
  queue: string;
  tasks: number;
  sessions: number;
  created_at: number;
  /** `running`, `completed` or `cancelled` (as the ledger last reported it). */
  status: string;
  /** The harnesses of the batch's tasks, sorted. */
  harnesses: string[];
}

/** Filters of the batch listing (null: any). */
export interface BatchListFilter {
  status: string | null;
  queue: string | null;
  harness: string | null;
  /** Batches created at or after this time (ms). */
  since: number | null;
}

/** What `recordBatch` takes: the listing item without what the registry derives itself. */
export type BatchRecord = Omit<BatchListItem, "status" | "harnesses"> & { harnesses?: string[] };

/**
 * Where a page of the batch listing starts: after the batch (`created_at`, `batch_id`) that ended
 * the previous page, in newest-first order. The pair is unique, so batches created in the same
 * millisecond are neither skipped nor repeated. `batch_id` null is the older numeric cursor: every
 * batch created strictly before `created_at`.
 */
export interface BatchCursor {
  created_at: number;
  batch_id: string | null;
}

/**
 * The registry Durable Object.
 *
 * @example
 * ```ts
 * const registry = env.REGISTRY.getByName(REGISTRY_NAME);
 * await registry.recordBatch({ batch_id: "b", queue: "default", tasks: 1, sessions: 4, created_at: Date.now() });
 * ```
 */
export class RegistryDO extends DurableObject<Env> {
  private readonly db: DrizzleSqliteDODatabase<typeof schema>;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.db = drizzle(ctx.storage, { schema });
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.db, migrations);
    });
  }

  /** Records a created batch (idempotent). */
  async recordBatch(item: BatchRecord): Promise<void> {
    this.db
      .insert(schema.batches)
      .values({
        batchId: item.batch_id,
        queue: item.queue,
        tasks: item.tasks,
        sessions: item.sessions,
        createdAt: item.created_at,
        harnesses: `,${[...new Set(item.harnesses ?? [])].sort().join(",")}${item.harnesses?.length ? "," : ""}`,
      })
      .onConflictDoNothing()
      .run();
  }

  /** Records the status the batch's ledger reports (after each flush of its state events). */
  async setBatchStatus(batchId: string, status: string): Promise<void> {
    this.db.update(schema.batches).set({ status }).where(eq(schema.batches.batchId, batchId)).run();
  }

  /**
   * Batches newest first (ties by `batch_id`, descending), after `before` when given, that pass
   * `filter`.
   */
  async listBatches(
    limit: number,
    before: BatchCursor | null,
    filter: BatchListFilter = { status: null, queue: null, harness: null, since: null },
  ): Promise<BatchListItem[]> {
    const { createdAt, batchId } = schema.batches;
    let where: SQL | undefined;
    if (before !== null) {
      where =
        before.batch_id === null
          ? lt(createdAt, before.created_at)
          : or(
              lt(createdAt, before.created_at),
              and(eq(createdAt, before.created_at), lt(batchId, before.batch_id)),
            );
    }
    const filters = and(
      where,
      filter.status === null ? undefined : eq(schema.batches.status, filter.status),
      filter.queue === null ? undefined : eq(schema.batches.queue, filter.queue),
      filter.harness === null
        ? undefined
        : sql`instr(${schema.batches.harnesses}, ${`,${filter.harness},`}) > 0`,
      filter.since === null ? undefined : gte(createdAt, filter.since),
    );
    return this.db
      .select()
      .from(schema.batches)
      .where(filters)
      .orderBy(desc(createdAt), desc(batchId))
      .limit(limit)
      .all()
      .map((b) => ({
        batch_id: b.batchId,
        queue: b.queue,
        tasks: b.tasks,
        sessions: b.sessions,
        created_at: b.createdAt,
        status: b.status,
        harnesses: b.harnesses.split(",").filter(Boolean),
      }));
  }

  /**
   * Records that `nodeId` connected to `dispatcher`: the QueueDO's name, which is the shard name
   * (`queue#i`) for a sharded queue. The `queue` columns hold such dispatcher names; `dispatchersOf`
   * expands them to every shard of their queue.
   */
  async recordNode(dispatcher: string, nodeId: string): Promise<void> {
    const now = Date.now();
    this.db
      .insert(schema.queues)
      .values({ name: dispatcher, lastSeenAt: now })
      .onConflictDoUpdate({ target: schema.queues.name, set: { lastSeenAt: now } })
      .run();
    this.db
      .insert(schema.nodes)
      .values({ nodeId, queue: dispatcher, lastSeenAt: now })
      .onConflictDoUpdate({ target: schema.nodes.nodeId, set: { queue: dispatcher, lastSeenAt: now } })
      .run();
  }

  /** Records a queue named by a fence change (before or without any gateway on it). */
  async recordQueue(queue: string): Promise<void> {
    const now = Date.now();
    this.db
      .insert(schema.queues)
      .values({ name: queue, lastSeenAt: now })
      .onConflictDoUpdate({ target: schema.queues.name, set: { lastSeenAt: now } })
      .run();
  }

  /** Every queue that has had a gateway or a fence change. */
  async listQueues(): Promise<string[]> {
    return this.db
      .select({ name: schema.queues.name })
      .from(schema.queues)
      .all()
      .map((q) => q.name);
  }

  /** The queue `nodeId` last connected to, or null. */
  async queueOfNode(nodeId: string): Promise<string | null> {
    return this.db.select().from(schema.nodes).where(eq(schema.nodes.nodeId, nodeId)).get()?.queue ?? null;
  }

  /** Stores the SHA-256 of a per-gateway token (idempotent). */
  async addGatewayToken(nodeId: string, sha256: string): Promise<void> {
    this.db
      .insert(schema.gatewayTokens)
      .values({ sha256, nodeId, createdAt: Date.now() })
      .onConflictDoNothing()
      .run();
  }

  /** Revokes every token of `nodeId`; returns how many. */
  async revokeGatewayTokens(nodeId: string): Promise<number> {
    return this.db
      .update(schema.gatewayTokens)
      .set({ revokedAt: Date.now() })
      .where(and(eq(schema.gatewayTokens.nodeId, nodeId), isNull(schema.gatewayTokens.revokedAt)))
      .returning({ sha256: schema.gatewayTokens.sha256 })
      .all().length;
  }

  /** Hashes of the active tokens of `nodeId`. */
  async gatewayTokenHashes(nodeId: string): Promise<string[]> {
    return this.db
      .select({ sha256: schema.gatewayTokens.sha256 })
      .from(schema.gatewayTokens)
      .where(and(eq(schema.gatewayTokens.nodeId, nodeId), isNull(schema.gatewayTokens.revokedAt)))
      .all()
      .map((t) => t.sha256);
  }
  /** Stores the SHA-256 of a path credential of `name`, scoped to `queue` (idempotent). */
  async addPathToken(name: string, sha256: string, queue: string): Promise<void> {
    this.db
      .insert(schema.pathTokens)
      .values({ sha256, name, queue, createdAt: Date.now() })
      .onConflictDoNothing()
      .run();
  }

  /** Revokes every path credential of `name`; returns how many. */
  async revokePathTokens(name: string): Promise<number> {
    return this.db
      .update(schema.pathTokens)
      .set({ revokedAt: Date.now() })
      .where(and(eq(schema.pathTokens.name, name), isNull(schema.pathTokens.revokedAt)))
      .returning({ sha256: schema.pathTokens.sha256 })
      .all().length;
  }

  /** Hashes and queues of the active path credentials of `name`. */
  async pathTokens(name: string): Promise<{ sha256: string; queue: string }[]> {
    return this.db
      .select({ sha256: schema.pathTokens.sha256, queue: schema.pathTokens.queue })
      .from(schema.pathTokens)
      .where(and(eq(schema.pathTokens.name, name), isNull(schema.pathTokens.revokedAt)))
      .all();
  }
}
