/**
 * Helpers shared by the gateway's tests: a harness script that makes one chat call through the
 * proxy, and an `assign` message builder. Test-only.
 *
 * @module
 */
import { AssignMessage, type GatewayMessage, type ResultMessage, WIRE_VERSION } from "../../protocol";

/** One chat call with the instruction (argv[1]) through the proxy; prints the answer. */
export const ASK_SCRIPT = `
const res = await fetch(process.env.OPENAI_BASE_URL + "/chat/completions", {
  method: "POST",
  headers: { authorization: "Bearer " + process.env.OPENAI_API_KEY, "content-type": "application/json" },
  body: JSON.stringify({ model: process.env.OPENAI_MODEL, messages: [{ role: "user", content: process.argv[1] }] }),
});
const text = await res.text();
if (!res.ok) { console.error(res.status, text); process.exit(2); }
console.log(JSON.parse(text).choices[0].message.content);
`;
/** Shell command running {@link ASK_SCRIPT} with the instruction. */
export const ASK = `node --input-type=module -e "$ASK_SCRIPT" -- {{INSTRUCTION}}`;

let counter = 0;

/** Options of {@link makeAssign}. */
export interface AssignOptions {
  command: string;
  instruction?: string;
  timeoutSeconds?: number;
  env?: Record<string, string>;
  agent?: Record<string, unknown>;
  evaluator?: Record<string, unknown> | null;
  runtime?: Record<string, unknown> | null;
  metadata?: Record<string, unknown>;
  priority?: number;
  prefix?: string;
}

/**
 * An `assign` for a shell session (fresh lease and session id each call).
 *
 * @example
 * ```ts
 * cp.send(makeAssign({ command: ASK }));
 * ```
 */
export function makeAssign(o: AssignOptions): AssignMessage {
  const n = ++counter;
  const prefix = o.prefix ?? "fx";
  return AssignMessage.parse({
    v: WIRE_VERSION,
    type: "assign",
    lease_id: `${prefix}-lease-${n}`,
    session: {
      session_id: `${prefix}.t1.${n}`,
      batch_id: prefix,
      task_id: "t1",
      attempt: 1,
      instruction: o.instruction ?? "What is 2 + 2?",
      timeout_seconds: o.timeoutSeconds ?? 60,
      runtime: o.runtime ?? null,
      agent: o.agent ?? {
        harness: "shell",
        custom_shell: { command: o.command, env: { ASK_SCRIPT, ...(o.env ?? {}) } },
      },
      builder: { strategy: "per_request" },
      evaluator: o.evaluator === undefined ? { strategy: "session_completed" } : o.evaluator,
      metadata: { row: n, ...(o.metadata ?? {}) },
      dispatch_priority: o.priority ?? 0,
    },
  });
}

/** Predicate: the result of `leaseId`. */
export const isResultOf =
  (leaseId: string) =>
  (m: GatewayMessage): m is ResultMessage =>
    m.type === "result" && m.lease_id === leaseId;
