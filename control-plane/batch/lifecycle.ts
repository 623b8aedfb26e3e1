/**
 * Terminal transitions of the ledger that the control plane decides itself (not a gateway):
 * deadlines (TIMEOUT), cancel of a batch or a task (CANCELLED), early stop (ERROR, kind
 * `cancelled`), lost leases (requeue with attempt + 1, or ERROR kind `infra` after `max_attempts`),
 * and what follows every accepted result (early stop check, task callback scheduling).
 *
 * Every function here is synchronous: a caller that runs them without an `await` in between gets
 * them committed atomically (the DO's input gate holds other events back).
 *
 * @module
 */
import { and, asc, eq, inArray, isNotNull, isNull, lte, sql } from "drizzle-orm";
import {
  type ErrorKind,
  isTerminal,
  type SessionResult,
  type TaskSpec,
  type TerminalStatus,
} from "../../protocol";
import type { ResultRefs } from "../shared/ledger-rpc";
import { idChunks } from "../sql-chunks";
import { recordSessionEvent } from "./events";
import { RESULT_CHUNK_CHARS, splitText } from "./result-store";
import * as schema from "./schema";
import { OPEN_SESSION } from "./statuses";
import { type BatchDb, bumpCounter, bumpErrorKind } from "./store";
import { queuedAtOf, queueTimeoutPassed, queueWaitMs, waitingTimerAt } from "./waiting";

type SessionRow = typeof schema.sessions.$inferSelect;
type TaskRow = typeof schema.tasks.$inferSelect;

/** A session the queue must withdraw (drop from pending, or cancel at the gateway holding it). */
export interface Withdrawal {
  session_id: string;
  lease_id: string | null;
  /**
   * Only this lease ends, the session goes on under a later one: a copy dispatched twice (a shard
   * loan that ran out while the thief also dispatched it) is stopped as soon as the later
   * assignment is recorded, instead of running until its result is refused as stale.
   */
  superseded?: boolean;
}

/** Parsed task specs by task index, read once per call. */
export class TaskCache {
  private readonly specs = new Map<number, { row: TaskRow; spec: TaskSpec }>();
  constructor(private readonly db: BatchDb) {}

  get(taskIndex: number): { row: TaskRow; spec: TaskSpec } {
    let hit = this.specs.get(taskIndex);
    if (!hit) {
      const row = this.db.select().from(schema.tasks).where(eq(schema.tasks.taskIndex, taskIndex)).get();
      if (!row) throw new Error(`task index ${taskIndex} is not in this ledger`);
      hit = { row, spec: JSON.parse(row.spec) as TaskSpec };
      this.specs.set(taskIndex, hit);
    }
    return hit;
  }
}

/**
 * A result the control plane writes itself (no trajectory: the session never produced one).
 *
 * @example
 * ```ts
 * syntheticResult(batchId, session, spec, "TIMEOUT", "timeout", "no result within the budget", {});
 * ```
 */
export function syntheticResult(
  batchId: string,
  session: SessionRow,
  spec: TaskSpec,
  status: Exclude<TerminalStatus, "COMPLETED">,
  kind: ErrorKind,
  message: string,
  metadata: Record<string, unknown>,
  now: number,
): SessionResult {
  const total = Math.max(0, now - session.createdAt);
  return {
    session_id: session.sessionId,
    task_id: spec.task_id,
    batch_id: batchId,
    status,
    reward: null,
    trajectory: {
      status: status === "TIMEOUT" ? "TIMEOUT" : "ERROR",
      traces: [],
      metadata: {},
      error: message,
    },
    // queued_ms is filled in by recordResult, from the ledger's own measure.
    timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: total },
    node_id: session.nodeId,
    attempt: session.attempt,
    error: { kind, message },
    metadata: { ...spec.metadata, ...metadata },
  };
}

