/**
 * The `local` runtime: a fresh folder per session on the gateway host. Commands run with
 * `bash -lc` in their own process group, so a timeout or cancel kills the whole tree, and write
 * stdout/stderr to log files next to the workspace.
 *
 * Layout: `<workRoot>/<session_id>/workspace` (the harness's cwd) and `<workRoot>/<session_id>/logs`.
 *
 * @module
 */
import { cp, mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { execa } from "execa";
import type { PrepareAction } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";

/** How a command ended. */
export interface CommandResult {
  /** Exit code, or null when killed by a signal. */
  exitCode: number | null;
  signal: string | null;
  /** True when the command was killed because the session's signal aborted. */
  interrupted: boolean;
  durationMs: number;
}

/** Options of {@link LocalRuntime.exec}. */
export interface ExecOptions {
  /** Full child environment (nothing is inherited from the gateway process). */
  env: Record<string, string>;
  /** Working directory, relative to the workspace (default: the workspace). */
  cwd?: string;
  /** Aborting kills the command's whole process group. */
  signal?: AbortSignal;
  /** Base name of the log files (`<logName>.stdout.log`, `<logName>.stderr.log`). */
  logName: string;
}

function killGroup(pid: number | undefined): void {
  if (pid === undefined) return;
  try {
    process.kill(-pid, "SIGKILL");
  } catch {
    // ESRCH: the group is gone already, which is what we want.
  }
}

/**
 * A session's local workspace.
 *
 * @example
 * ```ts
 * const rt = await LocalRuntime.create("/var/polar", "b1.t1.0");
 * await rt.prepare([{ type: "exec", command: "git init", env: {}, max_attempts: 1 }], env, signal);
 * const r = await rt.exec("node agent.js", { env, signal, logName: "harness" });
 * await rt.teardown({ keep: false });
 * ```
 */
export class LocalRuntime {
  private readonly groups = new Set<number>();

  private constructor(
    readonly sessionDir: string,
    readonly workspace: string,
    readonly logsDir: string,
  ) {}

  /** Creates `<workRoot>/<sessionId>/{workspace,logs}`; a leftover folder of the same id is replaced. */
  static async create(workRoot: string, sessionId: string): Promise<LocalRuntime> {
    const sessionDir = path.resolve(workRoot, sessionId);
    if (path.dirname(sessionDir) !== path.resolve(workRoot)) {
      throw new SessionFailure("infra", `session id '${sessionId}' is not a plain folder name`);
    }
    await rm(sessionDir, { recursive: true, force: true });
    const workspace = path.join(sessionDir, "workspace");
    const logsDir = path.join(sessionDir, "logs");
    await mkdir(workspace, { recursive: true });
    await mkdir(logsDir, { recursive: true });
    return new LocalRuntime(sessionDir, workspace, logsDir);
  }

  /** Resolves `target` inside the workspace; refuses anything that escapes it. */
  resolveInWorkspace(target: string, field: string): string {
    const resolved = path.resolve(this.workspace, target);
    const rel = path.relative(this.workspace, resolved);
    if (rel.startsWith("..") || path.isAbsolute(rel)) {
      throw new SessionFailure("infra", `${field}: '${target}' escapes the workspace`);
    }
    return resolved;
  }

  /** Runs one command with `bash -lc` in its own process group. Never throws for a non-zero exit. */
  async exec(command: string, opts: ExecOptions): Promise<CommandResult> {
    const cwd = opts.cwd ? this.resolveInWorkspace(opts.cwd, "cwd") : this.workspace;
    const started = Date.now();
    if (opts.signal?.aborted) return { exitCode: null, signal: "SIGKILL", interrupted: true, durationMs: 0 };
    const child = execa("bash", ["-lc", command], {
      cwd,
      env: opts.env,
      extendEnv: false,
      // Own process group: killing -pid reaches every descendant (the agent's tools, servers, …).
      detached: true,
      cleanup: true,
      reject: false,
      stdin: "ignore",
      stdout: { file: path.join(this.logsDir, `${opts.logName}.stdout.log`), append: true },
      stderr: { file: path.join(this.logsDir, `${opts.logName}.stderr.log`), append: true },
    });
    const pid = child.pid;
    if (pid !== undefined) this.groups.add(pid);
    let interrupted = false;
    const onAbort = () => {
      interrupted = true;
      killGroup(pid);
    };
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const result = await child;
      return {
        exitCode: result.exitCode ?? null,
        signal: result.signal ?? null,
        interrupted,
        durationMs: Date.now() - started,
      };
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      // Background children the command left behind must not outlive it.
      killGroup(pid);
      if (pid !== undefined) this.groups.delete(pid);
    }
  }

  /** Copies a host file into the workspace. */
  async uploadFile(source: string, target: string): Promise<void> {
    const dest = this.resolveInWorkspace(target, "target");
    const info = await stat(source).catch(() => null);
    if (!info?.isFile()) throw new SessionFailure("infra", `upload_file: source '${source}' is not a file`);
    await mkdir(path.dirname(dest), { recursive: true });
    await cp(source, dest);
  }

  /** Copies a host folder into the workspace. */
  async uploadDir(source: string, target: string): Promise<void> {
    const dest = this.resolveInWorkspace(target, "target");
    const info = await stat(source).catch(() => null);
    if (!info?.isDirectory())
      throw new SessionFailure("infra", `upload_dir: source '${source}' is not a folder`);
    await cp(source, dest, { recursive: true });
  }

  /**
   * Runs the prepare actions in order, each up to its `max_attempts`. Throws a
   * {@link SessionFailure} of kind `infra` naming the failing action.
   */
  async prepare(
    actions: readonly PrepareAction[],
    env: Record<string, string>,
    signal?: AbortSignal,
  ): Promise<void> {
    for (const [i, action] of actions.entries()) {
      let lastError = "";
      let done = false;
      for (let attempt = 1; attempt <= action.max_attempts && !done; attempt++) {
        if (signal?.aborted) throw signal.reason;
        try {
          if (action.type === "exec") {
            const r = await this.exec(action.command, {
              env: { ...env, ...action.env },
              cwd: action.cwd,
              signal,
              logName: `prepare-${i}`,
            });
            if (r.interrupted)
              throw signal?.reason ?? new SessionFailure("infra", `prepare[${i}] interrupted`);
            if (r.exitCode === 0) done = true;
            else
              lastError = `exited with ${r.exitCode === null ? `signal ${r.signal}` : `code ${r.exitCode}`}`;
          } else {
            if (action.type === "upload_file") await this.uploadFile(action.source, action.target);
            else await this.uploadDir(action.source, action.target);
            done = true;
          }
        } catch (err) {
          if (signal?.aborted) throw signal.reason;
          lastError = messageOf(err);
        }
      }
      if (!done) {
        throw new SessionFailure(
          "infra",
          `prepare[${i}] (${action.type}) failed after ${action.max_attempts} attempt(s): ${lastError}`,
        );
      }
    }
  }

  /** Kills whatever still runs and removes the session folder unless `keep`. */
  async teardown(opts: { keep: boolean }): Promise<void> {
    for (const pid of this.groups) killGroup(pid);
    this.groups.clear();
    if (!opts.keep) await rm(this.sessionDir, { recursive: true, force: true });
  }
}
