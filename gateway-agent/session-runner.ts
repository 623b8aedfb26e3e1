/**
 * The staged pipeline of a gateway: admission by credit, then INIT → READY → RUN → POST_RUN per
 * session, each stage bounded by its own semaphore, and the results kept until acknowledged.
 *
 * @module
 */
import { performance } from "node:perf_hooks";
import {
  type AckMessage,
  type AdminMessage,
  type AssignMessage,
  type CancelMessage,
  type GatewayCapacity,
  type GatewayMessage,
  type GatewayStage,
  type LeaseRef,
  LIMITS,
  type ResultMessage,
  type SessionAssignment,
  type SessionError,
  type SessionResult,
  type SessionTiming,
  type StageMetrics,
  type TerminalStatus,
  type Trajectory,
  WIRE_VERSION,
} from "../protocol";
import { getBuilder, type RecordingProxy, type TrajectoryBuilder } from "../proxy";
import { type GatewayLogger, messageOf, SessionFailure, SessionInterrupt } from "./errors";
import { type Evaluator, resolveEvaluator } from "./evaluator";
import { baseEnv, type HarnessRunner, resolveHarness } from "./harness";
import { LocalRuntime } from "./runtime/local";
import { Semaphore } from "./semaphore";

/** What the runner needs from its gateway. */
export interface SessionRunnerOptions {
  nodeId: string;
  capacity: GatewayCapacity;
  workRoot: string;
  keepWorkspaces: boolean;
  /** Model name given to harnesses (`OPENAI_MODEL`) unless the task sets `agent.model_name`. */
  model: string;
  proxy: RecordingProxy;
  logger: GatewayLogger;
  /** Sends a message to the control plane; false when the socket is down (the message is dropped). */
  send(message: GatewayMessage): boolean;
}

/** Counters for `Gateway.stats()`. */
export interface RunnerStats {
  active: number;
  unackedResults: number;
  outstandingCredit: number;
  finished: number;
  draining: boolean;
  metrics: StageMetrics;
}

interface ActiveSession {
  leaseId: string;
  assignment: SessionAssignment;
  abort: AbortController;
  stage: GatewayStage | "QUEUED";
  done: Promise<void>;
}

const now = () => performance.now();

/**
 * Runs the sessions the control plane assigns, within the gateway's capacity.
 *
 * Credit: the gateway holds at most `max_init + max_run + max_postrun` sessions. `credit` granted
 * and not yet used plus sessions held never exceeds that total, so the control plane can never
 * push more work than the gateway has room for.
 *
 * @example
 * ```ts
 * const runner = new SessionRunner({ nodeId, capacity, workRoot, keepWorkspaces: false, model, proxy, logger, send });
 * connection.send(runner.hello(agentVersion, capabilities));
 * runner.handle(controlMessage); // assign / ack / cancel / admin
 * ```
 */
export class SessionRunner {
  private readonly active = new Map<string, ActiveSession>();
  private readonly unacked = new Map<string, ResultMessage>();
  private readonly initSlots: Semaphore;
  private readonly runSlots: Semaphore;
  private readonly postSlots: Semaphore;
  private outstandingCredit = 0;
  private draining = false;
  private finished = 0;

  constructor(private readonly opts: SessionRunnerOptions) {
    this.initSlots = new Semaphore(opts.capacity.max_init);
    this.runSlots = new Semaphore(opts.capacity.max_run);
    this.postSlots = new Semaphore(opts.capacity.max_postrun);
  }

  /** Sessions the gateway can hold at once. */
  get totalSlots(): number {
    const c = this.opts.capacity;
    return c.max_init + c.max_run + c.max_postrun;
  }

  /** Slots not taken by a held session. */
  get freeSlots(): number {
    return this.totalSlots - this.active.size;
  }

  /**
   * Credit for a (re)connect's `hello`: all free slots. It replaces whatever credit the control
   * plane had from an earlier connection, so the ledger restarts from it.
   */
  resetCreditForHello(): number {
    this.outstandingCredit = this.draining ? 0 : this.freeSlots;
    return this.outstandingCredit;
  }

  /**
   * Leases the gateway still holds: running sessions, and finished ones whose result is not
   * acknowledged yet (so the control plane does not requeue a session whose result is on its way).
   */
  heldLeases(): LeaseRef[] {
    const running = [...this.active.values()].map((s) => ({
      lease_id: s.leaseId,
      session_id: s.assignment.session_id,
    }));
    const finished = [...this.unacked.values()].map((m) => ({
      lease_id: m.lease_id,
      session_id: m.result.session_id,
    }));
    return [...running, ...finished];
  }

