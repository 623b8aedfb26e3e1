/**
 * The producer side of the state-event log. A producer (BatchDO, QueueDO) records each event in
 * its own `event_outbox`, inside the transaction of the change it describes, and an
 * {@link EventFlusher} sends the outbox to the EventsDO in the background, in order.
 *
 * Why an outbox: the state is the truth and the event follows it. A change never waits on the
 * log (the flush runs in `waitUntil`, after the change has committed and answered), an event is
 * never lost to a failed or slow append (it stays in the outbox and is sent again, with backoff,
 * by the next change or the producer's alarm), and the log skips ids a source already appended,
 * so a resend after a lost answer is not logged twice.
 *
 * @module
 */
import { asc, lte, sql } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import { SingleFlight } from "../shared/single-flight";
import { EVENTS_NAME } from "./events-do";
import type { EventKind, OutgoingEvent } from "./kinds";
import { eventOutbox } from "./outbox-schema";

/** Events sent in one append. */
const EVENTS_PER_APPEND = 200;
/** Longest a flush waits on one append before it gives up and retries later. */
export const APPEND_TIMEOUT_MS = 5_000;
/** First retry after a failed append; doubles up to MAX_RETRY_MS. */
const FIRST_RETRY_MS = 1_000;
const MAX_RETRY_MS = 60_000;

/**
 * A producer's Drizzle handle (BatchDO and QueueDO schemas both include `event_outbox`).
 */
// biome-ignore lint/suspicious/noExplicitAny: any producer schema that includes event_outbox
export type OutboxDb = DrizzleSqliteDODatabase<any>;

/**
 * Records one event in the producer's outbox. Synchronous: call it inside the transaction of
 * the change it describes.
 *
 * @example
 * ```ts
 * addEvent(db, "session", batchId, { batch_id: batchId, session_id, status }, Date.now());
 * ```
 */
export function addEvent(
  db: OutboxDb,
  kind: EventKind,
  batchId: string | null,
  data: object,
  at: number,
): void {
  db.insert(eventOutbox)
    .values({ kind, batchId, at, data: JSON.stringify(data) })
    .run();
}

/**
 * The newest event in the outbox, or undefined when it is empty.
 *
 * @example
 * ```ts
 * if (newestEvent(db)?.kind === "session") addEvent(db, "batch", …);
 * ```
 */
export function newestEvent(db: OutboxDb): { id: number; kind: EventKind } | undefined {
  return db.get<{ id: number; kind: EventKind } | undefined>(
    sql`SELECT id, kind FROM event_outbox ORDER BY id DESC LIMIT 1`,
  );
}

/** Events waiting in the outbox (observability and tests). */
export function outboxEvents(db: OutboxDb): number {
  return db.get<{ n: number } | undefined>(sql`SELECT count(*) AS n FROM event_outbox`)?.n ?? 0;
}

/**
 * Rejects after `ms`: an append that hangs must not hold the flush (and so every later event)
 * forever.
 */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the event log did not answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => {
    if (timer !== undefined) clearTimeout(timer);
  });
}

/**
 * Sends a producer's outbox to the EventsDO: one flush at a time (a flush asked for while one
 * runs runs again after it), oldest first, deleting what the log confirmed. A failed append
 * leaves the events in the outbox and arms the producer's alarm for a retry with backoff.
 *
 * @example
 * ```ts
 * const flusher = new EventFlusher(ctx, () => env, db, `batch:${batchId}`);
 * flusher.schedule(); // after a change committed
 * ```
 */
export class EventFlusher {
  /** One flush at a time: a flush asked for while one runs makes it run again after. */
  private readonly flight = new SingleFlight();
  private failures = 0;
  /** Earliest time of the next retry after a failure (0: none pending). */
  retryAt = 0;

  constructor(
    private readonly ctx: DurableObjectState,
    private readonly env: () => Env,
    private readonly db: OutboxDb,
    private readonly source: () => string,
    /** Runs (synchronously) before each flush reads the outbox: e.g. adds a coalesced event. */
    private readonly prepare: () => void = () => {},
    /**
     * Runs after every event was sent; a throw counts as a failed flush (retried with backoff),
     * so work that must follow the events (e.g. the registry's copy of a status) is retried too.
     */
    private readonly after: () => Promise<void> = async () => {},
  ) {}

  /** Flushes in the background: the caller's answer never waits on the log. */
  schedule(): void {
    this.ctx.waitUntil(this.flush());
  }

  /** Sends every waiting event; never throws. */
  async flush(): Promise<void> {
    // After a failure the next attempt is the alarm's, at the backoff: not a tight loop here.
    await this.flight.run(() => this.sendAll(), { repeatWhile: () => this.failures === 0 });
  }

  private async sendAll(): Promise<void> {
    try {
      this.prepare();
    } catch (error) {
      await this.failed(error);
      return;
    }
    if (await this.sendPages()) {
      try {
        await this.after();
        this.failures = 0;
      } catch (error) {
        await this.failed(error);
      }
    }
  }

  /** Sends the outbox page by page; false when an append failed. */
  private async sendPages(): Promise<boolean> {
    for (;;) {
      const rows = this.db
        .select()
        .from(eventOutbox)
        .orderBy(asc(eventOutbox.id))
        .limit(EVENTS_PER_APPEND)
        .all();
      if (rows.length === 0) return true;
      const items: OutgoingEvent[] = rows.map((r) => ({
        id: r.id,
        kind: r.kind,
        batch_id: r.batchId,
        at: r.at,
        data: r.data,
      }));
      try {
        const log = this.env().EVENTS.getByName(EVENTS_NAME);
        const last = await withTimeout(log.append(this.source(), items), APPEND_TIMEOUT_MS);
        this.db.delete(eventOutbox).where(lte(eventOutbox.id, last)).run();
        this.failures = 0;
        this.retryAt = 0;
        if (rows.length < EVENTS_PER_APPEND) return true;
      } catch (error) {
        await this.failed(error);
        return false;
      }
    }
  }

  /** Backs off and arms the producer's alarm, whose handler flushes again. */
  private async failed(error: unknown): Promise<void> {
    this.failures += 1;
    const delay = Math.min(MAX_RETRY_MS, FIRST_RETRY_MS * 2 ** (this.failures - 1));
    this.retryAt = Date.now() + delay;
    console.warn(`events of ${this.source()}: flush failed (retry in ${delay} ms):`, error);
    const alarm = await this.ctx.storage.getAlarm();
    if (alarm === null || alarm > this.retryAt) await this.ctx.storage.setAlarm(this.retryAt);
  }
}
