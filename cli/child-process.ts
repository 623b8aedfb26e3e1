/**
 * Supervising a child process started with execa: collect its output, know whether it still runs,
 * stop it politely or kill it (with its whole process group when it was started detached, so that
 * grandchildren such as wrangler's workerd die with it).
 *
 * @module
 */
import type { ResultPromise } from "execa";

export interface SupervisedProcess {
  name: string;
  /** The last `outputLimit` characters of stdout+stderr (empty when output is inherited). */
  output(): string;
  /** True until the process exits. */
  alive(): boolean;
  /** Resolves (never rejects) when the process exits. */
  exited: Promise<unknown>;
  /** SIGTERM; execa's `forceKillAfterDelay` turns it into SIGKILL if it lingers. */
  stop(): Promise<void>;
  /** SIGKILL now (crash simulation). */
  kill(): Promise<void>;
}

/**
 * Wraps a running execa child.
 *
 * @example
 * ```ts
 * const proc = supervise("sim", execa("node", ["server.js"], { reject: false }));
 * await proc.stop();
 * ```
 */
export function supervise(
  name: string,
  child: ResultPromise,
  opts: { processGroup?: boolean; outputLimit?: number } = {},
): SupervisedProcess {
  const limit = opts.outputLimit ?? 50_000;
  let captured = "";
  let running = true;
  const collect = (chunk: Buffer) => {
    captured = (captured + chunk.toString()).slice(-limit);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  const exited = child.then(
    (r) => {
      running = false;
      return r;
    },
    (e) => {
      running = false;
      return e;
    },
  );
  const signal = (sig: NodeJS.Signals) => {
    if (!running || child.pid === undefined) return;
    try {
      // A negative pid addresses the process group of a detached child.
      if (opts.processGroup) process.kill(-child.pid, sig);
      else child.kill(sig);
    } catch {
      // Already gone between the check and the signal.
    }
  };
  return {
    name,
    output: () => captured,
    alive: () => running,
    exited,
    async stop() {
      signal("SIGTERM");
      const timer = setTimeout(() => signal("SIGKILL"), 5_000);
      await exited;
      clearTimeout(timer);
    },
    async kill() {
      signal("SIGKILL");
      await exited;
    },
  };
}
