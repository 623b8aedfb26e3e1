/**
 * The evaluator contract (upstream `evaluate(trajectory, **runtime) -> EvalResult`).
 *
 * @module
 */
import type { SessionAssignment, Trajectory } from "../../protocol";
import type { AgentRunResult } from "../harness/plan";
import type { Runtime } from "../runtime/types";

/** What an evaluator sees. */
export interface EvalContext {
  session: SessionAssignment;
  trajectory: Trajectory;
  /** `evaluator.config`. */
  config: Record<string, unknown>;
  /** `evaluator.env`: added to every evaluation command. */
  env: Record<string, string>;
  /** The agent's live runtime (null when it never started). */
  runtime: Runtime | null;
  /** A fresh runtime for grading (when `refresh_runtime`), prepared with `eval_prepare`. */
  evalRuntime: Runtime | null;
  /** How the harness ended (null when it never ran). */
  agentResult: AgentRunResult | null;
  /** What is left of the session budget (ms). */
  timeoutMs: number;
  signal: AbortSignal;
}

/** Upstream `EvalResult`: an outcome reward, optional per-trace rewards, and a report. */
export interface EvalResult {
  outcome_reward: number | null;
  /** One reward per trace; when given it must match the trace count (else the session is ERROR). */
  trace_rewards?: number[];
  metadata: Record<string, unknown>;
}

/** An evaluator. */
export type Evaluator = (ctx: EvalContext) => Promise<EvalResult>;
