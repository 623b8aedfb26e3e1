/**
 * What the fault matrix must find once every session has its result: each session ended exactly
 * once (nothing lost, nothing duplicated); a session that ran to its end has exactly the model
 * calls its plan drew, as traces; infra failures were run again (attempt + 1) and never scored;
 * hanging harnesses ended TIMEOUT. Plus the report's figures.
 *
 * @module
 */
import type { SessionResult } from "../../protocol";
// The harness's own draw, so the check knows each session's number of model calls.
import { plan } from "./agent.mjs";

/** A task of the workload and what its sessions are expected to end as. */
export interface ExpectedTask {
  batchId: string;
  /** Position of the task in its batch (session ids are `{batch}.{task index}.{sample}`). */
  taskIndex: number;
  /** `normal`: COMPLETED with reward 1; `hang`: TIMEOUT; `flaky_runtime`: COMPLETED after retries. */
  kind: "normal" | "hang" | "flaky_runtime";
  samples: number;
}

/** Input of {@link checkResults}. */
export interface CheckInput {
  expected: ExpectedTask[];
  results: SessionResult[];
  /** Per result: time from its batch's submission to when it was read (ms). */
  latencies: number[];
  seed: number;
  injected: Record<string, number>;
  /** The control plane's queue counters (duplicate and stale results, requeued leases, loans). */
  counters: Record<string, number>;
  wallMs: number;
  gatewayStarts: number[];
  controlPlaneStarts: number;
}

/** The matrix's figures and every invariant it found broken. */
export interface MatrixReport {
  sessions: number;
  results: number;
  lost: number;
  duplicated: number;
  /** Results by `status` or `status:error kind`, per task kind. */
  outcomes: Record<string, Record<string, number>>;
  /** Results by attempt number. */
  attempts: Record<string, number>;
  /** Infra failures that ended a session for good (after `max_attempts`). */
  infraFinal: number;
  injected: Record<string, number>;
  counters: Record<string, number>;
  p50Seconds: number;
  p99Seconds: number;
  wallSeconds: number;
  gatewayStarts: number[];
  controlPlaneStarts: number;
  violations: string[];
}

const MAX_ATTEMPTS = 3;

function quantile(sorted: number[], q: number): number {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/**
 * Checks every result against the workload and writes the report.
 *
 * @example
 * ```ts
 * const report = checkResults({ expected, results, latencies, seed: 1, injected, counters, wallMs, gatewayStarts, controlPlaneStarts });
 * ```
 */
export function checkResults(input: CheckInput): MatrixReport {
  const violations: string[] = [];
  const bySession = new Map<string, SessionResult[]>();
  for (const r of input.results) bySession.set(r.session_id, [...(bySession.get(r.session_id) ?? []), r]);
  const outcomes: Record<string, Record<string, number>> = {};
  const attempts: Record<string, number> = {};
  let lost = 0;
  let duplicated = 0;
  let infraFinal = 0;
  let sessions = 0;
  for (const task of input.expected) {
    for (let i = 0; i < task.samples; i++) {
      sessions++;
      const id = `${task.batchId}.${task.taskIndex}.${i}`;
      const got = bySession.get(id) ?? [];
      bySession.delete(id);
      if (got.length === 0) {
        lost++;
        violations.push(`${id}: no result`);
        continue;
      }
      if (got.length > 1) {
        duplicated += got.length - 1;
        violations.push(`${id}: ${got.length} results`);
      }
      const r = got[0]!;
      const outcome = r.error ? `${r.status}:${r.error.kind}` : r.status;
      outcomes[task.kind] = { ...outcomes[task.kind], [outcome]: (outcomes[task.kind]?.[outcome] ?? 0) + 1 };
      attempts[r.attempt] = (attempts[r.attempt] ?? 0) + 1;
      const infra = r.status === "ERROR" && r.error?.kind === "infra";
      if (infra) {
        infraFinal++;
        // Run again on a fresh runtime until the attempts ran out, and never scored.
        if (r.reward !== null) violations.push(`${id}: an infra failure was scored (reward ${r.reward})`);
        if (r.attempt < MAX_ATTEMPTS)
          violations.push(`${id}: infra failure final at attempt ${r.attempt} of ${MAX_ATTEMPTS}`);
        continue;
      }
      if (task.kind === "hang") {
        if (r.status !== "TIMEOUT") violations.push(`${id}: a hanging harness ended ${outcome}, not TIMEOUT`);
        continue;
      }
      const calls = plan(input.seed, id).calls;
      if (r.status !== "COMPLETED" || r.reward !== 1) {
        // Where and how far it got (the error names the stage the budget ran out in), to tell a
        // stuck model call from a slow host.
        violations.push(
          `${id}: ${task.kind} session ended ${outcome} with reward ${r.reward} (on ${r.node_id ?? "no node"}, attempt ${r.attempt}, ${r.trajectory.traces.length} of ${calls} model calls recorded, init ${(r.timing.init_ms / 1000).toFixed(0)} s, ready ${(r.timing.ready_ms / 1000).toFixed(0)} s, run ${(r.timing.run_ms / 1000).toFixed(0)} s${r.error ? `: ${r.error.message}` : ""})`,
        );
        continue;
      }
      const traces = r.trajectory.traces.length;
      if (traces !== calls) violations.push(`${id}: ${traces} traces for the ${calls} model calls it made`);
    }
  }
  for (const [id, extra] of bySession)
    violations.push(`${id}: ${extra.length} results of a session never submitted`);
  const latencies = [...input.latencies].sort((a, b) => a - b);
  return {
    sessions,
    results: input.results.length,
    lost,
    duplicated,
    outcomes,
    attempts,
    infraFinal,
    injected: input.injected,
    counters: input.counters,
    p50Seconds: quantile(latencies, 0.5) / 1000,
    p99Seconds: quantile(latencies, 0.99) / 1000,
    wallSeconds: input.wallMs / 1000,
    gatewayStarts: input.gatewayStarts,
    controlPlaneStarts: input.controlPlaneStarts,
    violations,
  };
}

/**
 * The report as Markdown (the table docs/reliability.md carries).
 *
 * @example
 * ```ts
 * console.log(reportMarkdown(report));
 * ```
 */
export function reportMarkdown(r: MatrixReport): string {
  const kv = (o: Record<string, number>) =>
    Object.entries(o)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([k, v]) => `${k} ${v}`)
      .join(", ") || "none";
  const lines = [
    "| figure | value |",
    "|---|---|",
    `| sessions | ${r.sessions} |`,
    `| results | ${r.results} |`,
    `| lost / duplicated | ${r.lost} / ${r.duplicated} |`,
    ...Object.entries(r.outcomes).map(([kind, o]) => `| outcomes, ${kind} tasks | ${kv(o)} |`),
    `| attempts of the accepted results | ${kv(r.attempts)} |`,
    `| faults injected | ${kv(r.injected)} |`,
    `| control plane counters | ${kv(r.counters)} |`,
    `| gateway starts / control plane starts | ${r.gatewayStarts.join(", ")} / ${r.controlPlaneStarts} |`,
    `| time to result p50 / p99 | ${r.p50Seconds.toFixed(1)} s / ${r.p99Seconds.toFixed(1)} s |`,
    `| wall time | ${r.wallSeconds.toFixed(0)} s |`,
    `| violations | ${r.violations.length === 0 ? "none" : r.violations.slice(0, 20).join("; ")} |`,
  ];
  return lines.join("\n");
}
