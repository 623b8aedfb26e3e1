/**
 * The dispatcher's Drizzle handle and row types, shared by its store modules (one per table:
 * `pending-store`, `loan-store`, `gateway-store`, `lease-store`, `counter-store`; the fence row is
 * in `fence.ts`). Every store function is synchronous: a run of them without an `await` in between
 * commits atomically (the Durable Object's input gate holds other events back).
 *
 * @example
 * ```ts
 * const db: QueueDb = drizzle(ctx.storage, { schema });
 * ```
 *
 * @module
 */
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import type * as schema from "./schema";

/** The dispatcher's Drizzle handle. */
export type QueueDb = DrizzleSqliteDODatabase<typeof schema>;
/** A session waiting in this shard (maybe reserved by a dispatch pass or lent to a sibling). */
export type PendingRow = typeof schema.pending.$inferSelect;
/** A gateway that said hello on this shard. */
export type GatewayRow = typeof schema.gateways.$inferSelect;
/** A session in a gateway's hands. */
export type LeaseRow = typeof schema.leases.$inferSelect;
