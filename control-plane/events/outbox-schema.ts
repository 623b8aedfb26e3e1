/**
 * The outbox table of a state-event producer: the BatchDO and QueueDO schemas re-export it, so
 * each has its own `event_outbox`. An event waits there, written in the same transaction as the
 * change it describes, until the log (EventsDO) has it.
 *
 * @example
 * ```ts
 * export { eventOutbox } from "../events/outbox-schema";
 * ```
 *
 * @module
 */
import { integer, sqliteTable, text } from "drizzle-orm/sqlite-core";
import type { EventKind } from "./kinds";

/** A producer's events not yet in the log, in the order they happened (`id`). */
export const eventOutbox = sqliteTable("event_outbox", {
  id: integer("id").primaryKey({ autoIncrement: true }),
  kind: text("kind").$type<EventKind>().notNull(),
  batchId: text("batch_id"),
  at: integer("at").notNull(),
  data: text("data").notNull(),
});
