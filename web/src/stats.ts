/**
 * Aggregates the dashboard computes from records it was given (results of a batch): mean reward,
 * reward histogram, errors by kind, stage timings. Nothing here is estimated: every figure is a
 * count or mean over the records passed in.
 *
 * @module
 */

import type { SessionResult } from "./api-types";

/**
 * The parts of a session result the aggregates read: a streamed result's fields, its status and
 * error kind widened to any string and its timing to some stages, so rows of other sources (a
 * session listing) fit too.
 */
export type ResultLike = Pick<SessionResult, "session_id" | "task_id" | "reward" | "node_id" | "attempt"> & {
  status: string;
  error: { kind: string; message: string } | null;
  timing?: Partial<SessionResult["timing"]>;
};

/** One bin of a reward histogram. */
export interface Bin {
  lo: number;
  hi: number;
  count: number;
}

/**
 * 10 bins over [0, 1] (the contract's summary shape); rewards outside are clamped into the end bins.
 *
 * @example
 * ```ts
 * rewardHistogram([0, 1, 1]).map((b) => b.count); // [1, 0, 0, 0, 0, 0, 0, 0, 0, 2]
 * ```
 */
export function rewardHistogram(rewards: Array<number | null>, bins = 10): Bin[] {
  const out: Bin[] = Array.from({ length: bins }, (_, i) => ({ lo: i / bins, hi: (i + 1) / bins, count: 0 }));
  for (const r of rewards) {
    if (r === null || !Number.isFinite(r)) continue;
    const i = Math.min(bins - 1, Math.max(0, Math.floor(r * bins)));
    out[i]!.count++;
  }
  return out;
}

/**
 * Mean of the non-null rewards, null when there are none.
 *
 * @example
 * ```ts
 * meanReward([1, 0, null]); // 0.5
 * ```
 */
export function meanReward(rewards: Array<number | null>): number | null {
  const xs = rewards.filter((r): r is number => r !== null);
  return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null;
}

/** Counts per error kind of results that carry an error. */
export function errorsByKind(results: ResultLike[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) if (r.error) out[r.error.kind] = (out[r.error.kind] ?? 0) + 1;
  return out;
}

/** The statuses a session ends in. */
const TERMINAL = ["COMPLETED", "ERROR", "TIMEOUT", "CANCELLED"] as const;

/**
 * Done sessions of a task or batch from its counts by status.
 *
 * @example
 * ```ts
 * doneOf({ COMPLETED: 2, ERROR: 1, RUNNING: 1 }); // 3
 * ```
 */
export function doneOf(counts: Partial<Record<string, number>>): number {
  return TERMINAL.reduce((n, s) => n + (counts[s] ?? 0), 0);
}

/** Counts per status. */
export function countByStatus(results: Array<{ status: string }>): Record<string, number> {
  const out: Record<string, number> = {};
  for (const r of results) out[r.status] = (out[r.status] ?? 0) + 1;
  return out;
}

/** The stages of a session's timeline, in order, with the timing field that measures each. */
export const STAGES = [
  { name: "queued", field: "queued_ms", color: "#b0b7c3" },
  { name: "init", field: "init_ms", color: "#6c8ebf" },
  { name: "ready", field: "ready_ms", color: "#d6b656" },
  { name: "run", field: "run_ms", color: "#82b366" },
  { name: "post-run", field: "postrun_ms", color: "#9673a6" },
] as const;

/**
 * Seconds spent in each stage, per session, as chart datasets (one per stage, stacked).
 *
 * @example
 * ```ts
 * stageDatasets([{ timing: { run_ms: 2000 } }])[3]; // { label: "run", data: [2], color: "#82b366" }
 * ```
 */
export function stageDatasets(rows: Array<{ timing?: ResultLike["timing"] | null }>) {
  return STAGES.map((s) => ({
    label: s.name,
    color: s.color,
    data: rows.map((r) => (r.timing?.[s.field] ?? 0) / 1000),
  }));
}

/**
 * A reward as the tables show it.
 *
 * @example
 * ```ts
 * fmtReward(null); // "–"
 * ```
 */
export function fmtReward(r: number | null | undefined): string {
  return r === null || r === undefined ? "–" : r.toFixed(2);
}

/**
 * How long ago a time in ms was, e.g. `3 s ago`.
 *
 * @example
 * ```ts
 * ago(Date.now() - 5000); // "5 s ago"
 * ```
 */
export function ago(ms: number | null | undefined, now = Date.now()): string {
  if (ms === null || ms === undefined) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 120) return `${s} s ago`;
  if (s < 7200) return `${Math.round(s / 60)} min ago`;
  return `${Math.round(s / 3600)} h ago`;
}
