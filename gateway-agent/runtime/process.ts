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
    // fd 3: the environment to hand on there, when there is one.
    stdio: opts.envFd
      ? [
          "ignore",
          "pipe",
          "pipe",
          new TextEncoder().encode(
            Object.entries(opts.envFd)
              .map(([k, v]) => `${k}=${v}\0`)
              .join(""),
          ),
        ]
      : ["ignore", "pipe", "pipe"],
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
  let interrupted = false;
  let timedOut = false;
  const kill = () => {
    killGroup(pid);
    void Promise.resolve(opts.onKill?.()).catch(() => {});
  };
  const onAbort = () => {
    interrupted = true;
    kill();
  };
  opts.signal?.addEventListener("abort", onAbort, { once: true });
  const timer =
    opts.timeoutMs !== undefined
      ? setTimeout(() => {
          timedOut = true;
          kill();
        }, opts.timeoutMs)
      : undefined;
  try {
    const result = await child;
    if (result.exitCode === undefined && !result.signal) {
      // The process never started (E2BIG, ENOENT, …): say why in the log.
      stderrLog.write(`polar: could not run ${file}: ${result.message}\n`);
      return { exitCode: 127, signal: null, interrupted, timedOut, durationMs: Date.now() - started };
    }
    return {
      exitCode: result.exitCode ?? null,
      signal: result.signal ?? null,
      interrupted,
      timedOut,
      durationMs: Date.now() - started,
      ...(opts.capture ? { stdout: Buffer.concat(chunks).toString("utf8") } : {}),
    };
  } catch (err) {
    // Spawn failures (ENOENT, …) end up here with reject: false only for exits; be explicit.
    const message = err instanceof Error ? err.message : String(err);
    stderrLog.write(`polar: could not run ${file}: ${message}\n`);
    return { exitCode: 127, signal: null, interrupted, timedOut, durationMs: Date.now() - started };
  } finally {
    clearTimeout(timer);
    opts.signal?.removeEventListener("abort", onAbort);
    // Background children the command left behind must not outlive it.
    killGroup(pid);
    await Promise.all([new Promise((r) => stdoutLog.end(r)), new Promise((r) => stderrLog.end(r))]);
  }
}