  /** Results sent but not acknowledged, oldest first (re-sent after a reconnect). */
  unackedResults(): ResultMessage[] {
    return [...this.unacked.values()];
  }

  /** Re-sends every unacknowledged result (after `welcome` on a new connection). */
  resendUnacked(): void {
    for (const message of this.unacked.values()) this.opts.send(message);
  }

  /** Sessions per stage, for `credit`/`progress` metrics and stats. */
  metrics(): StageMetrics {
    return {
      init_queue_depth: this.initSlots.waiting,
      init_inflight: this.initSlots.inUse,
      ready_depth: this.runSlots.waiting,
      run_inflight: this.runSlots.inUse,
      postrun_queue_depth: this.postSlots.waiting,
      postrun_inflight: this.postSlots.inUse,
    };
  }

  stats(): RunnerStats {
    return {
      active: this.active.size,
      unackedResults: this.unacked.size,
      outstandingCredit: this.outstandingCredit,
      finished: this.finished,
      draining: this.draining,
      metrics: this.metrics(),
    };
  }

  /** Dispatches one control message; never throws. */
  handle(message: AssignMessage | AckMessage | CancelMessage | AdminMessage): void {
    try {
      switch (message.type) {
        case "assign":
          this.onAssign(message);
          return;
        case "ack":
          if (!this.unacked.delete(message.lease_id)) {
            this.opts.logger.info("ack for a result not pending", { lease_id: message.lease_id });
          }
          return;
        case "cancel":
          this.onCancel(message);
          return;
        case "admin":
          this.onAdmin(message);
          return;
      }
    } catch (err) {
      this.opts.logger.error("control message handler failed", { type: message.type, error: messageOf(err) });
    }
  }

  /** Interrupts every session (as infra failures: they are retried elsewhere) and waits for them. */
  async shutdown(): Promise<void> {
    this.draining = true;
    for (const s of this.active.values()) {
      s.abort.abort(new SessionInterrupt("shutdown", "gateway is shutting down"));
    }
    await Promise.allSettled([...this.active.values()].map((s) => s.done));
  }

  private onAssign(message: AssignMessage): void {
    const { lease_id: leaseId, session } = message;
    if (this.active.has(leaseId) || this.unacked.has(leaseId)) {
      this.opts.logger.warn("duplicate assign ignored", {
        lease_id: leaseId,
        session_id: session.session_id,
      });
      return;
    }
    this.outstandingCredit = Math.max(0, this.outstandingCredit - 1);
    const clash = [...this.active.values()].find((s) => s.assignment.session_id === session.session_id);
    if (clash || this.freeSlots <= 0) {
      // Refuse as an infra failure so the control plane retries it elsewhere; hold nothing.
      const why = clash
        ? `session already runs on this gateway under lease ${clash.leaseId}`
        : `gateway is full (${this.totalSlots} sessions): assign exceeded granted credit`;
      this.opts.logger.warn("assign refused", { lease_id: leaseId, session_id: session.session_id, why });
      this.finish(leaseId, this.refusedResult(session, why));
      return;
    }
    const entry: ActiveSession = {
      leaseId,
      assignment: session,
      abort: new AbortController(),
      stage: "QUEUED",
      done: Promise.resolve(),
    };
    this.active.set(leaseId, entry);
    entry.done = this.execute(entry).catch((err: unknown) => {
      // execute() reports every failure as a result; reaching this is a bug, logged loudly.
      this.opts.logger.error("session pipeline crashed", {
        session_id: session.session_id,
        error: messageOf(err),
      });
    });
  }

  private onCancel(message: CancelMessage): void {
    const s = this.active.get(message.lease_id);
    if (!s) {
      this.opts.logger.info("cancel for a lease not held", { lease_id: message.lease_id });
      return;
    }
    s.abort.abort(new SessionInterrupt("cancelled", `cancelled by the control plane: ${message.reason}`));
  }

  private onAdmin(message: AdminMessage): void {
    if (message.action === "drain") {
      this.draining = true;
      this.opts.logger.info("draining: no more credit");
      return;
    }
    // pause/resume/policy_version act on the proxy's generation gate, which is a later issue.
    this.opts.logger.info("admin action not handled by this gateway yet", { action: message.action });
  }

