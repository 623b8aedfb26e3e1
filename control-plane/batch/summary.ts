/**
 * The ledger's state queries: the sessions of a batch (filtered, paged) and the batch's aggregates
 * per task (`GET /v1/batches/:id/sessions` and `/summary`). They read the columns the ledger keeps
 * at acceptance (reward, error, token counts, stage timings), never the result JSON.
 *
 * @module
 */
import { and, asc, eq, gt, or, type SQL } from "drizzle-orm";
import type { DrizzleSqliteDODatabase } from "drizzle-orm/durable-sqlite";
import { type SessionStatus, type TaskSpec, TerminalStatus } from "../../protocol";
import { batchEventData, stageOf } from "./events";
import * as schema from "./schema";

type LedgerDb = DrizzleSqliteDODatabase<typeof schema>;

/** Bins of a task's reward histogram, over [0, 1]. */
export const REWARD_BINS = 10;

/**
 * The harness a task runs, as listings and summaries name it (`import_path` for a harness given
 * by import path).
 *
 * @example
 * ```ts
 * harnessOf({ agent: { harness: "codex" } }); // "codex"
 * ```
 */
export function harnessOf(task: { agent: { harness?: string | undefined } }): string {
  return task.agent.harness ?? "import_path";
}

/** One session as `GET /v1/batches/:id/sessions` lists it. */
export interface SessionListItem {
  session_id: string;
  task_id: string;
  status: string;
  stage: string | null;
  node_id: string | null;
  attempt: number;
  reward: number | null;
  error_kind: string | null;
  error_message: string | null;
  created_at: number;
  started_at: number | null;
  finished_at: number | null;
  stage_timings: { init_ms: number; ready_wait_ms: number; run_ms: number; post_run_ms: number } | null;
  has_logs: boolean;
  has_tokens: boolean;
  has_completions: boolean;
}

/** Filters and cursor of the session list (null: any). */
export interface SessionListQuery {
  task_id: string | null;
  status: string | null;
  node_id: string | null;
  /** The `session_id` that ended the previous page. */
  after: string | null;
  limit: number;
}

/** A page of sessions; `next` is the cursor of the following page, null on the last. */
export interface SessionListPage {
  sessions: SessionListItem[];
  next: string | null;
}

/** Token ids over the trajectories the counts cover. */
export interface TokenCounts {
  prompt: number;
  response: number;
}

/** Aggregates of a set of sessions. */
export interface Aggregates {
  total: number;
  counts_by_status: Record<string, number>;
  mean_reward: number | null;
  pass_rate: number | null;
  errors_by_kind: Record<string, number>;
  tokens: TokenCounts;
}

/** Aggregates of one task. */
export interface TaskSummary extends Aggregates {
  task_id: string;
  harness: string;
  reward_histogram: { lo: number; hi: number; count: number }[];
}

/** `GET /v1/batches/:id/summary`. */
export interface BatchSummary extends Aggregates {
  batch_id: string;
  status: string;
  tasks: TaskSummary[];
}

function rows(db: LedgerDb, where?: SQL) {
  return db
    .select({
      sessionId: schema.sessions.sessionId,
      taskIndex: schema.sessions.taskIndex,
      sampleIndex: schema.sessions.sampleIndex,
      status: schema.sessions.status,
      nodeId: schema.sessions.nodeId,
      attempt: schema.sessions.attempt,
      createdAt: schema.sessions.createdAt,
      startedAt: schema.sessions.startedAt,
      finishedAt: schema.sessions.finishedAt,
      taskId: schema.tasks.taskId,
      reward: schema.results.reward,
      errorKind: schema.results.errorKind,
      errorMessage: schema.results.errorMessage,
      promptTokens: schema.results.promptTokens,
      responseTokens: schema.results.responseTokens,
      initMs: schema.results.initMs,
      readyMs: schema.results.readyMs,
      runMs: schema.results.runMs,
      postrunMs: schema.results.postrunMs,
      completionsKey: schema.results.completionsKey,
      logsKey: schema.results.logsKey,
      tokensKey: schema.results.tokensKey,
    })
    .from(schema.sessions)
    .innerJoin(schema.tasks, eq(schema.tasks.taskIndex, schema.sessions.taskIndex))
    .leftJoin(schema.results, eq(schema.results.sessionId, schema.sessions.sessionId))
    .where(where)
    .orderBy(asc(schema.sessions.taskIndex), asc(schema.sessions.sampleIndex));
}

type Row = ReturnType<ReturnType<typeof rows>["all"]>[number];

/**
 * A page of the batch's sessions in task, then sample order.
 *
 * @example
 * ```ts
 * listSessions(db, { task_id: "t1", status: "ERROR", node_id: null, after: null, limit: 100 });
 * ```
 */
