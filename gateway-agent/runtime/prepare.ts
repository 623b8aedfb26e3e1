/**
 * Prepare actions (upstream `PrepareAction`): uploads and commands run in order when a runtime
 * starts, each retried up to its `max_attempts`.
 *
 * @module
 */
import path from "node:path";
import type { PrepareAction } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";
import type { Runtime } from "./types";

/**
 * Runs `actions` in order. Throws a {@link SessionFailure} of kind `infra` naming the failing
 * action, or the signal's reason when aborted.
 *
 * @example
 * ```ts
 * await runPrepare(runtime, spec.prepare, { ...runtime.baseEnv(), ...spec.env }, signal, "prepare");
 * ```
 */
export async function runPrepare(
  runtime: Runtime,
  actions: readonly PrepareAction[],
  env: Record<string, string>,
  signal: AbortSignal | undefined,
  label = "prepare",
): Promise<void> {
  for (const [i, action] of actions.entries()) {
    let lastError = "";
    let done = false;
    for (let attempt = 1; attempt <= action.max_attempts && !done; attempt++) {
      if (signal?.aborted) throw signal.reason;
      try {
        if (action.type === "exec") {
          const r = await runtime.exec(action.command, {
            env: { ...env, ...action.env },
            cwd: action.cwd,
            signal,
            logName: `${label}-${i}`,
          });
          if (r.interrupted)
            throw signal?.reason ?? new SessionFailure("infra", `${label}[${i}] interrupted`);
          // A resource limit of the task stopped it: the same step would hit it again.
          if (r.limitHit)
            throw new SessionFailure("configuration", `runtime.${label}[${i}] (exec) stopped: ${r.limitHit}`);
          if (r.exitCode === 0) done = true;
          else
            lastError = `exited with ${r.exitCode === null ? `signal ${r.signal}` : `code ${r.exitCode}`} (log: ${path.join(runtime.logsDir, `${label}-${i}.stderr.log`)})`;
        } else {
          if (action.type === "upload_file") await runtime.uploadFile(action.source, action.target);
          else await runtime.uploadDir(action.source, action.target);
          done = true;
        }
      } catch (err) {
        if (signal?.aborted) throw signal.reason;
        if (err instanceof SessionFailure && err.kind === "configuration") throw err;
        lastError = messageOf(err);
      }
    }
    if (!done) {
      throw new SessionFailure(
        "infra",
        `runtime.${label}[${i}] (${action.type}) failed after ${action.max_attempts} attempt(s): ${lastError}`,
      );
    }
  }
}

/**
 * The host path of a path inside the sandbox's session folder (config files written on the host
 * appear in the sandbox through the session mount); null when it is outside that folder.
 *
 * @example
 * ```ts
 * hostPathOf(runtime, `${runtime.sessionPath}/home/.codex/config.toml`);
 * ```
 */
export function hostPathOf(runtime: Runtime, sandboxPath: string): string | null {
  const rel = path.posix.relative(runtime.sessionPath, sandboxPath);
  if (rel.startsWith("..") || path.posix.isAbsolute(rel)) return null;
  return path.join(runtime.hostDir, rel);
}