  private progress(s: ActiveSession, status: GatewayStage): void {
    s.stage = status;
    this.opts.send({
      v: WIRE_VERSION,
      type: "progress",
      lease_id: s.leaseId,
      session_id: s.assignment.session_id,
      status,
      at: Date.now(),
      metrics: this.metrics(),
    });
  }

  /** One session end to end. Every failure becomes a result; nothing escapes. */
  private async execute(s: ActiveSession): Promise<void> {
    const a = s.assignment;
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
    let runtime: LocalRuntime | null = null;
    let builder: TrajectoryBuilder | null = null;
    let evaluator: Evaluator | null = null;
    let budget: NodeJS.Timeout | undefined;
    let sessionOpen = false;

    try {
      await this.initSlots.acquire(signal);
      const initStart = now();
      timing.queued_ms = initStart - started;
      // The time budget starts at INITIALIZING (as upstream): queueing on the gateway is free.
      budget = setTimeout(
        () => s.abort.abort(new SessionInterrupt("timeout", `timeout of ${a.timeout_seconds} s exceeded`)),
        a.timeout_seconds * 1000,
      );
      let harness: HarnessRunner;
      try {
        this.progress(s, "INITIALIZING");
        builder = getBuilderOrFail(a.builder.strategy);
        evaluator = resolveEvaluator(a.evaluator);
        harness = resolveHarness(a.agent);
        runtime = await LocalRuntime.create(this.opts.workRoot, a.session_id);
        await runtime.prepare(a.runtime?.prepare ?? [], { ...baseEnv(), ...(a.runtime?.env ?? {}) }, signal);
      } finally {
        this.initSlots.release();
        timing.init_ms = now() - initStart;
      }

      const readyStart = now();
      this.progress(s, "READY");
      await this.runSlots.acquire(signal);
      timing.ready_ms = now() - readyStart;
      const runStart = now();
      try {
        this.progress(s, "RUNNING");
        const { key } = this.opts.proxy.openSession(a.session_id, {
          task_id: a.task_id,
          batch_id: a.batch_id,
        });
        sessionOpen = true;
        const outcome = await harness({
          session: a,
          runtime,
          proxyUrl: this.opts.proxy.url,
          sessionKey: key,
          model: a.agent.model_name ?? this.opts.model,
          signal,
        });
        if (outcome.interrupted) throw signal.reason;
        if (outcome.exitCode !== 0) {
          const how =
            outcome.exitCode === null
              ? `was killed by ${outcome.signal}`
              : `exited with code ${outcome.exitCode}`;
          throw new SessionFailure("agent", `harness '${a.agent.harness}' ${how}`);
        }
      } finally {
        this.runSlots.release();
        timing.run_ms = now() - runStart;
      }
    } catch (err) {
      ({ status, error } = classify(err));
    } finally {
      clearTimeout(budget);
    }

    // POST_RUN: always, so a failed or interrupted session still tears down and reports.
    await this.postSlots.acquire();
    const postStart = now();
    let trajectory: Trajectory;
    let reward: number | null = null;
    try {
      this.progress(s, "POST_RUN");
      trajectory = this.buildTrajectory(s, builder, status, error);
      if (status === "COMPLETED" && trajectory.status !== "COMPLETED") {
        // The harness exited 0 but left nothing to train on (e.g. it never called the model):
        // an agent outcome, not an infra fault, so it is reported and not retried.
        status = "ERROR";
        error = { kind: "agent", message: `trajectory: ${trajectory.error ?? "not built"}` };
      }
      // Nothing to judge when the session never really ran (infra) or was called off.
      if (evaluator && error?.kind !== "infra" && status !== "CANCELLED") {
        try {
          reward = (await evaluator(trajectory, a.evaluator?.config ?? {})).reward;
          for (const trace of trajectory.traces) trace.reward = reward;
        } catch (err) {
          status = "ERROR";
          error = {
            kind: "infra",
            message: `evaluator '${a.evaluator?.strategy}' failed: ${messageOf(err)}`,
          };
        }
      }
    } finally {
      if (sessionOpen) this.opts.proxy.closeSession(a.session_id);
      await runtime?.teardown({ keep: this.opts.keepWorkspaces }).catch((err: unknown) => {
        this.opts.logger.warn("teardown failed", { session_id: a.session_id, error: messageOf(err) });
      });
      this.postSlots.release();
      timing.postrun_ms = now() - postStart;
    }
    timing.total_ms = now() - started;
    const result: SessionResult = {
      session_id: a.session_id,
      task_id: a.task_id,
      batch_id: a.batch_id,
      status,
      reward,
      trajectory,
      timing,
      node_id: this.opts.nodeId,
      attempt: a.attempt,
      error,
      metadata: a.metadata,
    };
    this.active.delete(s.leaseId);
    this.finish(s.leaseId, result);
  }

