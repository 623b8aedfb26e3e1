/**
 * BatchDO: the ledger of one batch (named by its batch id). It owns tasks, sessions, leases as
 * recorded by the dispatcher, accepted results and the outbox towards the queues. It is the
 * authority on results: exactly one accepted result per session.
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import type { BatchRequest, GatewayStage, SessionAssignment, SessionResult } from "../../protocol";
import migrations from "./drizzle/migrations.js";
import type {
  AssignOutcome,
  BatchCounters,
  CreateOutcome,
  ProgressOutcome,
  RawResultsPage,
  StatusOutcome,
  SubmitOutcome,
} from "./dto";
import * as outbox from "./outbox-store";
import * as schema from "./schema";
import * as store from "./store";

/** Characters of assignments per `QueueDO.enqueue` call (≤ 12 MB UTF-8, far below the 32 MiB RPC cap). */
const MAX_ENQUEUE_CHARS = 4 * 1024 * 1024;
/** Sessions per `QueueDO.enqueue` call, so one call's inserts stay short. */
const MAX_ENQUEUE_SESSIONS = 500;
/** Characters of result JSON per results page (the RPC reply cap is 32 MiB). */
const MAX_PAGE_CHARS = 8 * 1024 * 1024;

/**
 * Thrown when a request reaches the BatchDO of another batch id (a routing bug, never user input).
 *
 * @example
 * ```ts
 * throw new BatchRoutingError("batch b_1 was routed to the ledger of b_2");
 * ```
 */
export class BatchRoutingError extends Error {
  override name = "BatchRoutingError";
}

/**
 * The batch ledger Durable Object.
 *
 * @example
 * ```ts
 * const outcome = await env.BATCH.getByName(batchId).create(request, hash);
 * const page = await env.BATCH.getByName(batchId).results(0, 100);
 * ```
 */
