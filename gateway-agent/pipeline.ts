/**
 * One session through the stages: INIT (runtime start + prepare) → READY (warm, waiting for a
 * run slot) → RUN (harness; eval runtime prewarmed in the background when `refresh_runtime`) →
 * POST_RUN (trajectory from the proxy's records, evaluation, teardown). Every failure becomes a
 * result; nothing escapes.
 *
 * Budgets: `timeout_seconds` runs from INIT start to the end of evaluation; `metadata.agent_timeout`
 * (seconds) caps the harness from RUN start. A timeout keeps the partial trajectory and is
 * classified by `timeout_source` / `timeout_stage` in the trajectory's metadata.
 *
 * @module
 */
import { performance } from "node:perf_hooks";
import {
  type CompletionRecord,
  isModulePath,
  type RuntimeSpec,
  RuntimeSpec as RuntimeSpecSchema,
  type SessionAssignment,
  type SessionError,
  type SessionResult,
  type SessionTiming,
  type TerminalStatus,
  type Trajectory,
} from "../protocol";
import { getBuilder, loadBuilder, type TrajectoryBuilder } from "../proxy";
import { type BuilderChoice, chooseBuilder } from "./builder-choice";
import { type GatewayLogger, messageOf, SessionFailure, SessionInterrupt, type TimeoutInfo } from "./errors";
import {
  EvaluationTimeout,
  type Evaluator,
  GradingRefused,
  mergeEvalResult,
  resolveEvaluator,
} from "./evaluator";
import type { FailedSessionKeeper, LogSource } from "./failed-sessions";
import { type AgentRunResult, type PlanContext, resolveHarness, runHarnessPlan } from "./harness";
import type { HarnessAvailability } from "./harness/availability";
import {
  createRuntime,
  limitStorage,
  type Runtime,
  type RuntimeContext,
  type RuntimeSettings,
  runPrepare,
  type StorageLimited,
} from "./runtime";
import type { StagePools } from "./stage-pools";

/** What the pipeline needs from the gateway. */
export interface PipelineDeps {
  nodeId: string;
  workRoot: string;
  keepWorkspaces: boolean;
  model: string;
  /** The gateway's engine: picks the builder of a task that names none (`builder-choice.ts`). */
  engine: string;
  pools: StagePools;
  runtimeSettings: RuntimeSettings;
  /** Node default when a task has no runtime (else a plain `local` runtime). */
  defaultRuntime: RuntimeSpec | null;
  proxy: {
    url: string;
    openSession(id: string, meta?: Record<string, unknown>): { key: string };
    completions(id: string): CompletionRecord[];
    closeSession(id: string): void;
  };
  logger: GatewayLogger;
  /** Preset availability on this host: a local session of a preset it cannot run fails at once. */
  harnesses?: Pick<HarnessAvailability, "require"> | null;
  /** Keeps the logs of failed sessions (null: they go with the session folder). */
  failedSessions?: FailedSessionKeeper | null;
  /** Stage change: sends `progress`, re-evaluates credit. */
  onStage(status: "INITIALIZING" | "READY" | "RUNNING" | "POST_RUN"): void;
}

/** A session in the pipeline. */
export interface PipelineSession {
  leaseId: string;
  assignment: SessionAssignment;
  /** Aborts the session (budget, cancel, shutdown). */
  abort: AbortController;
  /**
   * Aborts grading too (cancel, shutdown). A budget timeout aborts only `abort`: the partial work
   * is still graded, within {@link EVAL_GRACE_AFTER_TIMEOUT_MS}.
   */
  evalAbort: AbortController;
  /** Fine-grained stage for timeout classification. */
  stage: string;
}

/** A finished session: the result and the records it was built from. */
export interface PipelineOutcome {
  result: SessionResult;
  records: CompletionRecord[];
  /** ms from the run slot's grant to the harness's first command (the warm pool's point). */
  runStartMs: number | null;
  /** Where the logs of a failed session were kept (null: not kept). */
  keptLogs: string | null;
}

const now = () => performance.now();

/** Grading time left to a session whose own budget ran out (its partial work is still scored). */
export const EVAL_GRACE_AFTER_TIMEOUT_MS = 60_000;

