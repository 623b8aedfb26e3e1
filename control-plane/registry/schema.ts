/**
 * Tables of the registry (one RegistryDO named "global"): the cross-batch index behind
 * `GET /v1/batches` and `GET /v1/gateways`, and the per-gateway token hashes. It is off the
 * dispatch hot path: batches are recorded once at creation, queues once per dispatcher start.
 *
 * @example
 * ```ts
 * const db = drizzle(ctx.storage, { schema });
 * ```
 *
 * @module
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";

/** Every batch ever created (listing, newest first, paged by the unique `(created_at, batch_id)`). */
export const batches = sqliteTable(
  "batches",
  {
    batchId: text("batch_id").primaryKey(),
    queue: text("queue").notNull(),
    tasks: integer("tasks").notNull(),
    sessions: integer("sessions").notNull(),
    createdAt: integer("created_at").notNull(),
    /**
     * `running`, `completed` or `cancelled`, as the batch's ledger last reported it (after each
     * flush of its state events). Rows recorded before this column existed read `running`.
     */
    status: text("status").notNull().default("running"),
    /** The tasks' harnesses, `,a,b,` (so one harness matches `LIKE '%,a,%'`). */
    harnesses: text("harnesses").notNull().default(","),
  },
  (t) => [index("batches_created_id_idx").on(t.createdAt, t.batchId)],
);

/** Queues that have had a gateway (admin fan-out and gateway listing visit each). */
export const queues = sqliteTable("queues", {
  name: text("name").primaryKey(),
  lastSeenAt: integer("last_seen_at").notNull(),
});

/** Nodes and the queue they last connected to (for drain by node id). */
export const nodes = sqliteTable("nodes", {
  nodeId: text("node_id").primaryKey(),
  queue: text("queue").notNull(),
  lastSeenAt: integer("last_seen_at").notNull(),
});

/** SHA-256 (hex) of per-gateway tokens `gw_<node>.<secret>`; several per node allow rotation. */
export const gatewayTokens = sqliteTable(
  "gateway_tokens",
  {
    sha256: text("sha256").primaryKey(),
    nodeId: text("node_id").notNull(),
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
  },
  (t) => [index("gateway_tokens_node_idx").on(t.nodeId)],
);

/**
 * SHA-256 (hex) of path credentials `pt_<name>.<secret>`: the secret of an upstream-compatible base
 * URL `/u/<credential>` (docs/upstream-compat.md). `queue` is the one queue the credential may use;
 * several per name allow rotation, and revoking a name ends them all.
 */
export const pathTokens = sqliteTable(
  "path_tokens",
  {
    sha256: text("sha256").primaryKey(),
    name: text("name").notNull(),
    queue: text("queue").notNull(),
    createdAt: integer("created_at").notNull(),
    revokedAt: integer("revoked_at"),
  },
  (t) => [index("path_tokens_name_idx").on(t.name)],
);
