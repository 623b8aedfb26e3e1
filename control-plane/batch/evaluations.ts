/**
 * Evaluation counts of a batch ledger, per task and for the batch: how many accepted results
 * carried an evaluation report, how many had their reward discarded, how many were flagged (any
 * verdict but `clean`) and how many of each verdict. A trainer watching `GET /v1/batches/:id`
 * sees a rising tampering rate as it happens. Kept in the ledger's `counters` table under
 * `eval:<task index>:<name>` (bumped in the transaction that accepts the result), so no table
 * changes shape and a replayed result is never counted twice.
 *
 * @module
 */
import { like, sql } from "drizzle-orm";
import { type EvaluationCounts, evaluationSummary, type SessionResult } from "../../protocol";
import * as schema from "./schema";
import type { BatchDb } from "./store";

const PREFIX = "eval:";

function bump(db: BatchDb, name: string): void {
  db.insert(schema.counters)
    .values({ name, value: 1 })
    .onConflictDoUpdate({ target: schema.counters.name, set: { value: sql`${schema.counters.value} + 1` } })
    .run();
}

/**
 * Counts the evaluation of an accepted gateway result (nothing for results without a report).
 *
 * @example
 * ```ts
 * recordEvaluation(db, session.taskIndex, result);
 * ```
 */
export function recordEvaluation(db: BatchDb, taskIndex: number, result: SessionResult): void {
  const summary = evaluationSummary(result.trajectory.metadata);
  if (!summary) return;
  const key = `${PREFIX}${taskIndex}:`;
  bump(db, `${key}evaluated`);
  if (summary.discarded) bump(db, `${key}reward_discarded`);
  if (summary.verdict !== "clean") bump(db, `${key}flagged`);
  bump(db, `${key}verdict:${summary.verdict}`);
}

const empty = (): EvaluationCounts => ({ evaluated: 0, reward_discarded: 0, flagged: 0, verdicts: {} });

/**
 * The counts per task index and their sum over the batch.
 *
 * @example
 * ```ts
 * const { perTask, batch } = readEvaluations(db);
 * perTask.get(0)?.flagged; // tampering attempts seen in task 0
 * ```
 */
export function readEvaluations(db: BatchDb): {
  perTask: Map<number, EvaluationCounts>;
  batch: EvaluationCounts;
} {
  const perTask = new Map<number, EvaluationCounts>();
  const batch = empty();
  const rows = db
    .select()
    .from(schema.counters)
    .where(like(schema.counters.name, `${PREFIX}%`))
    .all();
  for (const row of rows) {
    const m = /^eval:(\d+):(?:(evaluated|reward_discarded|flagged)|verdict:(.+))$/.exec(row.name);
    if (!m) continue;
    const task = perTask.get(Number(m[1])) ?? empty();
    perTask.set(Number(m[1]), task);
    for (const c of [task, batch]) {
      if (m[2]) c[m[2] as "evaluated" | "reward_discarded" | "flagged"] += row.value;
      else c.verdicts[m[3] as string] = (c.verdicts[m[3] as string] ?? 0) + row.value;
    }
  }
  return { perTask, batch };
}

/**
 * Empty counts (a task nothing was evaluated for yet).
 *
 * @example
 * ```ts
 * noEvaluations(); // { evaluated: 0, reward_discarded: 0, flagged: 0, verdicts: {} }
 * ```
 */
export const noEvaluations = empty;