export function listSessions(db: LedgerDb, query: SessionListQuery): SessionListPage {
  const conditions: (SQL | undefined)[] = [
    query.task_id === null ? undefined : eq(schema.tasks.taskId, query.task_id),
    query.status === null ? undefined : eq(schema.sessions.status, query.status as SessionStatus),
    query.node_id === null ? undefined : eq(schema.sessions.nodeId, query.node_id),
  ];
  if (query.after !== null) {
    const last = db
      .select({ t: schema.sessions.taskIndex, s: schema.sessions.sampleIndex })
      .from(schema.sessions)
      .where(eq(schema.sessions.sessionId, query.after))
      .get();
    if (!last) return { sessions: [], next: null };
    conditions.push(
      or(
        gt(schema.sessions.taskIndex, last.t),
        and(eq(schema.sessions.taskIndex, last.t), gt(schema.sessions.sampleIndex, last.s)),
      ),
    );
  }
  const page = rows(db, and(...conditions))
    .limit(query.limit + 1)
    .all();
  const more = page.length > query.limit;
  const sessions = page.slice(0, query.limit).map(listItem);
  return { sessions, next: more ? sessions[sessions.length - 1]!.session_id : null };
}

function listItem(r: Row): SessionListItem {
  const ended = (TerminalStatus.options as string[]).includes(r.status);
  const timed = ended && r.initMs !== null && r.readyMs !== null && r.runMs !== null && r.postrunMs !== null;
  return {
    session_id: r.sessionId,
    task_id: r.taskId,
    status: r.status,
    stage: stageOf(r.status),
    node_id: r.nodeId,
    attempt: r.attempt,
    reward: ended ? r.reward : null,
    error_kind: ended ? r.errorKind : null,
    error_message: ended ? r.errorMessage : null,
    created_at: r.createdAt,
    started_at: r.startedAt,
    finished_at: r.finishedAt,
    stage_timings: timed
      ? { init_ms: r.initMs!, ready_wait_ms: r.readyMs!, run_ms: r.runMs!, post_run_ms: r.postrunMs! }
      : null,
    has_logs: r.logsKey !== null,
    has_tokens: r.tokensKey !== null,
    has_completions: r.completionsKey !== null,
  };
}

/** A session passes when it earned the full reward (1 or more). */
function passed(reward: number): boolean {
  return reward >= 1;
}

function aggregate(list: Row[]): Aggregates {
  const counts: Record<string, number> = {};
  const errors: Record<string, number> = {};
  const tokens: TokenCounts = { prompt: 0, response: 0 };
  let rewardSum = 0;
  let rewarded = 0;
  let passes = 0;
  for (const r of list) {
    counts[r.status] = (counts[r.status] ?? 0) + 1;
    if (r.errorKind !== null) errors[r.errorKind] = (errors[r.errorKind] ?? 0) + 1;
    tokens.prompt += r.promptTokens ?? 0;
    tokens.response += r.responseTokens ?? 0;
    if (r.reward !== null) {
      rewardSum += r.reward;
      rewarded += 1;
      if (passed(r.reward)) passes += 1;
    }
  }
  return {
    total: list.length,
    counts_by_status: counts,
    mean_reward: rewarded > 0 ? rewardSum / rewarded : null,
    pass_rate: rewarded > 0 ? passes / rewarded : null,
    errors_by_kind: errors,
    tokens,
  };
}

/**
 * Rewards in {@link REWARD_BINS} equal bins over [0, 1]; rewards outside are clamped into the
 * first or last bin, and 1 falls in the last.
 *
 * @example
 * ```ts
 * rewardHistogram([0, 0.55, 1, 3])[9].count; // 2
 * ```
 */
export function rewardHistogram(rewards: number[]): { lo: number; hi: number; count: number }[] {
  const bins = Array.from({ length: REWARD_BINS }, (_, i) => ({
    lo: i / REWARD_BINS,
    hi: (i + 1) / REWARD_BINS,
    count: 0,
  }));
  for (const reward of rewards) {
    const i = Math.min(REWARD_BINS - 1, Math.max(0, Math.floor(reward * REWARD_BINS)));
    bins[i]!.count += 1;
  }
  return bins;
}

/**
 * The batch's aggregates and each task's, or null when no batch is stored.
 *
 * @example
 * ```ts
 * batchSummary(db)?.tasks[0]?.reward_histogram;
 * ```
 */
export function batchSummary(db: LedgerDb): BatchSummary | null {
  const batch = batchEventData(db);
  if (!batch) return null;
  const all = rows(db).all();
  const byTask = new Map<number, Row[]>();
  for (const r of all) {
    const list = byTask.get(r.taskIndex);
    if (list) list.push(r);
    else byTask.set(r.taskIndex, [r]);
  }
  const tasks = db.select().from(schema.tasks).orderBy(asc(schema.tasks.taskIndex)).all();
  return {
    batch_id: batch.batch_id,
    status: batch.status,
    ...aggregate(all),
    tasks: tasks.map((t) => {
      const list = byTask.get(t.taskIndex) ?? [];
      return {
        task_id: t.taskId,
        harness: harnessOf(JSON.parse(t.spec) as TaskSpec),
        ...aggregate(list),
        reward_histogram: rewardHistogram(list.flatMap((r) => (r.reward === null ? [] : [r.reward]))),
      };
    }),
  };
}
