/**
 * The stages a gateway takes a session through, in one vocabulary: the `progress` status on the
 * wire, the gateway's stage pools (one per stage) and the `timeout_stage` a timeout reports are
 * all named from here.
 *
 * A stage is coarse (`INITIALIZING → READY → RUNNING → POST_RUN`, what the control plane sees);
 * a step is where a session is inside its stage (upstream's `timeout_stage` names). Before its
 * first stage a session is `queued` for an INIT slot, which is free: its budget has not started.
 *
 * @module
 */
import { z } from "zod";

/**
 * States a gateway may report while a session is in its hands, in order.
 *
 * @example
 * ```ts
 * GatewayStage.parse("READY"); // "READY"
 * ```
 */
export const GatewayStage = z.enum(["INITIALIZING", "READY", "RUNNING", "POST_RUN"]);
export type GatewayStage = z.infer<typeof GatewayStage>;

/**
 * The steps of each stage, in the order a session goes through them: runtime start and prepare
 * (`init`), the warm buffer (`ready`), the harness's `setup`, `exec` and `postprocess`, then
 * building the trajectory (`postrun`) and grading (`evaluate`).
 *
 * @example
 * ```ts
 * STAGE_STEPS.RUNNING; // ["setup", "exec", "postprocess"]
 * ```
 */
export const STAGE_STEPS = {
  INITIALIZING: ["init"],
  READY: ["ready"],
  RUNNING: ["setup", "exec", "postprocess"],
  POST_RUN: ["postrun", "evaluate"],
} as const satisfies Record<GatewayStage, readonly string[]>;

/** The steps of one stage. */
export type StepOf<S extends GatewayStage> = (typeof STAGE_STEPS)[S][number];

/** Where a session is on a gateway: `queued` for INIT, or a step of one {@link GatewayStage}. */
export type StageStep = "queued" | StepOf<GatewayStage>;

/**
 * The stage a step belongs to (null for `queued`: no stage yet).
 *
 * @example
 * ```ts
 * stageOfStep("exec");   // "RUNNING"
 * stageOfStep("queued"); // null
 * ```
 */
export function stageOfStep(step: StageStep): GatewayStage | null {
  for (const stage of GatewayStage.options) {
    if ((STAGE_STEPS[stage] as readonly string[]).includes(step)) return stage;
  }
  return null;
}

/**
 * Upstream's timeout classification, stamped on a timed-out session's trajectory metadata:
 * `timeout_source` is the budget that ran out (`session` = `timeout_seconds` from INIT, `agent` =
 * `metadata.agent_timeout` from RUN, `evaluator` = the grading time), `timeout_stage` the step
 * the session was in.
 *
 * @example
 * ```ts
 * const t: TimeoutInfo = { timeout_source: "agent", timeout_stage: "exec" };
 * ```
 */
export interface TimeoutInfo {
  timeout_source: "session" | "agent" | "evaluator";
  timeout_stage: StageStep;
}
