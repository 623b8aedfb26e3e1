/**
 * One session through the stages: INIT (runtime start + prepare) → READY (warm, waiting for a
 * run slot) → RUN (harness; eval runtime prewarmed in the background when `refresh_runtime`) →
 * POST_RUN (trajectory from the proxy's records, evaluation, teardown). Every failure becomes a
 * result; nothing escapes.
 *
 * Shape: one `SessionState` per session, one function per stage over it (`queueForInit`,
 * `runInit`, `runReady`, `runRun`, `runPostRun`), stage changes through `enter` (the one place
 * that reports `progress`), and `finalise` as the one place the result and the trajectory's
 * gateway metadata are put together. A new stage is a step in `protocol/stage.ts`, a pool in
 * `StagePools` and a function here.
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
  type GatewayStage,
  isModulePath,
  type Logger,
  type RuntimeSpec,
  RuntimeSpec as RuntimeSpecSchema,
  type SessionAssignment,
  type SessionError,
  type SessionResult,
  type SessionTiming,
  type StageStep,
  stageOfStep,
  type TerminalStatus,
  type TimeoutInfo,
  type Trajectory,
} from "../protocol";
import { getBuilder, loadBuilder, type TrajectoryBuilder } from "../proxy";
import { type BuilderChoice, chooseBuilder } from "./builder-choice";
import { messageOf, SessionFailure, SessionInterrupt } from "./errors";
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
    /** Token mode: the session's turn verdict counts (null for chat engines); read before close. */
    bridgeVerdicts?(sessionId: string): Record<string, number> | null;
    /** Token mode: the session's turn flag counts (`reasoning_dropped`), as for `bridgeVerdicts`. */
    bridgeFlags?(sessionId: string): Record<string, number> | null;
  };
  logger: Logger;
  /** Preset availability on this host: a local session of a preset it cannot run fails at once. */
  harnesses?: Pick<HarnessAvailability, "require"> | null;
  /** Keeps the logs of failed sessions (null: they go with the session folder). */
  failedSessions?: FailedSessionKeeper | null;
  /** Stage change: sends `progress`, re-evaluates credit. */
  onStage(status: GatewayStage): void;
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
  /** Where the session is, for timeout classification (`timeout_stage`). */
  stage: StageStep;
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

/**
 * The name a session's token-bridge verdicts are tallied under: the preset, else the module path.
 *
 * @example
 * ```ts
 * harnessName(assignment); // "codex"
 * ```
 */
export function harnessName(a: SessionAssignment): string {
  return a.agent.harness ?? a.agent.import_path ?? "unknown";
}

/** How a session ends so far: its status, its error and, for a timeout, where and why. */
interface Verdict {
  status: TerminalStatus;
  error: SessionError | null;
  timeout: TimeoutInfo | null;
}

function classify(err: unknown): Verdict & { error: SessionError } {
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

/** What the task's configuration resolves to, checked while the session is queued for INIT. */
interface Resolved {
  builder: TrajectoryBuilder;
  evaluator: Evaluator | null;
  harness: Awaited<ReturnType<typeof resolveHarness>>;
  agentMs: number | null;
}

/**
 * Everything one session accumulates on its way through the stages. Each stage function reads
 * and fills it; nothing else holds per-session state.
 */
interface SessionState {
  readonly s: PipelineSession;
  readonly a: SessionAssignment;
  readonly deps: PipelineDeps;
  /** The session's own signal (budget, cancel, shutdown). */
  readonly signal: AbortSignal;
  readonly spec: RuntimeSpec;
  readonly builder: ReturnType<typeof chooseBuilder>;
  readonly started: number;
  readonly timing: SessionTiming;
  verdict: Verdict;
  /** Stages whose pool slot this session holds (INIT and READY overlap for a moment). */
  readonly held: Set<GatewayStage>;
  resolved: Partial<Resolved>;
  runtime: Runtime | null;
  evalRuntime: Promise<Runtime | null> | null;
  agentResult: AgentRunResult | null;
  /** The `timeout_seconds` timer, armed at INIT and cleared when POST_RUN is done. */
  budget: NodeJS.Timeout | undefined;
  /** When `timeout_seconds` runs out (epoch ms; infinite before INIT). */
  deadline: number;
  /** The proxy session is open (closed in POST_RUN). */
  sessionOpen: boolean;
  runStartMs: number | null;
  keptLogs: string | null;
  records: CompletionRecord[];
  reward: number | null;
  /** Token-mode tallies, read from the proxy just before it closes the session. */
  bridge: { verdicts: Record<string, number> | null; flags: Record<string, number> | null };
}

function newState(s: PipelineSession, deps: PipelineDeps): SessionState {
  const a = s.assignment;
  return {
    s,
    a,
    deps,
    signal: s.abort.signal,
    spec: a.runtime ?? deps.defaultRuntime ?? RuntimeSpecSchema.parse({}),
    builder: chooseBuilder(a.builder, deps.engine),
    started: now(),
    timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: 0 },
    verdict: { status: "COMPLETED", error: null, timeout: null },
    held: new Set(),
    resolved: {},
    runtime: null,
    evalRuntime: null,
    agentResult: null,
    budget: undefined,
    deadline: Number.POSITIVE_INFINITY,
    sessionOpen: false,
    runStartMs: null,
    keptLogs: null,
    records: [],
    reward: null,
    bridge: { verdicts: null, flags: null },
  };
}

