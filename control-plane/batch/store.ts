/**
 * Repository functions of the batch ledger: synchronous Drizzle queries over the BatchDO's SQLite.
 * They never await, so a caller that runs several of them without an `await` in between gets them
 * committed atomically (the DO's input gate holds other events back).
 *
 * @module
 */
import { asc, eq, sql } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import {
  type BatchRequest,
  type BatchStatusBody,
  ErrorKind,
  isTerminal,
  LIMITS,
  SessionStatus,
  type TaskProgress,
  type TaskSpec,
} from "../../protocol";
import { sessionIdOf } from "../ids";
import { countersFrom } from "../shared/counters";
import type { AssignOutcome, BatchCounters, ProgressOutcome } from "../shared/ledger-rpc";
import { recordBatchEvent, recordSessionEvent } from "./events";
import * as schema from "./schema";
import { OPEN_SESSION } from "./statuses";
import { waitingTimerAt } from "./waiting";

/** The ledger's Drizzle handle. */
export type BatchDb = DrizzleSqliteDODatabase<typeof schema>;

/** Rows per multi-row INSERT: SQLite DOs allow 100 bound parameters per statement. */
const SESSION_ROWS_PER_INSERT = 8;

/**
 * The stored batch row, or undefined when nothing was created under this id.
 *
 * @example
 * ```ts
 * if (!readBatch(db)) return null; // no such batch
 * ```
 */
export function readBatch(db: BatchDb): typeof schema.batch.$inferSelect | undefined {
  return db.select().from(schema.batch).get();
}

/**
 * Queue a task's sessions go to: the task's own queue, else the batch's.
 *
 * @example
 * ```ts
 * queueOfTask(task, "default"); // task.queue ?? "default"
 * ```
 */
export function queueOfTask(task: TaskSpec, batchQueue: string): string {
  return task.queue ?? batchQueue;
}

/**
 * Writes the batch, its tasks and sessions, and one outbox row per task. Call inside a transaction.
 * Sessions start QUEUED with the timer of a waiting session (`waiting.ts`): no run budget yet.
 *
 * @example
 * ```ts
 * db.transaction(() => insertBatch(db, request, hash, "default", Date.now(), 3_600_000));
 * ```
 */
export function insertBatch(
  db: BatchDb,
  request: BatchRequest & { batch_id: string },
  requestHash: string,
  queue: string,
  now: number,
  noGatewayMs: number,
): { tasks: number; sessions: number } {
  db.insert(schema.batch)
    .values({
      batchId: request.batch_id,
      requestHash,
      queue,
      callbackUrl: request.callback_url ?? null,
      createdAt: now,
    })
    .run();
  let sessionCount = 0;
  request.tasks.forEach((task, taskIndex) => {
    const taskQueue = queueOfTask(task, queue);
    db.insert(schema.tasks)
      .values({
        taskIndex,
        taskId: task.task_id,
        queue: taskQueue,
        numSamples: task.num_samples,
        spec: JSON.stringify(task),
      })
      .run();
    const rows: (typeof schema.sessions.$inferInsert)[] = [];
    for (let sampleIndex = 0; sampleIndex < task.num_samples; sampleIndex++) {
      rows.push({
        sessionId: sessionIdOf(request.batch_id, taskIndex, sampleIndex),
        taskIndex,
        sampleIndex,
        status: "QUEUED",
        attempt: 1,
        createdAt: now,
        updatedAt: now,
        queuedAt: now,
        // I3: a session no gateway ever picks up still ends (queue timeout, or no gateway at all).
        deadlineAt: waitingTimerAt(task, now, now + noGatewayMs),
      });
    }
    for (let i = 0; i < rows.length; i += SESSION_ROWS_PER_INSERT) {
      db.insert(schema.sessions)
        .values(rows.slice(i, i + SESSION_ROWS_PER_INSERT))
        .run();
    }
    sessionCount += rows.length;
    db.insert(schema.outbox)
      .values({ queue: taskQueue, taskIndex, nextAttemptAt: now, createdAt: now })
      .run();
  });
  recordBatchEvent(db, now);
  return { tasks: request.tasks.length, sessions: sessionCount };
}

function zeroCounts(): Record<SessionStatus, number> {
  const counts = {} as Record<SessionStatus, number>;
  for (const status of SessionStatus.options) counts[status] = 0;
  return counts;
}

/**
 * Per-status and per-task counts of the stored batch; null when no batch is stored.
 *
 * @example
 * ```ts
 * const status = batchStatus(db); // { batch_id, counts, tasks, … } | null
 * ```
 */
