import {
  type CompletionRecord,
  compactTokenText,
  type SessionAssignment,
  type StageStep,
  type Trajectory,
} from "../protocol";
import type { TrajectoryBuilder } from "../proxy";
import type { BuilderChoice } from "./builder-choice";
import { messageOf, SessionInterrupt } from "./errors";
import { EvaluationTimeout, GradingRefused, mergeEvalResult } from "./evaluator";
import type { LogSource } from "./failed-sessions";
import type { Runtime, StorageLimited } from "./runtime";
import { collectSessionLogs, type LogDir } from "./session-logs";
import { classify, enter, hold, now, release, type SessionState, type Verdict } from "./session-state";

/** Grading time left to a session whose own budget ran out (its partial work is still scored). */
export const EVAL_GRACE_AFTER_TIMEOUT_MS = 60_000;

/**
 * POST_RUN: the trajectory from the proxy's records, grading, then teardown (always, whatever
 * happened before). Returns the graded trajectory, not yet finalised.
 *
 * @example
 * ```ts
 * const trajectory = await runPostRun(st); // graded, runtimes torn down
 * ```
 */
export async function runPostRun(st: SessionState): Promise<Trajectory> {
  const { a, deps } = st;
  enter(st, "postrun");
  await hold(st, "POST_RUN");
  const postStart = now();
  try {
    st.records = deps.proxy.completions(a.session_id);
    let trajectory = buildTrajectory(
      a,
      st.resolved.builder ?? null,
      st.builder.spec.config,
      st.builder.choice,
      st.records,
    );
    if (st.verdict.status === "COMPLETED" && trajectory.status !== "COMPLETED") {
      // The harness exited 0 but left nothing to train on (e.g. it never called the model): an
      // agent outcome, not an infra fault, so it is reported and not retried.
      st.verdict = {
        ...st.verdict,
        status: "ERROR",
        error: { kind: "agent", message: `trajectory: ${trajectory.error ?? "not built"}` },
      };
    }
    // Evaluators see the session's outcome on the trajectory (session_completed reads it).
    trajectory = stamp(trajectory, st.verdict);
    const before = st.verdict.status;
    if (shouldGrade(st)) trajectory = await evaluate(st, trajectory);
    if (st.verdict.status !== before) trajectory = stamp(trajectory, st.verdict, true);
    st.tokens = tokenText(st, trajectory);
    return trajectory;
  } finally {
    await closeAndTearDown(st);
    release(st, "POST_RUN");
    st.timing.postrun_ms = now() - postStart;
  }
}

/**
 * Steps before the harness executes: a budget that runs out in one of them leaves no work of the
 * agent to judge (no model call, no edit), only a host too slow to start it.
 */
const BEFORE_HARNESS: ReadonlySet<StageStep> = new Set(["queued", "init", "ready", "setup"]);

/**
 * Judge what really ran: not infra or configuration failures (never scored) or cancels. A
 * timed-out session's partial work is graded too, within what is left of its budget or a grace;
 * one timed out before its harness executed is not (reward null): a 0 there would score the host,
 * not the policy, and pull its group's baseline down.
 */
function shouldGrade(st: SessionState): boolean {
  const { error, status, timeout } = st.verdict;
  return Boolean(
    st.resolved.evaluator &&
      st.a.evaluator &&
      st.runtime &&
      error?.kind !== "infra" &&
      error?.kind !== "configuration" &&
      !(status === "TIMEOUT" && timeout && BEFORE_HARNESS.has(timeout.timeout_stage)) &&
      // A session over its storage limit is full: grading would only be refused or fail.
      !(st.runtime as Partial<StorageLimited>).storageExceeded &&
      status !== "CANCELLED" &&
      !st.s.evalAbort.signal.aborted,
  );
}

/** The evaluate step: grades the trajectory within the time left, folding the outcome into the verdict. */
async function evaluate(st: SessionState, trajectory: Trajectory): Promise<Trajectory> {
  const { a, s, signal } = st;
  const spec = a.evaluator!;
  const evaluator = st.resolved.evaluator!;
  enter(st, "evaluate");
  const left = st.deadline - Date.now();
  const evalMs = left > 0 && !signal.aborted ? left : EVAL_GRACE_AFTER_TIMEOUT_MS;
  const evalTimer = setTimeout(() => {
    s.evalAbort.abort(
      new SessionInterrupt("timeout", `evaluation ran out of time (${Math.round(evalMs / 1000)} s left)`, {
        timeout_source: signal.aborted ? "evaluator" : "session",
        timeout_stage: "evaluate",
      }),
    );
  }, evalMs);
  try {
    const fresh = st.evalRuntime ? await st.evalRuntime : null;
    const result = await evaluator({
      session: a,
      trajectory,
      config: spec.config,
      env: spec.env,
      runtime: st.runtime as Runtime,
      evalRuntime: fresh,
      agentResult: st.agentResult,
      timeoutMs: evalMs,
      signal: s.evalAbort.signal,
    });
    const merged = mergeEvalResult(trajectory, spec.strategy, result);
    if (merged.ok) {
      st.reward = result.outcome_reward;
      return merged.trajectory;
    }
    st.verdict = { ...st.verdict, status: "ERROR", error: { kind: merged.kind, message: merged.error } };
    return merged.trajectory ?? trajectory;
  } catch (err) {
    return gradingFailed(st, trajectory, err);
  } finally {
    clearTimeout(evalTimer);
  }
}