/** Moves the session to `step`; a step of a new stage is reported (`progress`) once. */
function enter(st: SessionState, step: StageStep): void {
  const from = stageOfStep(st.s.stage);
  st.s.stage = step;
  const to = stageOfStep(step);
  if (to !== null && to !== from) st.deps.onStage(to);
}

/** Waits for a slot of `stage`'s pool and records it as held. */
async function hold(st: SessionState, stage: GatewayStage, signal?: AbortSignal): Promise<void> {
  await st.deps.pools.of(stage).acquire(signal);
  st.held.add(stage);
}

/** Gives back a held slot of `stage`'s pool. */
function release(st: SessionState, stage: GatewayStage): void {
  if (st.held.delete(stage)) st.deps.pools.of(stage).release();
}

function runtimeContext(st: SessionState, name: string): RuntimeContext {
  const { deps, a } = st;
  return {
    workRoot: deps.workRoot,
    name,
    session_id: a.session_id,
    node_id: deps.nodeId,
    proxyUrl: deps.proxy.url,
    settings: deps.runtimeSettings,
    warn: (m, f) => deps.logger.warn(m, { session_id: a.session_id, ...f }),
  };
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
  const st = newState(s, deps);
  try {
    const resolved = await queueForInit(st);
    try {
      await runInit(st);
      await runReady(st);
      await runRun(st, resolved);
    } finally {
      for (const stage of [...st.held]) release(st, stage);
    }
  } catch (err) {
    st.verdict = classify(err);
  }
  // POST_RUN: always, so a failed, timed out or cancelled session still tears down and reports.
  const trajectory = await runPostRun(st);
  const result = finalise(st, trajectory);
  if (st.keptLogs) await deps.failedSessions?.writeSummary(st.keptLogs, result);
  return { result, records: st.records, runStartMs: st.runStartMs, keptLogs: st.keptLogs };
}

/**
 * Queued: joins the INIT queue at once (synchronously: credit accounting counts queued sessions),
 * then checks the task's configuration while queued. A task that cannot run here (a module path
 * that does not load, a harness this host lacks) fails at once, without waiting for an INIT slot
 * or spending any of its budget. Returns holding the INIT slot.
 */
async function queueForInit(st: SessionState): Promise<Resolved> {
  const { a, deps, signal } = st;
  const pool = deps.pools.of("INITIALIZING");
  st.s.stage = "queued";
  const leaveQueue = new AbortController();
  const slot = pool.acquire(AbortSignal.any([signal, leaveQueue.signal]), a.dispatch_priority);
  slot.catch(() => {}); // awaited below; a cancel meanwhile must not count as unhandled
  let resolved: Resolved;
  try {
    const builder = await resolveBuilder(st.builder.spec.strategy);
    st.resolved.builder = builder;
    const agentMs = agentTimeoutMs(a.metadata);
    const evaluator = await resolveEvaluator(a.evaluator);
    st.resolved.evaluator = evaluator;
    const harness = await resolveHarness(a.agent);
    deps.harnesses?.require(a.agent, st.spec, deps.nodeId);
    resolved = { builder, evaluator, harness, agentMs };
  } catch (err) {
    leaveQueue.abort(err);
    // Granted before the abort: give the slot back.
    await slot.then(
      () => pool.release(),
      () => {},
    );
    throw err;
  }
  await slot;
  st.held.add("INITIALIZING");
  return resolved;
}

/** INITIALIZING: arms the session budget, starts and prepares the runtime, takes a READY slot. */
async function runInit(st: SessionState): Promise<void> {
  const { a, s, signal, spec } = st;
  const initStart = now();
  st.timing.queued_ms = initStart - st.started;
  // The budget starts at INITIALIZING (as upstream): queueing on the gateway is free.
  st.deadline = Date.now() + a.timeout_seconds * 1000;
  st.budget = setTimeout(() => {
    s.abort.abort(
      new SessionInterrupt("timeout", `timeout_seconds (${a.timeout_seconds} s) exceeded in ${s.stage}`, {
        timeout_source: "session",
        timeout_stage: s.stage,
      }),
    );
  }, a.timeout_seconds * 1000);
  enter(st, "init");
  st.runtime = await createRuntime(spec, runtimeContext(st, a.session_id));
  st.runtime = storageBounded(st.runtime, spec);
  await st.runtime.start(signal);
  await runPrepare(st.runtime, spec.prepare, { ...st.runtime.baseEnv(), ...spec.env }, signal);
  // READY never exceeds its target: take a READY slot before giving INIT back.
  await hold(st, "READY", signal);
  release(st, "INITIALIZING");
  st.timing.init_ms = now() - initStart;
}

/** READY: the warm buffer; waits for a RUN slot. */
async function runReady(st: SessionState): Promise<void> {
  const readyStart = now();
  enter(st, "ready");
  await hold(st, "RUNNING", st.signal);
  release(st, "READY");
  st.timing.ready_ms = now() - readyStart;
}