/**
 * Stores `result` as the session's one accepted result and ends the session. The caller has
 * checked that the session is open. `timing.queued_ms` is replaced by the ledger's own measure of
 * the wait for a gateway (every attempt, QUEUED until INITIALIZING): the gateway only sees its own
 * INIT queue. Returns the result's sequence number.
 *
 * @example
 * ```ts
 * const seq = recordResult(db, session, result, {}, Date.now());
 * ```
 */
export function recordResult(
  db: BatchDb,
  session: SessionRow,
  leaseId: string,
  result: SessionResult,
  refs: ResultRefs,
  now: number,
  fromGateway = true,
): number {
  const traces = result.trajectory.traces;
  // An uploaded trajectory's traces are not in the result: its tokens are counted after acceptance
  // (uploaded-tokens.ts), until then null.
  const counted = !refs.trajectory || traces.length > 0;
  const queuedMs = queueWaitMs(session, now, result.timing.queued_ms);
  const json = JSON.stringify({ ...result, timing: { ...result.timing, queued_ms: queuedMs } });
  const pieces = splitText(json, RESULT_CHUNK_CHARS);
  const inserted = db
    .insert(schema.results)
    .values({
      sessionId: session.sessionId,
      leaseId,
      status: result.status,
      chars: json.length,
      chunkCount: pieces.length,
      acceptedAt: now,
      trajectoryKey: refs.trajectory?.key ?? null,
      trajectoryBytes: refs.trajectory?.bytes ?? null,
      completionsKey: refs.completions?.key ?? null,
      completionsBytes: refs.completions?.bytes ?? null,
      reward: result.reward,
      errorKind: result.error?.kind ?? null,
      errorMessage: result.error?.message ?? null,
      promptTokens: counted ? traces.reduce((n, t) => n + t.prompt_ids.length, 0) : null,
      responseTokens: counted ? traces.reduce((n, t) => n + t.response_ids.length, 0) : null,
      // A result the ledger wrote itself (timeout, cancel, …) has no measured stages.
      initMs: fromGateway ? result.timing.init_ms : null,
      readyMs: fromGateway ? result.timing.ready_ms : null,
      runMs: fromGateway ? result.timing.run_ms : null,
      postrunMs: fromGateway ? result.timing.postrun_ms : null,
      logsKey: refs.logs?.key ?? null,
      logsBytes: refs.logs?.bytes ?? null,
      tokensKey: refs.tokens?.key ?? null,
      tokensBytes: refs.tokens?.bytes ?? null,
    })
    .returning({ seq: schema.results.seq })
    .get();
  pieces.forEach((data, chunkIndex) => {
    db.insert(schema.resultChunks).values({ seq: inserted.seq, chunkIndex, data }).run();
  });
  if (result.error) bumpErrorKind(db, result.error.kind);
  db.update(schema.sessions)
    .set({
      status: result.status,
      finishedAt: now,
      updatedAt: now,
      deadlineAt: null,
      budgetLeftMs: null,
      queueWaitMs: queuedMs,
      nodeId: result.node_id ?? session.nodeId,
    })
    .where(eq(schema.sessions.sessionId, session.sessionId))
    .run();
  recordSessionEvent(db, session.sessionId, now);
  return inserted.seq;
}

/**
 * Ends every open session in `sessions` with a synthetic result; returns what the queue must
 * withdraw.
 *
 * @example
 * ```ts
 * endSessions(db, batchId, new TaskCache(db), [row], "TIMEOUT", "timeout", "…", () => ({}), Date.now());
 * ```
 */
export function endSessions(
  db: BatchDb,
  batchId: string,
  tasks: TaskCache,
  sessions: SessionRow[],
  status: Exclude<TerminalStatus, "COMPLETED">,
  kind: ErrorKind,
  message: string,
  metadata: (session: SessionRow) => Record<string, unknown>,
  now: number,
): Withdrawal[] {
  const out: Withdrawal[] = [];
  for (const session of sessions) {
    const { spec } = tasks.get(session.taskIndex);
    const result = syntheticResult(batchId, session, spec, status, kind, message, metadata(session), now);
    recordResult(db, session, session.leaseId ?? "", result, {}, now, false);
    out.push({ session_id: session.sessionId, lease_id: session.leaseId });
  }
  return out;
}