/** `metadata.agent_timeout` in ms, or null; a bad value is a task error naming the key. */
export function agentTimeoutMs(metadata: Record<string, unknown>): number | null {
  const v = metadata.agent_timeout;
  if (v === undefined || v === null) return null;
  if (typeof v !== "number" || !Number.isFinite(v) || v <= 0)
    throw new SessionFailure(
      "configuration",
      "metadata.agent_timeout: must be a positive finite number of seconds",
    );
  return v * 1000;
}

function classify(err: unknown): {
  status: TerminalStatus;
  error: SessionError;
  timeout: TimeoutInfo | null;
} {
  if (err instanceof SessionInterrupt) {
    if (err.reason === "timeout")
      return {
        status: "TIMEOUT",
        error: { kind: "timeout", message: err.message },
        timeout: err.timeout ?? null,
      };
    if (err.reason === "cancelled")
      return { status: "CANCELLED", error: { kind: "cancelled", message: err.message }, timeout: null };
    return { status: "ERROR", error: { kind: "infra", message: err.message }, timeout: null };
  }
  if (err instanceof SessionFailure)
    return { status: "ERROR", error: { kind: err.kind, message: err.message }, timeout: null };
  return { status: "ERROR", error: { kind: "infra", message: messageOf(err) }, timeout: null };
}

/**
 * Runs one session end to end.
 *
 * @example
 * ```ts
 * const { result, records } = await runSessionPipeline(session, deps);
 * ```
 */