export function batchStatus(db: BatchDb): BatchStatusBody | null {
  const row = readBatch(db);
  if (!row) return null;
  const taskRows = db
    .select({
      taskIndex: schema.tasks.taskIndex,
      taskId: schema.tasks.taskId,
      numSamples: schema.tasks.numSamples,
    })
    .from(schema.tasks)
    .orderBy(asc(schema.tasks.taskIndex))
    .all();
  const grouped = db
    .select({
      taskIndex: schema.sessions.taskIndex,
      status: schema.sessions.status,
      n: sql<number>`count(*)`,
    })
    .from(schema.sessions)
    .groupBy(schema.sessions.taskIndex, schema.sessions.status)
    .all();
  const total = zeroCounts();
  const perTask = new Map<number, Record<SessionStatus, number>>();
  for (const g of grouped) {
    const counts = perTask.get(g.taskIndex) ?? zeroCounts();
    counts[g.status] += g.n;
    total[g.status] += g.n;
    perTask.set(g.taskIndex, counts);
  }
  let sessions = 0;
  let finished = 0;
  const tasks: TaskProgress[] = taskRows.map((t) => {
    const counts = perTask.get(t.taskIndex) ?? zeroCounts();
    const done = SessionStatus.options.filter(isTerminal).reduce((sum, s) => sum + counts[s], 0);
    sessions += t.numSamples;
    finished += done;
    return { task_id: t.taskId, num_samples: t.numSamples, counts, done: done === t.numSamples };
  });
  return {
    batch_id: row.batchId,
    queue: row.queue,
    created_at: row.createdAt,
    status: finished === sessions ? "completed" : "running",
    sessions,
    completed_sessions: finished,
    counts: total,
    errors: readErrorKinds(db),
    tasks,
  };
}

/** Counter name under which accepted results with error kind `kind` are counted. */
const errorKindCounter = (kind: ErrorKind) => `error_kind:${kind}`;

/**
 * Counts one accepted result that ended with error kind `kind` (shown as `errors` in the batch
 * status, so e.g. configuration errors are visible without reading every result).
 *
 * @example
 * ```ts
 * bumpErrorKind(db, "configuration");
 * ```
 */
export function bumpErrorKind(db: BatchDb, kind: ErrorKind): void {
  db.insert(schema.counters)
    .values({ name: errorKindCounter(kind), value: 1 })
    .onConflictDoUpdate({ target: schema.counters.name, set: { value: sql`${schema.counters.value} + 1` } })
    .run();
}

/** Accepted results per error kind, zero for kinds never seen. */
function readErrorKinds(db: BatchDb): Record<ErrorKind, number> {
  const out = {} as Record<ErrorKind, number>;
  for (const kind of ErrorKind.options) {
    out[kind] =
      db
        .select()
        .from(schema.counters)
        .where(eq(schema.counters.name, errorKindCounter(kind)))
        .get()?.value ?? 0;
  }
  return out;
}

/**
 * True when every session has reached a terminal state.
 *
 * @example
 * ```ts
 * if (allSessionsFinished(db)) console.log("batch done");
 * ```
 */
export function allSessionsFinished(db: BatchDb): boolean {
  const open = db.select({ n: sql<number>`count(*)` }).from(schema.sessions).where(OPEN_SESSION).get();
  return (open?.n ?? 0) === 0;
}

/**
 * Adds one to counter `name`.
 *
 * @example
 * ```ts
 * bumpCounter(db, "stale_results");
 * ```
 */
export function bumpCounter(db: BatchDb, name: keyof BatchCounters): void {
  db.insert(schema.counters)
    .values({ name, value: 1 })
    .onConflictDoUpdate({ target: schema.counters.name, set: { value: sql`${schema.counters.value} + 1` } })
    .run();
}

/**
 * All counters, zero when never bumped.
 *
 * @example
 * ```ts
 * readCounters(db).stale_results; // 0 before any stale result
 * ```
 */
export function readCounters(db: BatchDb): BatchCounters {
  const zeros: BatchCounters = {
    stale_results: 0,
    duplicate_results: 0,
    stale_progress: 0,
    requeued_sessions: 0,
    stale_uploads: 0,
  };
  return countersFrom(zeros, db.select().from(schema.counters).all());
}

/**
 * A session row by id.
 *
 * @example
 * ```ts
 * readSession(db, "b_1.0.0")?.leaseId;
 * ```
 */
export function readSession(db: BatchDb, sessionId: string) {
  return db.select().from(schema.sessions).where(eq(schema.sessions.sessionId, sessionId)).get();
}

/**
 * Records that the dispatcher handed `sessionId` to `nodeId` under `leaseId`. The new lease
 * supersedes any earlier one (its results become stale).
 *
 * @example
 * ```ts
 * markAssigned(db, "b_1.0.0", "l_…", 1, "node-a", Date.now()); // "assigned"
 * ```
 */