  /** Builds the trajectory from the proxy's records and stamps the session's outcome on it. */
  private buildTrajectory(
    s: ActiveSession,
    builder: TrajectoryBuilder | null,
    status: TerminalStatus,
    error: SessionError | null,
  ): Trajectory {
    const a = s.assignment;
    const records = this.opts.proxy.completions(a.session_id);
    const trajectory: Trajectory = builder
      ? builder(records, { session_id: a.session_id, task_id: a.task_id, config: a.builder.config })
      : {
          status: "ERROR",
          traces: [],
          metadata: { session_id: a.session_id, task_id: a.task_id },
          error: null,
        };
    if (status === "TIMEOUT") return { ...trajectory, status: "TIMEOUT", error: error?.message ?? "timeout" };
    if (status !== "COMPLETED")
      return { ...trajectory, status: "ERROR", error: error?.message ?? status.toLowerCase() };
    return trajectory;
  }

  private refusedResult(a: SessionAssignment, message: string): SessionResult {
    return {
      session_id: a.session_id,
      task_id: a.task_id,
      batch_id: a.batch_id,
      status: "ERROR",
      reward: null,
      trajectory: { status: "ERROR", traces: [], metadata: {}, error: message },
      timing: { queued_ms: 0, init_ms: 0, ready_ms: 0, run_ms: 0, postrun_ms: 0, total_ms: 0 },
      node_id: this.opts.nodeId,
      attempt: a.attempt,
      error: { kind: "infra", message },
      metadata: a.metadata,
    };
  }

  /** Queues the result until acked, sends it, and hands freed slots back as credit. */
  private finish(leaseId: string, result: SessionResult): void {
    let message: ResultMessage = { v: WIRE_VERSION, type: "result", lease_id: leaseId, result };
    const size = Buffer.byteLength(JSON.stringify(message));
    if (size > LIMITS.maxWireMessageBytes) {
      // The control plane would refuse it and we would re-send it forever: report why instead.
      const why = `result of ${size} bytes exceeds the wire limit of ${LIMITS.maxWireMessageBytes} bytes`;
      this.opts.logger.error("result too large", { session_id: result.session_id, size });
      message = {
        ...message,
        result: {
          ...result,
          status: "ERROR",
          trajectory: { ...result.trajectory, status: "ERROR", traces: [], error: why },
          error: { kind: "infra", message: why },
        },
      };
    }
    this.finished++;
    this.unacked.set(leaseId, message);
    this.opts.send(message);
    this.grantFreeSlots();
  }

  /** Grants credit for slots neither held nor already promised. */
  private grantFreeSlots(): void {
    if (this.draining) return;
    const grant = this.freeSlots - this.outstandingCredit;
    if (grant < 1) return;
    const sent = this.opts.send({ v: WIRE_VERSION, type: "credit", grant, metrics: this.metrics() });
    // Unsent credit is not promised: the next hello grants the free slots anyway.
    if (sent) this.outstandingCredit += grant;
  }
}

function getBuilderOrFail(strategy: string): TrajectoryBuilder {
  try {
    return getBuilder(strategy);
  } catch (err) {
    throw new SessionFailure("infra", `builder.strategy: ${messageOf(err)}`);
  }
}

/** Maps what ended a session early to its terminal status and error. */
function classify(err: unknown): { status: TerminalStatus; error: SessionError } {
  if (err instanceof SessionInterrupt) {
    if (err.reason === "timeout")
      return { status: "TIMEOUT", error: { kind: "timeout", message: err.message } };
    if (err.reason === "cancelled")
      return { status: "CANCELLED", error: { kind: "cancelled", message: err.message } };
    return { status: "ERROR", error: { kind: "infra", message: err.message } };
  }
  if (err instanceof SessionFailure)
    return { status: "ERROR", error: { kind: err.kind, message: err.message } };
  return { status: "ERROR", error: { kind: "infra", message: messageOf(err) } };
}
