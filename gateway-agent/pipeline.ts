import {
  isModulePath,
  type RuntimeSpec,
  type SessionAssignment,
  type SessionResult,
  type Trajectory,
} from "../protocol";
import type { PolicyVersionGap } from "../proxy";
import { getBuilder, loadBuilder, policyVersionGapMessage, type TrajectoryBuilder } from "../proxy";
import { messageOf, SessionFailure, SessionInterrupt } from "./errors";
import { resolveEvaluator } from "./evaluator";
import { type AgentRunResult, type PlanContext, resolveHarness, runHarnessPlan } from "./harness";
import { runPostRun } from "./post-run";
import { createRuntime, limitStorage, type Runtime, type RuntimeContext, runPrepare } from "./runtime";
import {
  classify,
  enter,
  hold,
  newState,
  now,
  type PipelineDeps,
  type PipelineOutcome,
  type PipelineSession,
  type Resolved,
  release,
  runtimeContext,
  type SessionState,
} from "./session-state";

export { EVAL_GRACE_AFTER_TIMEOUT_MS } from "./post-run";
export type { PipelineDeps, PipelineOutcome, PipelineSession } from "./session-state";

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
  return {
    result,
    records: st.records,
    runStartMs: st.runStartMs,
    keptLogs: st.keptLogs,
    logs: st.logs,
    tokens: st.tokens,
  };
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

/** INITIALIZING: arms the session budget, starts and prepares the runtime. Returns holding the INIT slot. */
async function runInit(st: SessionState): Promise<void> {
  const { a, signal, spec } = st;
  const initStart = now();
  st.timing.queued_ms = initStart - st.started;
  // The budget starts at INITIALIZING (as upstream): queueing on the gateway is free.
  armBudget(st, a.timeout_seconds * 1000);
  enter(st, "init");
  st.runtime = await createRuntime(spec, runtimeContext(st, a.session_id));
  st.runtime = storageBounded(st.runtime, spec);
  await st.runtime.start(signal);
  await runPrepare(st.runtime, spec.prepare, { ...st.runtime.baseEnv(), ...spec.env }, signal);
  st.timing.init_ms = now() - initStart;
}

/**
 * READY: the runtime is prepared; waits for a READY slot (the warm buffer never exceeds its
 * target: the INIT slot is given back only once one is held), then for a RUN slot.
 *
 * Both waits spend none of the budget: like the wait before INIT they are on the gateway's
 * capacity, not the task's work, and a budget spent there timed out sessions that never got to
 * run (the 2,000-session fault matrix, docs/reliability.md). The ledger pauses its deadline from
 * the READY report to the RUNNING one the same way (control-plane/batch/store.ts `markProgress`).
 */
async function runReady(st: SessionState): Promise<void> {
  const { signal } = st;
  const readyStart = now();
  enter(st, "ready");
  const left = pauseBudget(st);
  await hold(st, "READY", signal);
  release(st, "INITIALIZING");
  await hold(st, "RUNNING", signal);
  release(st, "READY");
  armBudget(st, left);
  st.timing.ready_ms = now() - readyStart;
}

/** Arms the session budget to run out `ms` from now (TIMEOUT in whatever stage it finds). */
function armBudget(st: SessionState, ms: number): void {
  const { a, s } = st;
  clearTimeout(st.budget);
  st.deadline = Date.now() + ms;
  st.budget = setTimeout(() => {
    s.abort.abort(
      new SessionInterrupt("timeout", `timeout_seconds (${a.timeout_seconds} s) exceeded in ${s.stage}`, {
        timeout_source: "session",
        timeout_stage: s.stage,
      }),
    );
  }, ms);
}

/** Stops the budget's clock; returns the time it had left (ms). */
function pauseBudget(st: SessionState): number {
  clearTimeout(st.budget);
  st.budget = undefined;
  const left = Math.max(0, st.deadline - Date.now());
  st.deadline = Number.POSITIVE_INFINITY;
  return left;
}

/** RUNNING: opens the proxy session, prewarms the eval runtime, runs the harness plan. */
async function runRun(st: SessionState, resolved: Resolved): Promise<void> {
  const { a, deps, signal, spec } = st;
  const runGranted = now();
  enter(st, "setup");
  const agentAbort = new AbortController();
  // No replica reached the task's min_policy_version within the proxy's bound: the session is
  // over (a configuration error naming the gap, never retried nor graded); stop the harness now
  // rather than wait for it to give up on the error it got.
  const versionGap = (gap: PolicyVersionGap) =>
    new SessionFailure("configuration", policyVersionGapMessage(gap));
  const onPolicyVersionGap = (gap: PolicyVersionGap) => agentAbort.abort(versionGap(gap));
  // An engine failure the proxy's retries could not hide reached the harness: whatever the agent
  // does next answers no model, so the session is an infra failure (run again on a fresh runtime,
  // never scored); stop the harness now.
  const engineFailed = (failure: string) =>
    new SessionFailure("infra", `an engine failure reached the harness: ${failure}`);
  const onEngineFailure = (failure: string) => agentAbort.abort(engineFailed(failure));
  const { key } = deps.proxy.openSession(
    a.session_id,
    {
      task_id: a.task_id,
      batch_id: a.batch_id,
      // The proxy tallies bridge verdicts per harness × model by it.
      harness: harnessName(a),
      // The proxy holds each model call until a replica serves at least this policy version.
      ...(a.min_policy_version === undefined ? {} : { min_policy_version: a.min_policy_version }),
      // The proxy sends it as the engine priority of each call, where the engine schedules by one.
      ...(a.engine_priority === undefined ? {} : { engine_priority: a.engine_priority }),
      // The trainer's sampling policy: the proxy applies it over whatever the harness sends.
      ...(a.agent.sampling === undefined ? {} : { sampling: a.agent.sampling }),
    },
    { onPolicyVersionGap, onEngineFailure },
  );
  st.sessionOpen = true;
  if (a.evaluator?.refresh_runtime) {
    st.evalRuntime = prewarmEvalRuntime(spec, runtimeContext(st, `${a.session_id}-eval`), signal);
    // Awaited in POST_RUN; until then a failure must not count as an unhandled rejection.
    st.evalRuntime.catch(() => {});
  }
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
  // Whatever the harness made of the refused call (it may even exit 0), the gap decides.
  const gap = deps.proxy.policyVersionGap?.(a.session_id) ?? null;
  if (gap) throw versionGap(gap);
  const failure = deps.proxy.engineFailure?.(a.session_id) ?? null;
  if (failure) throw engineFailed(failure);
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
