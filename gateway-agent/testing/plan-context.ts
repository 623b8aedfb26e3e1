/**
 * A fixed plan context for harness tests: one session of `harness` with the given `agent` fields,
 * a proxy on 127.0.0.1:4100, the session key `sk-polar-0123`, the session folder `/polar/session`.
 * Test-only.
 *
 * @module
 */
import { SessionAssignment } from "../../protocol";
import type { PlanContext } from "../harness/plan";

/**
 * The plan context of a session of `harness`; `agent` adds to its `AgentSpec`.
 *
 * @example
 * ```ts
 * const plan = PRESETS.pi(planContextFor("pi", { settings: { install: false } }));
 * ```
 */
export function planContextFor(harness: string, agent: Record<string, unknown> = {}): PlanContext {
  const session = SessionAssignment.parse({
    session_id: "b.t.0",
    batch_id: "b",
    task_id: "t",
    attempt: 1,
    instruction: 'Fix the bug; it\'s in `calc.py` & "quoted"',
    timeout_seconds: 60,
    runtime: null,
    agent: { harness, ...agent },
    builder: { strategy: "per_request" },
    evaluator: null,
    metadata: {},
    dispatch_priority: 0,
  });
  return {
    session,
    model: "Qwen/Qwen3-8B",
    proxyUrl: "http://127.0.0.1:4100",
    sessionKey: "sk-polar-0123",
    sessionPath: "/polar/session",
    workdir: "/testbed",
  };
}
