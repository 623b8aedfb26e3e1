/**
 * Delivery of the ledger's outbox to the queues: due rows grouped by queue, the sessions of each
 * task row enqueued on the shard of their id in bounded calls, a cancel row told to every shard of
 * its queue. A row is deleted once its queue call returned; a failed call defers the queue's rows
 * that are left with backoff (`outbox-store.ts`), for the alarm to retry. Receivers dedupe, so a
 * row delivered twice is harmless.
 *
 * @module
 */
import type { SessionAssignment } from "../../protocol";
import { sessionShard, shardsOf } from "../queue/shards";
import type * as lifecycle from "./lifecycle";
import * as outbox from "./outbox-store";
import type { BatchDb } from "./store";

/** Characters of assignments per `QueueDO.enqueue` call (≤ 12 MB UTF-8, far below the 32 MiB RPC cap). */
const MAX_ENQUEUE_CHARS = 4 * 1024 * 1024;
/** Sessions per `QueueDO.enqueue` call, so one call's inserts stay short. */
const MAX_ENQUEUE_SESSIONS = 500;

/** Assignments for one queue, gathered up to one `enqueue` call's bound and then sent per shard. */
class EnqueueBuffer {
  private items: SessionAssignment[] = [];
  private chars = 0;
  /** Outbox rows whose sessions are all in `items` (or were sent before). */
  private rows: number[] = [];

  constructor(
    private readonly db: BatchDb,
    private readonly env: Env,
    private readonly queue: string,
    /** The queue's rows not delivered yet; sent rows leave it. */
    private readonly unsent: Set<number>,
  ) {}

  /** Adds one assignment, sending what is gathered first when it would not fit. */
  async add(item: SessionAssignment): Promise<void> {
    const size = JSON.stringify(item).length;
    if (
      this.items.length > 0 &&
      (this.chars + size > MAX_ENQUEUE_CHARS || this.items.length >= MAX_ENQUEUE_SESSIONS)
    ) {
      await this.flush();
    }
    this.items.push(item);
    this.chars += size;
  }

  /** Row `id` is covered once everything added so far is sent. */
  cover(id: number): void {
    this.rows.push(id);
  }

  /** Sends what is gathered, each session to the shard of its id, and deletes the covered rows. */
  async flush(): Promise<void> {
    // One dispatcher for an unsharded queue. A fresh stub per call: a stub that has thrown may be
    // broken.
    const byShard = new Map<string, SessionAssignment[]>();
    for (const item of this.items) {
      const shard = sessionShard(this.queue, item.session_id, this.env.POLAR_QUEUE_SHARDS);
      const list = byShard.get(shard);
      if (list) list.push(item);
      else byShard.set(shard, [item]);
    }
    await Promise.all([...byShard].map(([shard, items]) => this.env.QUEUE.getByName(shard).enqueue(items)));
    // The await opened the input gate; deleting is still right because receivers dedupe.
    outbox.deleteOutbox(this.db, this.rows);
    for (const id of this.rows) this.unsent.delete(id);
    this.items = [];
    this.chars = 0;
    this.rows = [];
  }
}

/** Tells every shard of `queue` to withdraw the sessions of a cancel row, then deletes the row. */
async function withdrawEverywhere(
  db: BatchDb,
  env: Env,
  queue: string,
  row: outbox.OutboxRow,
  unsent: Set<number>,
): Promise<void> {
  const items = JSON.parse(row.payload ?? "[]") as lifecycle.Withdrawal[];
  // A session may sit on any shard (stolen, or leased by a sibling's gateway): tell each.
  const ended = items.filter((i) => !i.superseded);
  const superseded = items.filter((i) => i.superseded);
  await Promise.all(
    shardsOf(queue, env.POLAR_QUEUE_SHARDS).flatMap((shard) => [
      ...(ended.length > 0
        ? [env.QUEUE.getByName(shard).withdraw(ended, "the session ended on the control plane")]
        : []),
      ...(superseded.length > 0
        ? [
            env.QUEUE.getByName(shard).withdraw(
              superseded,
              "superseded: the session was assigned again (a later lease runs it)",
            ),
          ]
        : []),
    ]),
  );
  outbox.deleteOutbox(db, [row.id]);
  unsent.delete(row.id);
}

/** Delivers the due rows of one queue, in order; on a failure defers the rows left. */
async function deliverToQueue(
  db: BatchDb,
  env: Env,
  batchId: string,
  queue: string,
  rows: outbox.OutboxRow[],
): Promise<void> {
  const unsent = new Set(rows.map((r) => r.id));
  try {
    const buffer = new EnqueueBuffer(db, env, queue, unsent);
    for (const row of rows) {
      // `cancel` is the stored kind of a withdrawal row (see `schema.outbox`).
      if (row.kind === "cancel") {
        await buffer.flush();
        await withdrawEverywhere(db, env, queue, row, unsent);
        continue;
      }
      // Re-read per row: sessions may have moved on while an earlier enqueue was awaited.
      for (const item of outbox.queuedAssignments(db, batchId, row.taskIndex)) await buffer.add(item);
      buffer.cover(row.id);
    }
    await buffer.flush();
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    console.warn(`BatchDO ${batchId}: outbox delivery to queue '${queue}' failed: ${message}`);
    outbox.deferOutbox(db, [...unsent], Date.now(), message);
  }
}

/**
 * Delivers every due outbox row of batch `batchId` to its queue. Never throws: failures are
 * recorded on the rows with a backoff.
 *
 * @example
 * ```ts
 * await deliverDueOutbox(db, env, "b_1"); // then arm the alarm for what was deferred
 * ```
 */
export async function deliverDueOutbox(db: BatchDb, env: Env, batchId: string): Promise<void> {
  const byQueue = new Map<string, outbox.OutboxRow[]>();
  for (const row of outbox.dueOutbox(db, Date.now())) {
    byQueue.set(row.queue, [...(byQueue.get(row.queue) ?? []), row]);
  }
  for (const [queue, rows] of byQueue) await deliverToQueue(db, env, batchId, queue, rows);
}