export async function runSessionPipeline(s: PipelineSession, deps: PipelineDeps): Promise<PipelineOutcome> {
  const a = s.assignment;
  const { pools } = deps;
  const signal = s.abort.signal;
  const timing: SessionTiming = {
    queued_ms: 0,
    init_ms: 0,
    ready_ms: 0,
    run_ms: 0,
    postrun_ms: 0,
    total_ms: 0,
  };
  const started = now();
  let status: TerminalStatus = "COMPLETED";
  let error: SessionError | null = null;
  let timeout: TimeoutInfo | null = null;
  let runtime: Runtime | null = null;
  let evalRuntime: Promise<Runtime | null> | null = null;
  let builder: TrajectoryBuilder | null = null;
  const { spec: builderSpec, choice: builderChoice } = chooseBuilder(a.builder, deps.engine);
  let evaluator: Evaluator | null = null;
  let agentResult: AgentRunResult | null = null;
  let budget: NodeJS.Timeout | undefined;
  let agentTimer: NodeJS.Timeout | undefined;
  let deadline = Number.POSITIVE_INFINITY;
  let sessionOpen = false;
  let runStartMs: number | null = null;
  let keptLogs: string | null = null;
  const held = { init: false, ready: false, run: false };
  const spec: RuntimeSpec = a.runtime ?? deps.defaultRuntime ?? RuntimeSpecSchema.parse({});
  const ctxFor = (name: string): RuntimeContext => ({
    workRoot: deps.workRoot,
    name,
    session_id: a.session_id,
    node_id: deps.nodeId,
    proxyUrl: deps.proxy.url,
    settings: deps.runtimeSettings,
    warn: (m, f) => deps.logger.warn(m, { session_id: a.session_id, ...f }),
  });

  try {
    s.stage = "queued";
    // Join the INIT queue first (synchronously: credit accounting counts queued sessions), then
    // check the task's configuration while queued: a task that cannot run here (a module path that
    // does not load, a harness this host lacks) fails at once, without waiting for an INIT slot
    // or spending any of its budget.
    const leaveQueue = new AbortController();
    const initSlot = pools.init.acquire(AbortSignal.any([signal, leaveQueue.signal]), a.dispatch_priority);
    initSlot.catch(() => {}); // awaited below; a cancel meanwhile must not count as unhandled
    let harness: Awaited<ReturnType<typeof resolveHarness>>;
    let agentMs: number | null;
    try {
      builder = await resolveBuilder(builderSpec.strategy);
      agentMs = agentTimeoutMs(a.metadata);
      evaluator = await resolveEvaluator(a.evaluator);
      harness = await resolveHarness(a.agent);
      deps.harnesses?.require(a.agent, spec, deps.nodeId);
    } catch (err) {
      leaveQueue.abort(err);
      // Granted before the abort: give the slot back.
      await initSlot.then(
        () => pools.init.release(),
        () => {},
      );
      throw err;
    }
    await initSlot;
    held.init = true;
    const initStart = now();
    timing.queued_ms = initStart - started;
    // The budget starts at INITIALIZING (as upstream): queueing on the gateway is free.
    deadline = Date.now() + a.timeout_seconds * 1000;
    budget = setTimeout(() => {
      s.abort.abort(
        new SessionInterrupt("timeout", `timeout_seconds (${a.timeout_seconds} s) exceeded in ${s.stage}`, {
          timeout_source: "session",
          timeout_stage: s.stage,
        }),
      );
    }, a.timeout_seconds * 1000);
    s.stage = "init";
    deps.onStage("INITIALIZING");
    try {
      runtime = await createRuntime(spec, ctxFor(a.session_id));
      runtime = storageBounded(runtime, spec);
      await runtime.start(signal);
      await runPrepare(runtime, spec.prepare, { ...runtime.baseEnv(), ...spec.env }, signal);
      // READY never exceeds its target: take a READY slot before giving INIT back.
      await pools.ready.acquire(signal);
      held.ready = true;
      pools.init.release();
      held.init = false;
      timing.init_ms = now() - initStart;

      const readyStart = now();
      s.stage = "ready";
      deps.onStage("READY");
      await pools.run.acquire(signal);
      held.run = true;
      const runGranted = now();
      pools.ready.release();
      held.ready = false;
      timing.ready_ms = runGranted - readyStart;
      s.stage = "setup";
      deps.onStage("RUNNING");
      const { key } = deps.proxy.openSession(a.session_id, {
        task_id: a.task_id,
        batch_id: a.batch_id,
        // The proxy holds each model call until a replica serves at least this policy version.
        ...(a.min_policy_version === undefined ? {} : { min_policy_version: a.min_policy_version }),
      });
      sessionOpen = true;
      if (a.evaluator?.refresh_runtime) {
        evalRuntime = prewarmEvalRuntime(spec, ctxFor(`${a.session_id}-eval`), signal);
        // Awaited in POST_RUN; until then a failure must not count as an unhandled rejection.
        evalRuntime.catch(() => {});
      }
      const agentAbort = new AbortController();
      if (agentMs !== null) {
        agentTimer = setTimeout(() => {
          agentAbort.abort(
            new SessionInterrupt(
              "timeout",
              `metadata.agent_timeout (${agentMs / 1000} s) exceeded in ${s.stage}`,
              {
                timeout_source: "agent",
                timeout_stage: s.stage,
              },
            ),
          );
        }, agentMs);
      }
      const agentSignal = AbortSignal.any([signal, agentAbort.signal]);
      const rt = runtime;
      const ctx: PlanContext = {
        session: a,
        model: a.agent.model_name ?? deps.model,
        proxyUrl: deps.proxy.url,
        sessionKey: key,
        sessionPath: rt.sessionPath,
        workdir: rt.workdir,
      };
      const plan = harness(ctx);
      try {
        agentResult = await runHarnessPlan({
          runtime: rt,
          ctx,
          plan,
          signal: agentSignal,
          postSignal: signal,
          onStage: (stage) => {
            s.stage = stage;
            if (stage === "exec" && runStartMs === null) runStartMs = now() - runGranted;
          },
        });
      } finally {
        clearTimeout(agentTimer);
        timing.run_ms = now() - runGranted;
      }
      if (agentResult.status === "interrupted") throw agentSignal.reason;
      if (agentResult.status === "failed") {
        const how = agentResult.limitHit
          ? `stopped: ${agentResult.limitHit}`
          : agentResult.exitCode === null
            ? `was killed by ${agentResult.signal}`
            : `exited with code ${agentResult.exitCode}`;
        throw new SessionFailure("agent", `harness '${plan.name}' ${agentResult.failedAt} ${how}`);
      }
    } finally {
      if (held.init) pools.init.release();
      if (held.ready) pools.ready.release();
      if (held.run) pools.run.release();
      held.init = held.ready = held.run = false;
    }
  } catch (err) {
    ({ status, error, timeout } = classify(err));
  }

  // POST_RUN: always, so a failed, timed out or cancelled session still tears down and reports.
  s.stage = "postrun";
  deps.onStage("POST_RUN");
  await pools.post.acquire();
  const postStart = now();
  let trajectory: Trajectory;
  let reward: number | null = null;
  let records: CompletionRecord[] = [];
  try {
    records = deps.proxy.completions(a.session_id);
    trajectory = buildTrajectory(a, builder, builderSpec.config, builderChoice, records);
    if (status === "COMPLETED" && trajectory.status !== "COMPLETED") {
      // The harness exited 0 but left nothing to train on (e.g. it never called the model): an
      // agent outcome, not an infra fault, so it is reported and not retried.
      status = "ERROR";
      error = { kind: "agent", message: `trajectory: ${trajectory.error ?? "not built"}` };
    }
    // Evaluators see the session's outcome on the trajectory (session_completed reads it).
    trajectory = stamp(trajectory, status, error, {});
    const before = status;
    // Judge what really ran: not infra or configuration failures (never scored) or cancels. A
    // timed-out session's partial work is graded too, within what is left of its budget or a grace.
    const judge =
      evaluator &&
      runtime &&
      error?.kind !== "infra" &&
      error?.kind !== "configuration" &&
      // A session over its storage limit is full: grading would only be refused or fail.
      !(runtime as Partial<StorageLimited>).storageExceeded &&
      status !== "CANCELLED" &&
      !s.evalAbort.signal.aborted;
    if (judge && a.evaluator) {
      s.stage = "evaluate";
      const left = deadline - Date.now();
      const evalMs = left > 0 && !signal.aborted ? left : EVAL_GRACE_AFTER_TIMEOUT_MS;
      const evalTimer = setTimeout(() => {
        s.evalAbort.abort(
          new SessionInterrupt(
            "timeout",
            `evaluation ran out of time (${Math.round(evalMs / 1000)} s left)`,
            {
              timeout_source: signal.aborted ? "evaluator" : "session",
              timeout_stage: "evaluate",
            },
          ),
        );
      }, evalMs);
      try {
        const fresh = evalRuntime ? await evalRuntime : null;
        const result = await (evaluator as Evaluator)({
          session: a,
          trajectory,
          config: a.evaluator.config,
          env: a.evaluator.env,
          runtime,
          evalRuntime: fresh,
          agentResult,
          timeoutMs: evalMs,
          signal: s.evalAbort.signal,
        });
        const merged = mergeEvalResult(trajectory, a.evaluator.strategy, result);
        if (merged.ok) {
          trajectory = merged.trajectory;
          reward = result.outcome_reward;
        } else {
          status = "ERROR";
          error = { kind: merged.kind, message: merged.error };
          trajectory = merged.trajectory ?? trajectory;
        }
      } catch (err) {
        if (err instanceof GradingRefused) {
          // The grader refused to score (on_protected_change: fail): ERROR, with its report kept.
          status = "ERROR";
          error = { kind: "agent", message: `evaluator '${a.evaluator.strategy}' refused: ${err.message}` };
          const evaluation = {
            strategy: a.evaluator.strategy,
            outcome_reward: null,
            trace_rewards: null,
            ...err.report,
          };
          trajectory = { ...trajectory, metadata: { ...trajectory.metadata, evaluation } };
        } else if (err instanceof EvaluationTimeout) {
          status = "TIMEOUT";
          error = { kind: "timeout", message: err.message };
          timeout = { timeout_source: "evaluator", timeout_stage: "evaluate" };
        } else {
          const c = classify(err);
          status = c.status;
          timeout = c.timeout ?? timeout;
          error = {
            kind: c.error.kind,
            message:
              c.status === "ERROR"
                ? `evaluator '${a.evaluator.strategy}' failed: ${c.error.message}`
                : c.error.message,
          };
        }
      } finally {
        clearTimeout(evalTimer);
      }
    }
    if (status !== before) trajectory = stamp(trajectory, status, error, {}, true);
  } finally {
    clearTimeout(budget);
    if (sessionOpen) deps.proxy.closeSession(a.session_id);
    const keep = { keep: deps.keepWorkspaces };
    const evalRt = evalRuntime ? await (evalRuntime as Promise<Runtime | null>).catch(() => null) : null;
    // A failure's logs outlive its folder (bounded); with keep_workspaces the whole folder stays.
    if (status !== "COMPLETED" && status !== "CANCELLED" && !deps.keepWorkspaces && deps.failedSessions) {
      const sources: LogSource[] = [];
      if (runtime) sources.push({ logsDir: runtime.logsDir, as: "logs" });
      if (evalRt) sources.push({ logsDir: evalRt.logsDir, as: "eval-logs" });
      // Nothing ran without a runtime (e.g. a configuration error): the error says it all.
      if (sources.length) keptLogs = await deps.failedSessions.keepLogs(a.session_id, a.attempt, sources);
    }
    await Promise.all(
      [runtime, evalRt].map((rt) =>
        rt?.teardown(keep).catch((err: unknown) => {
          deps.logger.warn("teardown failed", { session_id: a.session_id, error: messageOf(err) });
        }),
      ),
    );
    pools.post.release();
    timing.postrun_ms = now() - postStart;
  }
  timing.total_ms = now() - started;
  trajectory = {
    ...trajectory,
    metadata: {
      ...trajectory.metadata,
      node_id: deps.nodeId,
      ...(timeout ?? {}),
      ...(agentResult ? { agent_result: agentResult } : {}),
      ...(keptLogs ? { kept_logs: keptLogs } : {}),
      gateway_timing: { run_start_ms: runStartMs },
    },
  };
  const result: SessionResult = {
    session_id: a.session_id,
    task_id: a.task_id,
    batch_id: a.batch_id,
    status,
    reward,
    trajectory,
    timing,
    node_id: deps.nodeId,
    attempt: a.attempt,
    error,
    metadata: a.metadata,
  };
  if (keptLogs) await deps.failedSessions?.writeSummary(keptLogs, result);
  return { result, records, runStartMs, keptLogs };
}