export class BatchDO extends DurableObject<Env> {
  private readonly db: store.BatchDb;
  /** Single-flight guard for outbox draining (RPC awaits open the input gate). */
  private draining = false;
  private drainAgain = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.db = drizzle(ctx.storage, { schema });
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.db, migrations);
    });
  }

  /**
   * Creates the batch (tasks, sessions, outbox) in one transaction, then tries to deliver the
   * outbox right away. Replaying the same request hash answers `exists`; another hash `conflict`.
   */
  async create(request: BatchRequest & { batch_id: string }, requestHash: string): Promise<CreateOutcome> {
    const name = this.ctx.id.name;
    if (name !== undefined && name !== request.batch_id) {
      throw new BatchRoutingError(`batch ${request.batch_id} was routed to the ledger of ${name}`);
    }
    const queue = request.queue ?? "default";
    const outcome = this.ctx.storage.transactionSync((): CreateOutcome => {
      const existing = store.readBatch(this.db);
      if (existing) {
        if (existing.requestHash !== requestHash) {
          return {
            kind: "conflict",
            message: `batch '${request.batch_id}' already exists with a different body`,
          };
        }
        const status = store.batchStatus(this.db)!;
        return {
          kind: "exists",
          body: {
            batch_id: existing.batchId,
            queue: existing.queue,
            tasks: status.tasks.length,
            sessions: status.sessions,
            created: false,
          },
        };
      }
      const counts = store.insertBatch(this.db, request, requestHash, queue, Date.now());
      return { kind: "created", body: { batch_id: request.batch_id, queue, ...counts, created: true } };
    });
    if (outcome.kind === "created") await this.drainOutbox();
    return outcome;
  }

  /** Status with per-task counts, or null when no batch is stored here. */
  async status(): Promise<StatusOutcome> {
    return store.batchStatus(this.db);
  }

  /** Results after cursor `after` (at most `limit`), or null when no batch is stored here. */
  async results(after: number, limit: number): Promise<RawResultsPage> {
    if (!store.readBatch(this.db)) return null;
    const finished = store.allSessionsFinished(this.db);
    const results = store.resultsAfter(this.db, after, limit, MAX_PAGE_CHARS);
    const next = results.length > 0 ? results[results.length - 1]!.seq : after;
    return { results, next, done: finished && next >= store.lastResultSeq(this.db) };
  }

  /** Records an assignment made by the dispatcher (the new lease supersedes older ones). */
  async markAssigned(
    sessionId: string,
    leaseId: string,
    attempt: number,
    nodeId: string,
  ): Promise<AssignOutcome> {
    return this.ctx.storage.transactionSync(() =>
      store.markAssigned(this.db, sessionId, leaseId, attempt, nodeId, Date.now()),
    );
  }

  /** Records a stage change; a lease other than the current one is refused and counted. */
  async markProgress(sessionId: string, leaseId: string, status: GatewayStage): Promise<ProgressOutcome> {
    return this.ctx.storage.transactionSync(() =>
      store.markProgress(this.db, sessionId, leaseId, status, Date.now()),
    );
  }

  /** Accepts the session's one result, or answers duplicate/stale (counted). */
  async submitResult(sessionId: string, leaseId: string, result: SessionResult): Promise<SubmitOutcome> {
    return this.ctx.storage.transactionSync(() =>
      store.submitResult(this.db, sessionId, leaseId, result, Date.now()),
    );
  }

  /** Stale/duplicate counters (observability and tests). */
  async counters(): Promise<BatchCounters> {
    return store.readCounters(this.db);
  }

  /** Outbox rows not yet delivered (observability and tests). */
  async outboxSize(): Promise<number> {
    return this.db.select().from(schema.outbox).all().length;
  }

  /** Alarm: drain what is due in the outbox; re-arms itself while rows remain. */
  override async alarm(): Promise<void> {
    await this.drainOutbox();
  }

  /**
   * Delivers due outbox rows to their queues. Failures are recorded on the rows with a backoff and
   * left to the alarm; this never throws, so a failed delivery never fails the trainer's request.
   */
  async drainOutbox(): Promise<void> {
    if (this.draining) {
      this.drainAgain = true;
      return;
    }
    this.draining = true;
    try {
      do {
        this.drainAgain = false;
        await this.drainDueRows();
      } while (this.drainAgain);
    } finally {
      this.draining = false;
      await this.armAlarm();
    }
  }

  private async drainDueRows(): Promise<void> {
    const batch = store.readBatch(this.db);
    if (!batch) return;
    const byQueue = new Map<string, (typeof schema.outbox.$inferSelect)[]>();
    for (const row of outbox.dueOutbox(this.db, Date.now())) {
      byQueue.set(row.queue, [...(byQueue.get(row.queue) ?? []), row]);
    }
    for (const [queue, rows] of byQueue) {
      const unsent = new Set(rows.map((r) => r.id));
      try {
        let buffer: SessionAssignment[] = [];
        let bufferChars = 0;
        let coveredRows: number[] = [];
        const flush = async () => {
          // A fresh stub per call: a stub that has thrown may be broken.
          if (buffer.length > 0) await this.env.QUEUE.getByName(queue).enqueue(buffer);
          // The await opened the input gate; deleting is still right because receivers dedupe.
          outbox.deleteOutbox(this.db, coveredRows);
          for (const id of coveredRows) unsent.delete(id);
          buffer = [];
          bufferChars = 0;
          coveredRows = [];
        };
        for (const row of rows) {
          // Re-read per row: sessions may have moved on while an earlier enqueue was awaited.
          for (const item of outbox.queuedAssignments(this.db, batch.batchId, row.taskIndex)) {
            const size = JSON.stringify(item).length;
            if (
              buffer.length > 0 &&
              (bufferChars + size > MAX_ENQUEUE_CHARS || buffer.length >= MAX_ENQUEUE_SESSIONS)
            ) {
              await flush();
            }
            buffer.push(item);
            bufferChars += size;
          }
          coveredRows.push(row.id);
        }
        await flush();
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        console.warn(`BatchDO ${batch.batchId}: outbox delivery to queue '${queue}' failed: ${message}`);
        outbox.deferOutbox(this.db, [...unsent], Date.now(), message);
      }
    }
  }

  private async armAlarm(): Promise<void> {
    const next = outbox.nextOutboxAt(this.db);
    if (next === null) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(Math.max(next, Date.now()));
  }
}