/**
 * Ends every open session in `sessions` as TIMEOUT (error kind `timeout`), saying which limit ran
 * out in `metadata.timeout_source`; returns what the queue must withdraw.
 *
 * @example
 * ```ts
 * timeOutSessions(db, batchId, new TaskCache(db), [row], "no gateway …", "no_gateway", Date.now());
 * ```
 */
export function timeOutSessions(
  db: BatchDb,
  batchId: string,
  tasks: TaskCache,
  sessions: SessionRow[],
  message: string,
  source: "session" | "queue" | "no_gateway",
  now: number,
): Withdrawal[] {
  const metadata = () => ({ timeout_source: source });
  return endSessions(db, batchId, tasks, sessions, "TIMEOUT", "timeout", message, metadata, now);
}

function openSessions(db: BatchDb, where?: ReturnType<typeof sql>) {
  return db
    .select()
    .from(schema.sessions)
    .where(where ? and(OPEN_SESSION, where) : OPEN_SESSION)
    .orderBy(asc(schema.sessions.taskIndex), asc(schema.sessions.sampleIndex))
    .all();
}

/**
 * Ends, as TIMEOUT (error kind `timeout`), every open session whose timer is due and that either
 * ran past its budget (reached INITIALIZING: `timeout_source: session`) or waited past its task's
 * `queue_timeout_seconds` (`timeout_source: queue`). Other due sessions are waiting ones whose
 * no-gateway check is due: the BatchDO asks their queue (`no-gateway.ts`).
 *
 * @example
 * ```ts
 * const withdrawn = expireDeadlines(db, batchId, Date.now());
 * ```
 */
export function expireDeadlines(db: BatchDb, batchId: string, now: number): Withdrawal[] {
  const due = db
    .select()
    .from(schema.sessions)
    .where(and(OPEN_SESSION, isNotNull(schema.sessions.deadlineAt), lte(schema.sessions.deadlineAt, now)))
    .all();
  if (due.length === 0) return [];
  const tasks = new TaskCache(db);
  const ended = due.filter((s) => s.startedAt !== null);
  const out = timeOutSessions(
    db,
    batchId,
    tasks,
    ended,
    "the session did not finish within timeout_seconds plus the grace period",
    "session",
    now,
  );
  for (const session of due) {
    const { spec } = tasks.get(session.taskIndex);
    if (!queueTimeoutPassed(spec, session, now)) continue;
    const message = `the session waited for a gateway longer than queue_timeout_seconds (${spec.queue_timeout_seconds} s)`;
    out.push(...timeOutSessions(db, batchId, tasks, [session], message, "queue", now));
    ended.push(session);
  }
  for (const taskIndex of new Set(ended.map((s) => s.taskIndex))) afterTerminal(db, taskIndex, now);
  return out;
}

/**
 * Cancels the whole batch, or one task when `taskIndex` is given: open sessions end CANCELLED.
 * Idempotent: a second call ends nothing.
 *
 * @example
 * ```ts
 * cancelSessions(db, batchId, null, Date.now()); // DELETE /v1/batches/:id
 * ```
 */