/**
 * The runtime with `runtime.storage_mb` enforced (see `runtime/storage.ts`); a runtime that cannot
 * measure its storage refuses the task as a configuration error naming the field and the runtime.
 */
function storageBounded(rt: Runtime, spec: RuntimeSpec): Runtime {
  if (spec.storage_mb === undefined) return rt;
  if (!rt.storageBytes) {
    const which = spec.import_path
      ? `custom runtime '${spec.import_path}' (runtime.import_path)`
      : `'${rt.backend}' runtime`;
    throw new SessionFailure(
      "configuration",
      `runtime.storage_mb: the ${which} cannot enforce it (it has no storageBytes()); drop runtime.storage_mb or use a runtime that measures its storage`,
    );
  }
  return limitStorage(rt, spec.storage_mb);
}

/** The task's builder: a built-in, or a module path loaded here (a failure is the task's configuration). */
async function resolveBuilder(strategy: string): Promise<TrajectoryBuilder> {
  try {
    return isModulePath(strategy) ? await loadBuilder(strategy) : getBuilder(strategy);
  } catch (err) {
    throw new SessionFailure(
      "configuration",
      `builder.strategy: cannot load '${strategy}': ${messageOf(err)}`,
    );
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
function stamp(
  t: Trajectory,
  status: TerminalStatus,
  error: SessionError | null,
  extra: Record<string, unknown>,
  override = false,
): Trajectory {
  const metadata = { ...t.metadata, ...extra };
  const message = (fallback: string) =>
    override ? (error?.message ?? fallback) : (t.error ?? error?.message ?? fallback);
  if (status === "TIMEOUT") return { ...t, metadata, status: "TIMEOUT", error: message("timeout") };
  if (status !== "COMPLETED")
    return { ...t, metadata, status: "ERROR", error: message(status.toLowerCase()) };
  return { ...t, metadata };
}

/** Starts and prepares a fresh eval runtime (`eval_prepare`, or `prepare` when null). */
async function prewarmEvalRuntime(
  spec: RuntimeSpec,
  ctx: RuntimeContext,
  signal: AbortSignal,
): Promise<Runtime> {
  let rt = await createRuntime(spec, ctx);
  try {
    rt = storageBounded(rt, spec);
    await rt.start(signal);
    await runPrepare(
      rt,
      spec.eval_prepare ?? spec.prepare,
      { ...rt.baseEnv(), ...spec.env },
      signal,
      "eval_prepare",
    );
    return rt;
  } catch (err) {
    await rt.teardown({ keep: false }).catch(() => {});
    throw new SessionFailure("infra", `eval runtime prewarm failed: ${messageOf(err)}`);
  }
}
