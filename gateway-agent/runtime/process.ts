/**
 * Running one host process for a runtime: own process group (so a kill reaches every
 * descendant), stdout/stderr appended to log files, optional capture, abort and timeout.
 *
 * @module
 */
import { constants, createWriteStream, type WriteStream } from "node:fs";
import path from "node:path";
import { execa } from "execa";
import { type CommandResult, MAX_CAPTURE_BYTES } from "./types";

/** Options of {@link runProcess}. */
export interface ProcessOptions {
  env: Record<string, string>;
  cwd?: string;
  signal?: AbortSignal;
  timeoutMs?: number;
  logsDir: string;
  logName: string;
  capture?: boolean;
  /** Extra cleanup when the process is killed (e.g. kill the tree inside a container). */
  onKill?: () => Promise<void> | void;
  /**
   * Variables written NUL-separated (`NAME=value\0`) to the child's fd 3, for a command that
   * takes its environment from there (a session user's, see `session-user.ts`).
   */
  envFd?: Record<string, string>;
}

/**
 * Sends SIGKILL to a whole process group.
 *
 * @example
 * ```ts
 * killGroup(child.pid);
 * ```
 */
export function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // ESRCH: the group is gone already, which is what we want.
  }
}

/** Append, create, and never follow a symlink (the session folder is the sandbox's to write). */
const LOG_FLAGS = constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW;

/**
 * A log file in a session's logs folder, opened without following a symlink someone planted at
 * its path: the gateway writes it on the host with its own rights. A log that cannot be opened
 * is dropped, the command still runs.
 */
function openLog(dir: string, name: string): WriteStream {
  const stream = createWriteStream(path.join(dir, name), { flags: LOG_FLAGS as unknown as string });
  stream.on("error", () => {});
  return stream;
}

/** The child's stdio: no stdin, piped output, and on fd 3 the environment to hand on, if any. */
function stdioOf(envFd: Record<string, string> | undefined) {
  if (!envFd) return ["ignore", "pipe", "pipe"] as const;
  const encoded = Object.entries(envFd)
    .map(([k, v]) => `${k}=${v}\0`)
    .join("");
  return ["ignore", "pipe", "pipe", new TextEncoder().encode(encoded)] as const;
}

/**
 * Ends the process group on the abort signal or the timeout, noting which one did; `dispose`
 * stops watching.
 */
function watchStop(pid: number | undefined, opts: ProcessOptions) {
  const state = { interrupted: false, timedOut: false };
  const kill = () => {
    killGroup(pid);
    void Promise.resolve(opts.onKill?.()).catch(() => {});
  };
  const onAbort = () => {
    state.interrupted = true;
    kill();
  };
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  const timer =
    opts.timeoutMs !== undefined
      ? setTimeout(() => {
          state.timedOut = true;
          kill();
        }, opts.timeoutMs)
      : undefined;
  const dispose = () => {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
  };
  return { state, dispose };
}

/**
 * Runs `argv` to completion; never throws for a non-zero exit.
 *
 * @example
 * ```ts
 * const r = await runProcess(["bash", "-lc", "make test"], { env, logsDir, logName: "eval", capture: true });
 * ```
 */
export async function runProcess(argv: string[], opts: ProcessOptions): Promise<CommandResult> {
  const started = Date.now();
  if (opts.signal?.aborted)
    return { exitCode: null, signal: "SIGKILL", interrupted: true, timedOut: false, durationMs: 0 };
  const [file, ...args] = argv as [string, ...string[]];
  const stdoutLog = openLog(opts.logsDir, `${opts.logName}.stdout.log`);
  const stderrLog = openLog(opts.logsDir, `${opts.logName}.stderr.log`);
  const child = execa(file, args, {
    cwd: opts.cwd,
    env: opts.env,
    extendEnv: false,
    // Own process group: killing -pid reaches every descendant (the agent's tools, servers, …).
    detached: true,
    cleanup: true,
    reject: false,
    buffer: false,
    stdio: stdioOf(opts.envFd),
  });
  const chunks: Buffer[] = [];
  let captured = 0;
  child.stdout?.on("data", (chunk: Buffer) => {
    stdoutLog.write(chunk);
    if (opts.capture && captured < MAX_CAPTURE_BYTES) {
      chunks.push(chunk);
      captured += chunk.length;
    }
  });
  child.stderr?.on("data", (chunk: Buffer) => stderrLog.write(chunk));
  const pid = child.pid;
  const stop = watchStop(pid, opts);
  const cannotRun = (why: string): CommandResult => {
    stderrLog.write(`polar: could not run ${file}: ${why}\n`);
    const { interrupted, timedOut } = stop.state;
    return { exitCode: 127, signal: null, interrupted, timedOut, durationMs: Date.now() - started };
  };
  try {
    const result = await child;
    // The process never started (E2BIG, ENOENT, …): say why in the log.
    if (result.exitCode === undefined && !result.signal) return cannotRun(String(result.message));
    return {
      exitCode: result.exitCode ?? null,
      signal: result.signal ?? null,
      ...stop.state,
      durationMs: Date.now() - started,
      ...(opts.capture ? { stdout: Buffer.concat(chunks).toString("utf8") } : {}),
    };
  } catch (err) {
    // Spawn failures (ENOENT, …) end up here with reject: false only for exits; be explicit.
    return cannotRun(err instanceof Error ? err.message : String(err));
  } finally {
    stop.dispose();
    // Background children the command left behind must not outlive it.
    killGroup(pid);
    await Promise.all([new Promise((r) => stdoutLog.end(r)), new Promise((r) => stderrLog.end(r))]);
  }
}