export function cancelSessions(
  db: BatchDb,
  batchId: string,
  taskIndex: number | null,
  now: number,
): Withdrawal[] {
  if (taskIndex === null) {
    db.update(schema.batch).set({ cancelledAt: now }).where(isNull(schema.batch.cancelledAt)).run();
    db.update(schema.tasks).set({ cancelledAt: now }).where(isNull(schema.tasks.cancelledAt)).run();
  } else {
    db.update(schema.tasks)
      .set({ cancelledAt: now })
      .where(and(eq(schema.tasks.taskIndex, taskIndex), isNull(schema.tasks.cancelledAt)))
      .run();
  }
  const sessions = openSessions(
    db,
    taskIndex === null ? undefined : sql`${schema.sessions.taskIndex} = ${taskIndex}`,
  );
  const tasks = new TaskCache(db);
  const out = endSessions(
    db,
    batchId,
    tasks,
    sessions,
    "CANCELLED",
    "cancelled",
    taskIndex === null ? "the batch was cancelled" : "the task was cancelled",
    () => ({ cancelled: true }),
    now,
  );
  for (const t of new Set(sessions.map((s) => s.taskIndex))) afterTerminal(db, t, now);
  return out;
}

/** What `leaseLost` did with the session. */
export type LeaseLostOutcome = "requeued" | "failed" | "stale";

/**
 * A gateway lost the session (socket gone past the grace, or it restarted without it), or
 * reported an infra failure (`reported`): requeue it as attempt + 1, or end it as ERROR kind
 * `infra` once `max_attempts` is used up. A lease lost before its gateway reported INITIALIZING,
 * which the gateway did not report on, is requeued on the same attempt (nothing of it ran), at
 * most `max_attempts` times. A lease that is no longer current is ignored (`stale`).
 *
 * @example
 * ```ts
 * leaseLost(db, batchId, "b.0.0", "l_…", "gateway node-a lost", 60_000, Date.now()); // "requeued"
 * ```
 */
export function leaseLost(
  db: BatchDb,
  batchId: string,
  sessionId: string,
  leaseId: string,
  reason: string,
  noGatewayMs: number,
  now: number,
  reported = false,
): { outcome: LeaseLostOutcome; queue: string | null; taskIndex: number | null } {
  const session = db.select().from(schema.sessions).where(eq(schema.sessions.sessionId, sessionId)).get();
  if (!session || session.leaseId !== leaseId || !isOpen(session)) {
    return { outcome: "stale", queue: null, taskIndex: null };
  }
  const tasks = new TaskCache(db);
  const { row, spec } = tasks.get(session.taskIndex);
  // Never started (no INITIALIZING came): nothing of this attempt ran, so it is not used up.
  const unstarted = !reported && session.status === "ASSIGNED" && session.unstartedLosses < spec.max_attempts;
  if (!unstarted && session.attempt >= spec.max_attempts) {
    endSessions(
      db,
      batchId,
      tasks,
      [session],
      "ERROR",
      "infra",
      `${reason}; gave up after ${session.attempt} attempt(s) (max_attempts ${spec.max_attempts})`,
      () => ({ attempts: session.attempt }),
      now,
    );
    afterTerminal(db, session.taskIndex, now);
    return { outcome: "failed", queue: null, taskIndex: null };
  }
  db.update(schema.sessions)
    .set({
      status: "QUEUED",
      attempt: unstarted ? session.attempt : session.attempt + 1,
      unstartedLosses: session.unstartedLosses + (unstarted ? 1 : 0),
      leaseId: null,
      nodeId: null,
      startedAt: null,
      updatedAt: now,
      // The attempt waits for a gateway again (its wait so far is kept) and gets a fresh run
      // budget at its own INITIALIZING, as upstream gives each dispatch its own budget.
      queuedAt: now,
      queueWaitMs: session.queueWaitMs + Math.max(0, (session.startedAt ?? now) - queuedAtOf(session)),
      deadlineAt: waitingTimerAt(spec, now, now + noGatewayMs),
      budgetLeftMs: null,
    })
    .where(eq(schema.sessions.sessionId, sessionId))
    .run();
  recordSessionEvent(db, sessionId, now);
  bumpCounter(db, "requeued_sessions");
  return { outcome: "requeued", queue: row.queue, taskIndex: session.taskIndex };
}

function isOpen(session: SessionRow): boolean {
  return !isTerminal(session.status);
}