/** RUNNING: opens the proxy session, prewarms the eval runtime, runs the harness plan. */
async function runRun(st: SessionState, resolved: Resolved): Promise<void> {
  const { a, deps, signal, spec } = st;
  const runGranted = now();
  enter(st, "setup");
  const { key } = deps.proxy.openSession(a.session_id, {
    task_id: a.task_id,
    batch_id: a.batch_id,
    // The proxy tallies bridge verdicts per harness × model by it.
    harness: harnessName(a),
    // The proxy holds each model call until a replica serves at least this policy version.
    ...(a.min_policy_version === undefined ? {} : { min_policy_version: a.min_policy_version }),
  });
  st.sessionOpen = true;
  if (a.evaluator?.refresh_runtime) {
    st.evalRuntime = prewarmEvalRuntime(spec, runtimeContext(st, `${a.session_id}-eval`), signal);
    // Awaited in POST_RUN; until then a failure must not count as an unhandled rejection.
    st.evalRuntime.catch(() => {});
  }
  const agentAbort = new AbortController();
  const { agentMs } = resolved;
  const agentTimer =
    agentMs === null
      ? undefined
      : setTimeout(() => {
          agentAbort.abort(
            new SessionInterrupt(
              "timeout",
              `metadata.agent_timeout (${agentMs / 1000} s) exceeded in ${st.s.stage}`,
              { timeout_source: "agent", timeout_stage: st.s.stage },
            ),
          );
        }, agentMs);
  const agentSignal = AbortSignal.any([signal, agentAbort.signal]);
  const runtime = st.runtime as Runtime;
  const ctx: PlanContext = {
    session: a,
    model: a.agent.model_name ?? deps.model,
    proxyUrl: deps.proxy.url,
    sessionKey: key,
    sessionPath: runtime.sessionPath,
    workdir: runtime.workdir,
  };
  const plan = resolved.harness(ctx);
  let agentResult: AgentRunResult;
  try {
    agentResult = await runHarnessPlan({
      runtime,
      ctx,
      plan,
      signal: agentSignal,
      postSignal: signal,
      onStage: (step) => {
        enter(st, step);
        if (step === "exec" && st.runStartMs === null) st.runStartMs = now() - runGranted;
      },
    });
    st.agentResult = agentResult;
  } finally {
    clearTimeout(agentTimer);
    st.timing.run_ms = now() - runGranted;
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
}

/**
 * POST_RUN: the trajectory from the proxy's records, grading, then teardown (always, whatever
 * happened before). Returns the graded trajectory, not yet finalised.
 */
async function runPostRun(st: SessionState): Promise<Trajectory> {
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
    return trajectory;
  } finally {
    await closeAndTearDown(st);
    release(st, "POST_RUN");
    st.timing.postrun_ms = now() - postStart;
  }
}

/**
 * Judge what really ran: not infra or configuration failures (never scored) or cancels. A
 * timed-out session's partial work is graded too, within what is left of its budget or a grace.
 */
function shouldGrade(st: SessionState): boolean {
  const { error, status } = st.verdict;
  return Boolean(
    st.resolved.evaluator &&
      st.a.evaluator &&
      st.runtime &&
      error?.kind !== "infra" &&
      error?.kind !== "configuration" &&
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
 * The one place a session's result is put together: the gateway's metadata on the trajectory
 * (node, timeout classification, harness outcome, kept logs, timing, token-mode tallies).
 */
function finalise(st: SessionState, t: Trajectory): SessionResult {
  const { a, deps, verdict, bridge } = st;
  st.timing.total_ms = now() - st.started;
  const trajectory: Trajectory = {
    ...t,
    metadata: {
      ...t.metadata,
      node_id: deps.nodeId,
      ...(verdict.timeout ?? {}),
      ...(st.agentResult ? { agent_result: st.agentResult } : {}),
      ...(st.keptLogs ? { kept_logs: st.keptLogs } : {}),
      gateway_timing: { run_start_ms: st.runStartMs },
      ...(bridge.verdicts ? { bridge_verdicts: bridge.verdicts } : {}),
      ...(bridge.verdicts && bridge.flags ? { bridge_flags: bridge.flags } : {}),
    },
  };
  return {
    session_id: a.session_id,
    task_id: a.task_id,
    batch_id: a.batch_id,
    status: verdict.status,
    reward: st.reward,
    trajectory,
    timing: st.timing,
    node_id: deps.nodeId,
    attempt: a.attempt,
    error: verdict.error,
    metadata: a.metadata,
  };
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
function stamp(t: Trajectory, verdict: Verdict, override = false): Trajectory {
  const { status, error } = verdict;
  const message = (fallback: string) =>
    override ? (error?.message ?? fallback) : (t.error ?? error?.message ?? fallback);
  if (status === "TIMEOUT") return { ...t, status: "TIMEOUT", error: message("timeout") };
  if (status !== "COMPLETED") return { ...t, status: "ERROR", error: message(status.toLowerCase()) };
  return t;
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
