/**
 * EventsDO: the bounded log of state events behind `GET /v1/events` (one instance, named
 * "global"). Producers append batches of events from their outboxes; readers page through the
 * log by `seq`, or wait in here for the next event (the Worker turns that into SSE).
 *
 * It is a Durable Object of its own, not a table of the RegistryDO: every open stream holds a
 * read here, and the registry answers the per-gateway token check of every gateway connection.
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { and, asc, eq, gt, inArray, lte, sql } from "drizzle-orm";
import { type DrizzleSqliteDODatabase, drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import { ResultWaiters } from "../shared/result-waiters";
import migrations from "./drizzle/migrations.js";
import { EVENT_LOG_LIMIT, type EventFilter, type EventsRead, type OutgoingEvent } from "./kinds";
import * as schema from "./schema";

/** Name of the one events instance. */
export const EVENTS_NAME = "global";

/** Longest wait of one `read` held inside this object; the Worker loops for longer streams. */
const MAX_HELD_WAIT_MS = 30_000;

/**
 * The state-event log Durable Object.
 *
 * @example
 * ```ts
 * const log = env.EVENTS.getByName(EVENTS_NAME);
 * const page = await log.read(0, 100, { batch_id: null, kinds: null }, 0);
 * ```
 */
export class EventsDO extends DurableObject<Env> {
  private readonly db: DrizzleSqliteDODatabase<typeof schema>;
  /** Reads waiting for the next append (in memory: a restart ends them early; the Worker asks again). */
  private readonly waiters = new ResultWaiters();
  /** The bound; replaceable in tests so trimming can be seen without 20 000 events. */
  limit = EVENT_LOG_LIMIT;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.db = drizzle(ctx.storage, { schema });
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.db, migrations);
    });
  }

  /**
   * Appends `items` of producer `source` in their order. Items whose id the source already
   * appended are skipped, so a producer may resend after a lost answer. Drops the oldest events
   * beyond the bound. Returns the last id of `source` now in the log.
   */
  async append(source: string, items: OutgoingEvent[]): Promise<number> {
    const last = this.ctx.storage.transactionSync(() => {
      const row = this.db.select().from(schema.sources).where(eq(schema.sources.source, source)).get();
      let lastId = row?.lastId ?? 0;
      for (const item of items) {
        if (item.id <= lastId) continue;
        this.db
          .insert(schema.events)
          .values({ kind: item.kind, batchId: item.batch_id, at: item.at, data: item.data })
          .run();
        lastId = item.id;
      }
      this.db
        .insert(schema.sources)
        .values({ source, lastId })
        .onConflictDoUpdate({ target: schema.sources.source, set: { lastId } })
        .run();
      this.trim();
      return lastId;
    });
    this.waiters.notify();
    return last;
  }

  /** Drops events beyond the bound and remembers the newest seq dropped. */
  private trim(): void {
    const head = this.head();
    const cutoff = head - this.limit;
    if (cutoff <= this.trimmedThrough()) return;
    this.db.delete(schema.events).where(lte(schema.events.seq, cutoff)).run();
    this.db
      .insert(schema.meta)
      .values({ name: "trimmed_through", value: cutoff })
      .onConflictDoUpdate({ target: schema.meta.name, set: { value: cutoff } })
      .run();
  }

  private head(): number {
    return this.db.get<{ head: number | null }>(sql`SELECT max(seq) AS head FROM events`)?.head ?? 0;
  }

  private trimmedThrough(): number {
    return (
      this.db.select().from(schema.meta).where(eq(schema.meta.name, "trimmed_through")).get()?.value ?? 0
    );
  }

  /**
   * Events after `after` that pass `filter`, at most `limit`. With `waitMs` > 0 and none yet,
   * waits up to that long for an append. `after` null starts at the oldest event kept.
   */
  async read(after: number | null, limit: number, filter: EventFilter, waitMs = 0): Promise<EventsRead> {
    let page = this.page(after, limit, filter);
    if (!page.expired && page.events.length === 0 && waitMs > 0) {
      await this.waiters.wait(Math.min(waitMs, MAX_HELD_WAIT_MS));
      page = this.page(page.next, limit, filter);
    }
    return page;
  }

  private page(after: number | null, limit: number, filter: EventFilter): EventsRead {
    const trimmed = this.trimmedThrough();
    const head = Math.max(this.head(), trimmed);
    const from = after ?? trimmed;
    if (from < trimmed) return { expired: true, oldest: trimmed, head };
    const where = and(
      gt(schema.events.seq, from),
      filter.batch_id === null ? undefined : eq(schema.events.batchId, filter.batch_id),
      filter.kinds === null ? undefined : inArray(schema.events.kind, filter.kinds),
    );
    const rows = this.db
      .select({
        seq: schema.events.seq,
        kind: schema.events.kind,
        at: schema.events.at,
        data: schema.events.data,
      })
      .from(schema.events)
      .where(where)
      .orderBy(asc(schema.events.seq))
      .limit(limit)
      .all();
    // A short page scanned the log to its head: the next read starts there, past skipped events.
    const next = rows.length === limit ? rows[rows.length - 1]!.seq : Math.max(from, head);
    return { expired: false, events: rows, next, head };
  }
}
