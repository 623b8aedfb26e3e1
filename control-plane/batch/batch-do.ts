/**
 * BatchDO: the ledger of one batch (named by its batch id). It owns tasks, sessions, leases as
 * recorded by the dispatcher, accepted results and the outbox towards the queues. It is the
 * authority on results: exactly one accepted result per session. The object is thin: its RPCs and
 * alarm call plain modules over its database (`store`, `result-store`, `lifecycle`, `outbox-store`
 * and `outbox-delivery`, `callbacks` and `callback-delivery`, `no-gateway`, `queue-limit`).
 *
 * @module
 */
import { DurableObject } from "cloudflare:workers";
import { drizzle } from "drizzle-orm/durable-sqlite";
import { migrate } from "drizzle-orm/durable-sqlite/migrator";
import {
  type BatchRequest,
  type GatewayStage,
  isTerminal,
  LIMITS,
  type SessionResult,
  type SessionStatus,
} from "../../protocol";
import { EventFlusher, outboxEvents } from "../events/outbox";
import { shardsOf } from "../queue/shards";
import type { GatewayPresence } from "../queue/stats";
import { REGISTRY_NAME } from "../registry/registry-do";
import { deliverDueCallbacks } from "./callback-delivery";
import * as callbacks from "./callbacks";
import migrations from "./drizzle/migrations.js";
import type {
  AssignOutcome,
  BatchCounters,
  CancelOutcome,
  CreateOutcome,
  LeaseLostOutcome,
  ProgressOutcome,
  RawResultsPage,
  ResultRefs,
  SessionView,
  StatusOutcome,
  SubmitOutcome,
} from "./dto";
import { noEvaluations, readEvaluations, recordEvaluation } from "./evaluations";
import { batchEventData, coalesceBatchEvent, recordBatchEvent } from "./events";
import * as lifecycle from "./lifecycle";
import * as noGateway from "./no-gateway";
import { deliverDueOutbox } from "./outbox-delivery";
import * as outbox from "./outbox-store";
import { queueOverLimit } from "./queue-limit";
import * as resultStore from "./result-store";
import { ResultWaiters } from "./result-waiters";
import * as rolloutRuns from "./rollout-runs";
import * as schema from "./schema";
import * as store from "./store";
import {
  type BatchSummary,
  batchSummary,
  listSessions,
  type SessionListPage,
  type SessionListQuery,
} from "./summary";
import { countUploadedTokens } from "./uploaded-tokens";
import { queuedAtOf, queueWaitMs } from "./waiting";

/** Longest wait of one `results` call held inside this object; the Worker loops for longer waits. */
const MAX_HELD_WAIT_MS = 30_000;
/** When a queue's dispatchers cannot say whether it has gateways, its no-gateway checks wait this long. */
const PRESENCE_RETRY_MS = 30_000;

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

