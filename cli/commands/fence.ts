/**
 * A queue's fence from the command line (trainer token): `polar pause [--queue Q] [--mode
 * drain|abort] [--timeout-seconds S]`, `polar resume [--queue Q] [--policy-version V]`,
 * `polar policy-version V [--queue Q]`. Each change is stored durably by the control plane before
 * any gateway hears of it; the answer lists each connected gateway's acknowledgement, and the
 * command exits 1 when not every gateway acknowledged (the change stays stored).
 *
 * @module
 */
import type { FenceChangeResponse } from "../../protocol";
import { table } from "../report";
import { type ConnectionOptions, connect, printJson } from "./connection";

export interface FenceOptions extends ConnectionOptions {
  queue: string;
}

export interface PauseOptions extends FenceOptions {
  mode?: "drain" | "abort";
  timeoutSeconds?: number;
}

export interface ResumeOptions extends FenceOptions {
  policyVersion?: string;
}

/** Prints the fence after a change and each gateway's ack; sets exit code 1 unless all acked. */
function report(answer: FenceChangeResponse, json: boolean): void {
  if (!answer.ok) process.exitCode = 1;
  if (json) {
    printJson(answer);
    return;
  }
  const f = answer.fence;
  const state = f.paused ? `paused (${f.mode ?? "drain"})` : "open";
  console.log(
    `queue ${answer.queue}: ${state}, policy_version ${f.policy_version ?? "-"}, fence_seq ${f.fence_seq}`,
  );
  if (answer.nodes.length === 0) console.log("no gateway connected: each one applies it when it connects");
  else
    console.log(
      table(
        ["node", "ack", "paused", "inflight", "policy_version", "error"],
        answer.nodes.map((n) => [
          n.node_id,
          n.ok ? "ok" : "FAILED",
          String(n.paused),
          n.inflight,
          n.policy_version ?? "-",
          n.error ?? "",
        ]),
      ),
    );
}

/** `polar pause`. */
export async function runPause(opts: PauseOptions): Promise<void> {
  const answer = await connect(opts, "trainer").pause(opts.queue, {
    ...(opts.mode === undefined ? {} : { mode: opts.mode }),
    ...(opts.timeoutSeconds === undefined ? {} : { timeout_seconds: opts.timeoutSeconds }),
  });
  report(answer, opts.json);
}

/** `polar resume`. */
export async function runResume(opts: ResumeOptions): Promise<void> {
  report(await connect(opts, "trainer").resume(opts.queue, opts.policyVersion), opts.json);
}

/** `polar policy-version VERSION`. */
export async function runPolicyVersion(version: string, opts: FenceOptions): Promise<void> {
  report(await connect(opts, "trainer").policyVersion(opts.queue, version), opts.json);
}
