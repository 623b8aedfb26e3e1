/**
 * Tables of the state-event log (one EventsDO named "global"). The producers' outbox table is in
 * `outbox-schema.ts`.
 *
 * @example
 * ```ts
 * const db = drizzle(ctx.storage, { schema });
 * ```
 *
 * @module
 */
import { index, integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { EventKind } from "./kinds";

/** The log: `seq` is the global, increasing cursor of `GET /v1/events`. */
export const events = sqliteTable(
  "events",
  {
    seq: integer("seq").primaryKey({ autoIncrement: true }),
    kind: text("kind").$type<EventKind>().notNull(),
    batchId: text("batch_id"),
    at: integer("at").notNull(),
    data: text("data").notNull(),
  },
  (t) => [index("events_batch_seq_idx").on(t.batchId, t.seq)],
);

/**
 * The last outbox id appended per producer (`batch:<id>`, `queue:<shard>`): a producer that
 * resends after a lost answer is not logged twice.
 */
export const sources = sqliteTable("sources", {
  source: text("source").primaryKey(),
  lastId: integer("last_id").notNull(),
});

/** Named values of the log (`trimmed_through`: the newest seq dropped by the bound). */
export const meta = sqliteTable("meta", {
  name: text("name").primaryKey(),
  value: integer("value").notNull(),
});