/** A grader that threw: a refusal keeps its report, a timeout is the evaluator's, else an error. */
function gradingFailed(st: SessionState, trajectory: Trajectory, err: unknown): Trajectory {
  const strategy = st.a.evaluator!.strategy;
  if (err instanceof GradingRefused) {
    // The grader refused to score (on_protected_change: fail): ERROR, with its report kept.
    st.verdict = {
      ...st.verdict,
      status: "ERROR",
      error: { kind: "agent", message: `evaluator '${strategy}' refused: ${err.message}` },
    };
    const evaluation = { strategy, outcome_reward: null, trace_rewards: null, ...err.report };
    return { ...trajectory, metadata: { ...trajectory.metadata, evaluation } };
  }
  if (err instanceof EvaluationTimeout) {
    st.verdict = {
      status: "TIMEOUT",
      error: { kind: "timeout", message: err.message },
      timeout: { timeout_source: "evaluator", timeout_stage: "evaluate" },
    };
    return trajectory;
  }
  const c = classify(err);
  st.verdict = {
    status: c.status,
    timeout: c.timeout ?? st.verdict.timeout,
    error: {
      kind: c.error.kind,
      message: c.status === "ERROR" ? `evaluator '${strategy}' failed: ${c.error.message}` : c.error.message,
    },
  };
  return trajectory;
}

/**
 * End of POST_RUN: the budget timer off, the proxy session closed (its token-mode tallies read
 * first: the proxy forgets them on close), a failure's logs kept, both runtimes torn down.
 */
async function closeAndTearDown(st: SessionState): Promise<void> {
  const { a, deps } = st;
  clearTimeout(st.budget);
  if (st.sessionOpen) {
    st.bridge = {
      verdicts: deps.proxy.bridgeVerdicts?.(a.session_id) ?? null,
      flags: deps.proxy.bridgeFlags?.(a.session_id) ?? null,
    };
    deps.proxy.closeSession(a.session_id);
  }
  const evalRt = st.evalRuntime ? await st.evalRuntime.catch(() => null) : null;
  // Read before the folders move or go: every session that ran uploads its logs, failed or not.
  const logDirs: LogDir[] = [];
  if (st.runtime) logDirs.push({ dir: st.runtime.logsDir, origin: "session" });
  if (evalRt) logDirs.push({ dir: evalRt.logsDir, origin: "eval" });
  if (logDirs.length) st.logs = await collectSessionLogs(logDirs);
  const { status } = st.verdict;
  // A failure's logs outlive its folder (bounded); with keep_workspaces the whole folder stays.
  if (status !== "COMPLETED" && status !== "CANCELLED" && !deps.keepWorkspaces && deps.failedSessions) {
    const sources: LogSource[] = [];
    if (st.runtime) sources.push({ logsDir: st.runtime.logsDir, as: "logs" });
    if (evalRt) sources.push({ logsDir: evalRt.logsDir, as: "eval-logs" });
    // Nothing ran without a runtime (e.g. a configuration error): the error says it all.
    if (sources.length) st.keptLogs = await deps.failedSessions.keepLogs(a.session_id, a.attempt, sources);
  }
  await Promise.all(
    [st.runtime, evalRt].map((rt) =>
      rt?.teardown({ keep: deps.keepWorkspaces }).catch((err: unknown) => {
        deps.logger.warn("teardown failed", { session_id: a.session_id, error: messageOf(err) });
      }),
    ),
  );
}

/**
 * Token mode: the text of every id of the trajectory's traces, each id decoded alone by the
 * gateway's tokenizer (null without a tokenizer or traces). A failure to decode is logged, not
 * fatal: the result does not depend on it.
 */
function tokenText(st: SessionState, trajectory: Trajectory): SessionState["tokens"] {
  const decode = st.deps.proxy.decodeToken;
  if (!decode || trajectory.traces.length === 0) return null;
  try {
    return compactTokenText(trajectory.traces, (id) => decode(id));
  } catch (err) {
    st.deps.logger.warn("token text not written", { session_id: st.a.session_id, error: messageOf(err) });
    return null;
  }
}

/** The builder's trajectory, with `metadata.builder_choice` saying which builder ran and why. */
function buildTrajectory(
  a: SessionAssignment,
  builder: TrajectoryBuilder | null,
  config: Record<string, unknown>,
  choice: BuilderChoice,
  records: CompletionRecord[],
): Trajectory {
  if (!builder)
    return {
      status: "ERROR",
      traces: [],
      metadata: { session_id: a.session_id, task_id: a.task_id, builder_choice: choice },
      error: null,
    };
  const t = builder(records, { session_id: a.session_id, task_id: a.task_id, config });
  return { ...t, metadata: { ...t.metadata, builder_choice: choice } };
}

/**
 * Stamps the session's outcome on the trajectory (a timeout keeps its partial traces); the
 * builder's own error (e.g. "no completions") is kept unless `override`.
 */
function stamp(t: Trajectory, verdict: Verdict, override = false): Trajectory {
  const { status, error } = verdict;
  const message = (fallback: string) =>
    override ? (error?.message ?? fallback) : (t.error ?? error?.message ?? fallback);
  if (status === "TIMEOUT") return { ...t, status: "TIMEOUT", error: message("timeout") };
  if (status !== "COMPLETED") return { ...t, status: "ERROR", error: message(status.toLowerCase()) };
  return t;
}