/** Seconds from an env variable, or the default. */
function seconds(raw: string | undefined, fallback: number): number {
  const value = raw === undefined ? Number.NaN : Number(raw);
  return Number.isFinite(value) && value >= 0 ? value : fallback;
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
  /**
   * A callback pass is running. Results recorded while a callback POST awaits its answer call
   * deliverCallbacks again, and the row is still due until the answer is recorded: without this
   * guard the same callback went out twice although the listener answered 200 both times.
   */
  private delivering = false;
  private deliverAgain = false;
  /** Long-polls waiting for the next accepted result (in memory: a restart ends them early). */
  private readonly waiters = new ResultWaiters();
  /** The fetch used for callbacks (replaceable in tests to observe retries). */
  callbackFetch: typeof fetch = (input, init) => fetch(input, init);
  /** Sends the ledger's state events to the log, off the path of every answer. */
  private readonly events: EventFlusher;
  /** The status last copied to the registry (its batch listing filters on it). */
  private reportedStatus = "running";

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.db = drizzle(ctx.storage, { schema });
    this.events = new EventFlusher(
      ctx,
      () => this.env,
      this.db,
      () => `batch:${ctx.id.name ?? ctx.id.toString()}`,
      () => ctx.storage.transactionSync(() => coalesceBatchEvent(this.db, Date.now())),
      () => this.reportStatus(),
    );
    ctx.blockConcurrencyWhile(async () => {
      await migrate(this.db, migrations);
    });
  }

  private get graceMs(): number {
    return seconds(this.env.POLAR_DEADLINE_GRACE_SECONDS, LIMITS.deadlineGraceSeconds) * 1000;
  }

  /** How long a queue may have no gateway before its waiting sessions end (positive; else the default). */
  private get noGatewayMs(): number {
    const value = seconds(this.env.POLAR_NO_GATEWAY_SECONDS, LIMITS.noGatewaySeconds);
    return (value > 0 ? value : LIMITS.noGatewaySeconds) * 1000;
  }

  /**
   * Creates the batch (tasks, sessions, outbox) in one transaction, then tries to deliver the
   * outbox right away. Replaying the same request hash answers `exists`; another hash, or a
   * cancelled id, `conflict`; a queue over `LIMITS.maxQueueDepth` `queue_full`.
   */
  async create(request: BatchRequest & { batch_id: string }, requestHash: string): Promise<CreateOutcome> {
    const name = this.ctx.id.name;
    if (name !== undefined && name !== request.batch_id) {
      throw new BatchRoutingError(`batch ${request.batch_id} was routed to the ledger of ${name}`);
    }
    const queue = request.queue ?? "default";
    if (!store.readBatch(this.db)) {
      const full = await queueOverLimit(this.env, request, queue);
      if (full) return full;
    }
    const outcome = this.ctx.storage.transactionSync((): CreateOutcome => {
      const existing = store.readBatch(this.db);
      if (existing) {
        if (existing.cancelledAt !== null) {
          return {
            kind: "conflict",
            message: `batch '${request.batch_id}' was cancelled; a cancelled batch id cannot be resubmitted`,
          };
        }
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
      const counts = store.insertBatch(this.db, request, requestHash, queue, Date.now(), this.noGatewayMs);
      return { kind: "created", body: { batch_id: request.batch_id, queue, ...counts, created: true } };
    });
    if (outcome.kind === "created") {
      this.events.schedule();
      await this.drainOutbox();
    }
    return outcome;
  }

  /** Copies a changed batch status to the registry (after the events that announced it). */
  private async reportStatus(): Promise<void> {
    const data = batchEventData(this.db);
    if (!data || data.status === this.reportedStatus) return;
    await this.env.REGISTRY.getByName(REGISTRY_NAME).setBatchStatus(data.batch_id, data.status);
    this.reportedStatus = data.status;
  }

  /** Status with per-task counts, or null when no batch is stored here. */
  async status(): Promise<StatusOutcome> {
    const status = store.batchStatus(this.db);
    if (!status) return null;
    // Task rows come in task-index order, so the i-th task is task index i.
    const evaluations = readEvaluations(this.db);
    return {
      ...status,
      tasks: status.tasks.map((t, i) => ({
        ...t,
        evaluation: evaluations.perTask.get(i) ?? noEvaluations(),
      })),
      evaluation: evaluations.batch,
      cancelled_at: store.readBatch(this.db)?.cancelledAt ?? null,
    };
  }

  /**
   * Results after cursor `after` (at most `limit`, bounded by bytes), or null when no batch is
   * stored here. With `waitMs` > 0 and nothing new, waits up to that long for the next result.
   */
  async results(after: number, limit: number, waitMs = 0): Promise<RawResultsPage> {
    const batch = store.readBatch(this.db);
    if (!batch || batch.requestHash === TOMBSTONE) return null;
    let page = this.page(after, limit);
    if (page.results.length === 0 && !page.done && waitMs > 0) {
      await this.waiters.wait(Math.min(waitMs, MAX_HELD_WAIT_MS));
      page = this.page(after, limit);
    }
    return page;
  }

  private page(after: number, limit: number): NonNullable<RawResultsPage> {
    const finished = store.allSessionsFinished(this.db);
    const results = resultStore.resultsAfter(this.db, after, limit, LIMITS.maxResultsPageBytes);
    const next = results.length > 0 ? results[results.length - 1]!.seq : after;
    return { results, next, done: finished && next >= resultStore.lastResultSeq(this.db) };
  }

  /** Records an assignment made by the dispatcher (the new lease supersedes older ones). */
  async markAssigned(
    sessionId: string,
    leaseId: string,
    attempt: number,
    nodeId: string,
  ): Promise<AssignOutcome> {
    const { outcome, superseded } = this.ctx.storage.transactionSync(() => {
      const now = Date.now();
      const before = store.readSession(this.db, sessionId);
      const outcome = store.markAssigned(this.db, sessionId, leaseId, attempt, nodeId, now);
      // A lease still running is superseded by this one (a double dispatch): its gateway is told
      // to stop now, through every shard of the queue (it may sit on any of them).
      const superseded =
        outcome === "assigned" && before?.leaseId && before.leaseId !== leaseId && before.status !== "QUEUED"
          ? before.leaseId
          : null;
      if (superseded)
        outbox.addWithdrawals(
          this.db,
          [{ session_id: sessionId, lease_id: superseded, superseded: true }],
          now,
        );
      return { outcome, superseded };
    });
    if (outcome === "assigned") this.events.schedule();
    if (superseded) this.ctx.waitUntil(this.drainOutbox());
    return outcome;
  }

  /** Records a stage change; a lease other than the current one is refused and counted. */
  async markProgress(sessionId: string, leaseId: string, status: GatewayStage): Promise<ProgressOutcome> {
    const outcome = this.ctx.storage.transactionSync(() =>
      store.markProgress(this.db, sessionId, leaseId, status, Date.now(), this.graceMs),
    );
    if (outcome === "ok") {
      this.events.schedule();
      await this.armAlarm();
    }
    return outcome;
  }

  /**
   * Accepts the session's one result, or answers duplicate/stale (counted). An `infra` error with
   * attempts left is not final: the session is requeued as attempt + 1 (I4) and the gateway is
   * told "accepted" so it stops resending.
   */
  async submitResult(
    sessionId: string,
    leaseId: string,
    result: SessionResult,
    refs: ResultRefs = {},
  ): Promise<SubmitOutcome> {
    const batchId = store.readBatch(this.db)?.batchId ?? result.batch_id;
    const outcome = this.ctx.storage.transactionSync((): SubmitOutcome => {
      const check = store.checkResult(this.db, sessionId, leaseId);
      if (check.kind !== "open") return check.kind;
      const now = Date.now();
      if (result.status === "ERROR" && result.error?.kind === "infra") {
        const lost = lifecycle.leaseLost(
          this.db,
          batchId,
          sessionId,
          leaseId,
          `infra failure on ${result.node_id ?? "the gateway"}: ${result.error.message}`,
          this.noGatewayMs,
          now,
          true,
        );
        if (lost.outcome === "requeued") {
          outbox.addOutbox(this.db, "enqueue", lost.queue!, lost.taskIndex!, null, now);
          return "accepted";
        }
        if (lost.outcome === "failed") return "accepted";
      }
      lifecycle.recordResult(this.db, check.session, leaseId, result, refs, now);
      recordEvaluation(this.db, check.session.taskIndex, result);
      outbox.addWithdrawals(this.db, lifecycle.afterTerminal(this.db, check.session.taskIndex, now), now);
      return "accepted";
    });
    if (outcome === "accepted") {
      const uploaded = refs.trajectory;
      if (uploaded && result.trajectory.traces.length === 0) {
        this.ctx.waitUntil(countUploadedTokens(this.db, this.env.TRAJECTORIES, sessionId, uploaded));
      }
      await this.afterChange();
    }
    return outcome;
  }

  /**
   * The gateway holding `leaseId` is gone (grace expired, or it restarted without the session):
   * requeue as attempt + 1, or end as ERROR kind `infra` after `max_attempts`.
   */
  async leaseLost(sessionId: string, leaseId: string, reason: string): Promise<LeaseLostOutcome> {
    const batch = store.readBatch(this.db);
    if (!batch) return "stale";
    const outcome = this.ctx.storage.transactionSync(() => {
      const now = Date.now();
      const lost = lifecycle.leaseLost(
        this.db,
        batch.batchId,
        sessionId,
        leaseId,
        reason,
        this.noGatewayMs,
        now,
      );
      if (lost.outcome === "requeued")
        outbox.addOutbox(this.db, "enqueue", lost.queue!, lost.taskIndex!, null, now);
      return lost.outcome;
    });
    if (outcome !== "stale") await this.afterChange();
    return outcome;
  }

  /**
   * Cancels the batch (`taskId` null) or one task: every open session ends CANCELLED and the
   * queues withdraw them. Idempotent. Cancelling an unknown batch leaves a tombstone, so the id
   * cannot be submitted later (upstream's `register_if_missing`). With `onlyIfOpen` (upstream's
   * DELETE), a batch whose sessions have all ended is left as it is (`finished`), not relabelled
   * cancelled.
   */
  async cancel(
    batchId: string,
    taskId: string | null,
    opts: { onlyIfOpen?: boolean } = {},
  ): Promise<CancelOutcome> {
    const outcome = this.ctx.storage.transactionSync((): CancelOutcome => {
      const now = Date.now();
      const batch = store.readBatch(this.db);
      if (batch && opts.onlyIfOpen && store.allSessionsFinished(this.db)) return { kind: "finished" };
      if (!batch) {
        if (taskId !== null) return { kind: "not_found", message: `batch '${batchId}' does not exist` };
        store.insertTombstone(this.db, batchId, TOMBSTONE, now);
        return { kind: "cancelled", ended: 0 };
      }
      let taskIndex: number | null = null;
      if (taskId !== null) {
        const task = store.taskById(this.db, taskId);
        if (!task) return { kind: "not_found", message: `task '${taskId}' is not in batch '${batchId}'` };
        taskIndex = task.taskIndex;
      }
      const withdrawn = lifecycle.cancelSessions(this.db, batch.batchId, taskIndex, now);
      outbox.addWithdrawals(this.db, withdrawn, now);
      // The batch is cancelled even when no session was open any more: say so.
      if (taskIndex === null) recordBatchEvent(this.db, now);
      return { kind: "cancelled", ended: withdrawn.length };
    });
    if (outcome.kind === "cancelled") this.events.schedule();
    if (outcome.kind === "cancelled" && outcome.ended > 0) await this.afterChange();
    return outcome;
  }

  /** Upstream task ids: the current run of the id whose run 1 this ledger is (1 when none was claimed). */
  async rolloutGeneration(): Promise<number> {
    return rolloutRuns.currentRun(this.db);
  }

  /** Claims run `from + 1` when `from` is still the current run; returns the current run after. */
  async advanceRolloutGeneration(from: number): Promise<number> {
    return this.ctx.storage.transactionSync(() => rolloutRuns.advanceRun(this.db, from));
  }

  /**
   * The session's current lease and batch, for artifact uploads; counts an upload under any other
   * lease as stale.
   */
  async checkUploadLease(sessionId: string, leaseId: string): Promise<"current" | "stale" | "unknown"> {
    const session = store.readSession(this.db, sessionId);
    if (!session) return "unknown";
    if (session.leaseId === leaseId && !isTerminal(session.status)) return "current";
    store.bumpCounter(this.db, "stale_uploads");
    return "stale";
  }

  /**
   * Where a session stands (status, attempt, current lease), or null when this ledger has no such
   * session: what a dispatcher asks before it dispatches again a session it lent to a sibling
   * shard that never settled the loan.
   */
  async sessionState(
    sessionId: string,
  ): Promise<{ status: SessionStatus; attempt: number; lease_id: string | null } | null> {
    const session = store.readSession(this.db, sessionId);
    return session ? { status: session.status, attempt: session.attempt, lease_id: session.leaseId } : null;
  }

  /** One session with its accepted result (trajectory not spliced), or null. */
  async session(sessionId: string): Promise<SessionView | null> {
    const batch = store.readBatch(this.db);
    const session = store.readSession(this.db, sessionId);
    if (!batch || !session) return null;
    const task = store.taskByIndex(this.db, session.taskIndex);
    const result = resultStore.resultOfSession(this.db, sessionId);
    return {
      session_id: session.sessionId,
      batch_id: batch.batchId,
      task_id: task?.taskId ?? "",
      status: session.status,
      attempt: session.attempt,
      lease_id: session.leaseId,
      node_id: session.nodeId,
      created_at: session.createdAt,
      started_at: session.startedAt,
      finished_at: session.finishedAt,
      deadline_at: session.deadlineAt,
      queued_at: queuedAtOf(session),
      queued_ms: result ? session.queueWaitMs : queueWaitMs(session, Date.now()),
      result_json: result ? (resultStore.resultBySeq(this.db, result.seq)?.json ?? null) : null,
      trajectory_key: result?.trajectoryKey ?? null,
      trajectory_bytes: result?.trajectoryBytes ?? null,
      completions_key: result?.completionsKey ?? null,
      completions_bytes: result?.completionsBytes ?? null,
      logs_key: result?.logsKey ?? null,
      logs_bytes: result?.logsBytes ?? null,
      tokens_key: result?.tokensKey ?? null,
      tokens_bytes: result?.tokensBytes ?? null,
    };
  }

  /** A page of the batch's sessions, or null when no batch is stored here. */
  async sessions(query: SessionListQuery): Promise<SessionListPage | null> {
    if (!store.readBatch(this.db)) return null;
    return listSessions(this.db, query);
  }

  /** The batch's aggregates and each task's, or null when no batch is stored here. */
  async summary(): Promise<BatchSummary | null> {
    return batchSummary(this.db);
  }

  /** Stale/duplicate counters (observability and tests). */
  async counters(): Promise<BatchCounters> {
    return store.readCounters(this.db);
  }

  /** State events not yet in the log (observability and tests). */
  async pendingEvents(): Promise<number> {
    return outboxEvents(this.db);
  }

  /** Outbox rows not yet delivered (observability and tests). */
  async outboxSize(): Promise<number> {
    return outbox.outboxSize(this.db);
  }

  /** Callback rows (tests and observability). */
  async callbackState(): Promise<
    { task_index: number; attempts: number; delivered: boolean; last_error: string | null }[]
  > {
    return callbacks.allCallbacks(this.db).map((c) => ({
      task_index: c.taskIndex,
      attempts: c.attempts,
      delivered: c.deliveredAt !== null,
      last_error: c.lastError,
    }));
  }

  /**
   * Alarm, multiplexed over the ledger's timers: session deadlines and waiting limits (I3), outbox
   * retries and callback deliveries. Each part re-derives its work from state, so a repeated alarm
   * is harmless.
   */
  override async alarm(): Promise<void> {
    const batch = store.readBatch(this.db);
    if (batch) {
      const expired = this.ctx.storage.transactionSync(() => {
        const now = Date.now();
        const withdrawn = lifecycle.expireDeadlines(this.db, batch.batchId, now);
        outbox.addWithdrawals(this.db, withdrawn, now);
        return withdrawn.length;
      });
      const abandoned = await this.checkNoGateway(batch.batchId);
      if (expired + abandoned > 0) this.waiters.notify();
    }
    await this.drainOutbox();
    await this.deliverCallbacks();
    await this.events.flush();
    await this.armAlarm();
  }

  /**
   * Due no-gateway checks: asks every shard of each queue whether a gateway is (or when one last
   * was) connected, then ends the sessions of queues without one for the limit, or re-arms their
   * check. Returns how many sessions ended. Never throws: a queue that cannot answer is asked again
   * after PRESENCE_RETRY_MS.
   */
  private async checkNoGateway(batchId: string): Promise<number> {
    let ended = 0;
    for (const queue of noGateway.queuesToCheck(this.db, Date.now())) {
      let presence: GatewayPresence | null = null;
      try {
        const shards = shardsOf(queue, this.env.POLAR_QUEUE_SHARDS);
        presence = noGateway.combinePresence(
          await Promise.all(shards.map((name) => this.env.QUEUE.getByName(name).gatewayPresence())),
        );
      } catch (error) {
        console.warn(`BatchDO ${batchId}: gateways of queue '${queue}' unknown:`, error);
      }
      // The await opened the input gate: the sessions are re-read (some may have started).
      ended += this.ctx.storage.transactionSync(() => {
        const now = Date.now();
        if (!presence) {
          noGateway.deferChecks(this.db, queue, now + PRESENCE_RETRY_MS, now);
          return 0;
        }
        const withdrawn = noGateway.applyPresence(this.db, batchId, queue, presence, this.noGatewayMs, now);
        outbox.addWithdrawals(this.db, withdrawn, now);
        return withdrawn.length;
      });
    }
    return ended;
  }

  /** After results were recorded: wake long-polls, push the outbox, deliver callbacks. */
  private async afterChange(): Promise<void> {
    this.waiters.notify();
    this.events.schedule();
    await this.armAlarm();
    this.ctx.waitUntil(
      (async () => {
        await this.drainOutbox();
        await this.deliverCallbacks();
      })(),
    );
  }

  /** POSTs every due callback once; failures are rescheduled with backoff. Never throws. */
  async deliverCallbacks(): Promise<void> {
    if (this.delivering) {
      // The running pass looks again when it ends (a callback that fell due meanwhile).
      this.deliverAgain = true;
      return;
    }
    this.delivering = true;
    try {
      do {
        this.deliverAgain = false;
        if (store.readBatch(this.db)) await deliverDueCallbacks(this.db, this.env, this.callbackFetch);
      } while (this.deliverAgain);
    } finally {
      this.delivering = false;
      await this.armAlarm();
    }
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
        const batch = store.readBatch(this.db);
        if (batch) await deliverDueOutbox(this.db, this.env, batch.batchId);
      } while (this.drainAgain);
    } finally {
      this.draining = false;
      await this.armAlarm();
    }
  }

  /** Arms the one alarm at the earliest timer (outbox, deadline, callback), or clears it. */
  private async armAlarm(): Promise<void> {
    const next = lifecycle.nextTimerAt(this.db);
    if (next === null) return;
    const current = await this.ctx.storage.getAlarm();
    if (current === null || current > next) await this.ctx.storage.setAlarm(Math.max(next, Date.now()));
  }
}

/** `request_hash` of a tombstone: a batch id cancelled before it was ever submitted. */
const TOMBSTONE = "tombstone";
