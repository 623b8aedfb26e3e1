/**
 * Starting `polar` subcommands as child processes (the demo and the end-to-end tests run every
 * part as its own process, the way a user would).
 *
 * @module
 */
import { join } from "node:path";
import { execa, type ResultPromise } from "execa";
import { waitForHttp } from "./ports";
import { REPO_ROOT } from "./wrangler-dev";

export interface PolarProcess {
  name: string;
  /** Collected stdout+stderr (last 50 kB). */
  output(): string;
  /** True until the process exits. */
  alive(): boolean;
  /** Resolves when it exits. */
  exited: Promise<unknown>;
  /** SIGTERM, SIGKILL after 5 s. */
  stop(): Promise<void>;
  /** SIGKILL now. */
  kill(): Promise<void>;
}

/**
 * Runs `polar ARGS…` (through `bin/polar.mjs`) with extra environment variables.
 *
 * @example
 * ```ts
 * const sim = spawnPolar("sim", ["sim-engine", "--port", "30000"]);
 * await waitForHttp("http://127.0.0.1:30000/health", 30_000, sim.alive);
 * ```
 */
export function spawnPolar(name: string, args: string[], env: Record<string, string> = {}): PolarProcess {
  let captured = "";
  let running = true;
  const child: ResultPromise = execa(process.execPath, [join(REPO_ROOT, "bin", "polar.mjs"), ...args], {
    cwd: REPO_ROOT,
    env: { ...env, NO_COLOR: "1" },
    reject: false,
    forceKillAfterDelay: 5_000,
  });
  const collect = (chunk: Buffer) => {
    captured = (captured + chunk.toString()).slice(-50_000);
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
  return {
    name,
    output: () => captured,
    alive: () => running,
    exited,
    async stop() {
      if (running) child.kill("SIGTERM");
      await exited;
    },
    async kill() {
      if (running) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** Waits for a child's HTTP endpoint, failing with the child's output if it dies first. */
export async function waitForProcessHttp(proc: PolarProcess, url: string, timeoutMs = 60_000): Promise<void> {
  try {
    await waitForHttp(url, timeoutMs, proc.alive);
  } catch (err) {
    throw new Error(`${proc.name}: ${(err as Error).message}\n--- output ---\n${proc.output()}`);
  }
}