export function markAssigned(
  db: BatchDb,
  sessionId: string,
  leaseId: string,
  attempt: number,
  nodeId: string,
  now: number,
): AssignOutcome {
  const session = readSession(db, sessionId);
  if (!session) return "unknown";
  if (isTerminal(session.status)) return "finished";
  db.update(schema.sessions)
    .set({ status: "ASSIGNED", leaseId, attempt, nodeId, assignedAt: now, updatedAt: now })
    .where(eq(schema.sessions.sessionId, sessionId))
    .run();
  recordSessionEvent(db, sessionId, now);
  return "assigned";
}

/**
 * Records a stage change under `leaseId`; anything but the session's current lease is stale.
 *
 * @example
 * ```ts
 * markProgress(db, "b_1.0.0", "l_…", "RUNNING", Date.now(), 120_000); // "ok" | "stale"
 * ```
 */
export function markProgress(
  db: BatchDb,
  sessionId: string,
  leaseId: string,
  status: SessionStatus,
  now: number,
  graceMs: number,
): ProgressOutcome {
  const session = readSession(db, sessionId);
  if (!session || session.leaseId !== leaseId || isTerminal(session.status)) {
    bumpCounter(db, "stale_progress");
    return "stale";
  }
  // The time budget starts at INITIALIZING (as upstream), once per lease.
  const starts = session.startedAt === null && status !== "ASSIGNED" && status !== "QUEUED";
  let deadlineAt = session.deadlineAt;
  let budgetLeftMs = session.budgetLeftMs;
  if (starts) {
    const task = db.select().from(schema.tasks).where(eq(schema.tasks.taskIndex, session.taskIndex)).get();
    const spec = JSON.parse(task!.spec) as TaskSpec;
    deadlineAt = now + spec.timeout_seconds * 1000 + graceMs;
  }
  // READY waits on the gateway's capacity (a READY slot, then a RUN slot) and the gateway's budget
  // does not run meanwhile: keep what is left and hold the session only to a backstop, the longest
  // a RUN slot can be held by the sessions ahead of it (a day's budget plus the grace).
  if (status === "READY" && budgetLeftMs === null && deadlineAt !== null) {
    budgetLeftMs = Math.max(0, deadlineAt - now);
    deadlineAt = now + budgetLeftMs + LIMITS.maxTimeoutSeconds * 1000 + graceMs;
  } else if (status !== "READY" && budgetLeftMs !== null) {
    deadlineAt = now + budgetLeftMs;
    budgetLeftMs = null;
  }
  db.update(schema.sessions)
    .set({ status, updatedAt: now, startedAt: starts ? now : session.startedAt, deadlineAt, budgetLeftMs })
    .where(eq(schema.sessions.sessionId, sessionId))
    .run();
  // A repeated report of the same stage is no change to announce.
  if (status !== session.status) recordSessionEvent(db, sessionId, now);
  return "ok";
}

/**
 * Checks a result against the ledger: a finished session answers "duplicate", a result under any
 * lease but the current one "stale" (both counted); otherwise the open session row.
 *
 * @example
 * ```ts
 * const check = checkResult(db, id, leaseId); if (check.kind === "open") recordResult(…);
 * ```
 */
export function checkResult(
  db: BatchDb,
  sessionId: string,
  leaseId: string,
): { kind: "duplicate" | "stale" } | { kind: "open"; session: NonNullable<ReturnType<typeof readSession>> } {
  const session = readSession(db, sessionId);
  if (session && isTerminal(session.status)) {
    bumpCounter(db, "duplicate_results");
    return { kind: "duplicate" };
  }
  if (!session || session.leaseId !== leaseId) {
    bumpCounter(db, "stale_results");
    return { kind: "stale" };
  }
  return { kind: "open", session };
}

/** `request_hash` of a tombstone: a batch id cancelled before it was ever submitted. */
export const TOMBSTONE = "tombstone";

/**
 * Records a cancelled batch that never existed (upstream's `register_if_missing`): a tombstone
 * row, so the batch cannot be submitted later.
 *
 * @example
 * ```ts
 * insertTombstone(db, "b_1", "tombstone", Date.now());
 * ```
 */
export function insertTombstone(db: BatchDb, batchId: string, requestHash: string, now: number): void {
  db.insert(schema.batch)
    .values({ batchId, requestHash, queue: "default", createdAt: now, cancelledAt: now })
    .run();
}

/**
 * A task by its client-given id.
 *
 * @example
 * ```ts
 * taskById(db, "t1")?.taskIndex;
 * ```
 */
export function taskById(db: BatchDb, taskId: string): typeof schema.tasks.$inferSelect | undefined {
  return db.select().from(schema.tasks).where(eq(schema.tasks.taskId, taskId)).get();
}

/**
 * A task by its index in the batch.
 *
 * @example
 * ```ts
 * taskByIndex(db, session.taskIndex)?.taskId;
 * ```
 */
export function taskByIndex(db: BatchDb, taskIndex: number): typeof schema.tasks.$inferSelect | undefined {
  return db.select().from(schema.tasks).where(eq(schema.tasks.taskIndex, taskIndex)).get();
}