/**
 * Runs after sessions of task `taskIndex` ended: early stop (once enough sessions are usable,
 * the stragglers end as ERROR with kind `cancelled` and metadata saying so), then schedules the
 * task callback when the whole group is done. Returns what the queue must withdraw.
 *
 * @example
 * ```ts
 * const withdrawn = afterTerminal(db, 0, Date.now());
 * ```
 */
export function afterTerminal(db: BatchDb, taskIndex: number, now: number): Withdrawal[] {
  const tasks = new TaskCache(db);
  const { row, spec } = tasks.get(taskIndex);
  let withdrawn: Withdrawal[] = [];
  const threshold = spec.early_stop_min_usable_sessions;
  if (threshold !== undefined && row.earlyStoppedAt === null) {
    const usable =
      db
        .select({ n: sql<number>`count(*)` })
        .from(schema.sessions)
        .where(and(eq(schema.sessions.taskIndex, taskIndex), eq(schema.sessions.status, "COMPLETED")))
        .get()?.n ?? 0;
    if (usable >= threshold) {
      db.update(schema.tasks).set({ earlyStoppedAt: now }).where(eq(schema.tasks.taskIndex, taskIndex)).run();
      const stragglers = openSessions(db, sql`${schema.sessions.taskIndex} = ${taskIndex}`);
      const batch = db.select().from(schema.batch).get()!;
      withdrawn = endSessions(
        db,
        batch.batchId,
        tasks,
        stragglers,
        "ERROR",
        "cancelled",
        `early stop: ${usable} usable sessions reached early_stop_min_usable_sessions (${threshold})`,
        () => ({
          early_stop_cancelled: true,
          fully_masked: true,
          early_stop_min_usable_sessions: threshold,
          early_stop_usable_sessions: usable,
        }),
        now,
      );
    }
  }
  scheduleCallbackIfDone(db, taskIndex, spec, now);
  return withdrawn;
}

function scheduleCallbackIfDone(db: BatchDb, taskIndex: number, spec: TaskSpec, now: number): void {
  const open =
    db
      .select({ n: sql<number>`count(*)` })
      .from(schema.sessions)
      .where(and(eq(schema.sessions.taskIndex, taskIndex), OPEN_SESSION))
      .get()?.n ?? 0;
  if (open > 0) return;
  const url = spec.callback_url ?? db.select().from(schema.batch).get()?.callbackUrl ?? null;
  if (!url) return;
  db.insert(schema.callbacks)
    .values({ taskIndex, url, nextAttemptAt: now })
    .onConflictDoNothing({ target: schema.callbacks.taskIndex })
    .run();
}

/**
 * Earliest pending timer of the ledger: outbox retry, session deadline or callback delivery.
 *
 * @example
 * ```ts
 * const at = nextTimerAt(db); if (at !== null) await ctx.storage.setAlarm(at);
 * ```
 */
export function nextTimerAt(db: BatchDb): number | null {
  const row = db.get<{ outbox: number | null; deadline: number | null; callback: number | null }>(sql`SELECT
      (SELECT min(next_attempt_at) FROM outbox) AS outbox,
      (SELECT min(deadline_at) FROM sessions WHERE deadline_at IS NOT NULL
         AND ${OPEN_SESSION}) AS deadline,
      (SELECT min(next_attempt_at) FROM callbacks WHERE delivered_at IS NULL) AS callback`);
  const times = [row?.outbox, row?.deadline, row?.callback].filter((t): t is number => typeof t === "number");
  return times.length > 0 ? Math.min(...times) : null;
}

/**
 * Sessions by id (for withdrawals computed elsewhere).
 *
 * @example
 * ```ts
 * sessionsById(db, ["b.0.0"]);
 * ```
 */
export function sessionsById(db: BatchDb, ids: string[]): SessionRow[] {
  return idChunks(ids).flatMap((chunk) =>
    db.select().from(schema.sessions).where(inArray(schema.sessions.sessionId, chunk)).all(),
  );
}
