/**
 * Child processes of the launchers (`polar dev`, the demo, the end-to-end tests): every child is
 * started through `cli/reaper.mjs`, which holds a pipe from this process and takes the child's
 * whole process group down when the pipe closes. So the child (and wrangler's workerd, and anything
 * else in its group) dies with the launcher however the launcher ends — SIGKILL, a crash, a closed
 * terminal — and never keeps a port or a state folder after it. This module collects the child's
 * output, knows whether it still runs, and stops or kills it through the reaper.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process";
import type { Socket } from "node:net";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The reaper script (plain JavaScript, started with this Node). */
export const REAPER = join(dirname(fileURLToPath(import.meta.url)), "reaper.mjs");

/** How long a stopped child gets between SIGTERM and SIGKILL (the reaper escalates). */
export const STOP_GRACE_MS = 5_000;

export interface SupervisedProcess {
  name: string;
  /** pid of the reaper (the child's parent); the child's group is the reaper's child's pid. */
  pid: number | undefined;
  /** The last `outputLimit` characters of stdout+stderr (empty when output is inherited). */
  output(): string;
  /** True until the process exits. */
  alive(): boolean;
  /** Resolves (never rejects) with the child's exit code or signal when it exits. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM to the child's group; SIGKILL after {@link STOP_GRACE_MS} if it lingers. */
  stop(): Promise<void>;
  /** SIGKILL to the child's group now (crash simulation). */
  kill(): Promise<void>;
}

/** Options of {@link startSupervised}. */
export interface SupervisedOptions {
  cwd?: string;
  /** Added to this process's environment (or, with `extendEnv: false`, the whole environment). */
  env?: Record<string, string>;
  /** false: the child gets exactly `env`, nothing of this process's environment. */
  extendEnv?: boolean;
  /** `inherit`: the child writes to this process's terminal; `pipe` (default): output is collected. */
  stdio?: "pipe" | "inherit";
  outputLimit?: number;
}

/**
 * Starts `file args…` under the reaper.
 *
 * @example
 * ```ts
 * const sim = startSupervised("sim", process.execPath, ["bin/polar.mjs", "sim-engine", "--port", "0"]);
 * await sim.stop();
 * ```
 */
export function startSupervised(
  name: string,
  file: string,
  args: string[],
  opts: SupervisedOptions = {},
): SupervisedProcess {
  const limit = opts.outputLimit ?? 50_000;
  const inherit = opts.stdio === "inherit";
  // fd 3 is the lifeline: never written; the kernel closes our end when this process dies.
  // The reaper gets a session of its own (detached), so a terminal's SIGINT/SIGHUP reach only the
  // launcher, which then stops its children in order (or dies, which closes the lifeline).
  const child: ChildProcess = spawn(process.execPath, [REAPER, String(STOP_GRACE_MS), file, ...args], {
    cwd: opts.cwd,
    env: opts.extendEnv === false ? { ...opts.env } : { ...process.env, ...opts.env },
    stdio: [inherit ? "inherit" : "pipe", inherit ? "inherit" : "pipe", inherit ? "inherit" : "pipe", "pipe"],
    detached: true,
  });
  const lifeline = child.stdio[3] as Socket | null;
  // The pipe must not keep this process alive, and its EOF on our side means nothing.
  lifeline?.unref();
  lifeline?.on("error", () => {});
  // The reaper writes one byte once its signal handlers are in place; a signal sent before that
  // would kill the reaper by default and leave the child to itself.
  let markReady: () => void = () => {};
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  lifeline?.once("data", () => markReady());
  let captured = "";
  let running = child.pid !== undefined;
  const collect = (chunk: Buffer) => {
    captured = (captured + chunk.toString()).slice(-limit);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      running = false;
      markReady();
      lifeline?.destroy();
      resolve({ code, signal });
    });
    child.once("error", (err) => {
      running = false;
      markReady();
      collect(Buffer.from(`${name}: ${err.message}\n`));
      resolve({ code: null, signal: null });
    });
  });
  const signal = async (sig: NodeJS.Signals) => {
    await ready;
    if (!running || child.pid === undefined) return;
    try {
      child.kill(sig);
    } catch {
      // Already gone between the check and the signal.
    }
  };
  return {
    name,
    pid: child.pid,
    output: () => captured,
    alive: () => running,
    exited,
    async stop() {
      await signal("SIGTERM"); // the reaper escalates to SIGKILL after STOP_GRACE_MS
      const timer = setTimeout(() => void signal("SIGUSR2"), STOP_GRACE_MS + 2_000);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      await signal("SIGUSR2"); // the reaper SIGKILLs the child's group
      await exited;
    },
  };
}
