/**
 * Starting `polar` subcommands as child processes (the demo and the end-to-end tests run every
 * part as its own process, the way a user would).
 *
 * @module
 */
import { join } from "node:path";
import { execa } from "execa";
import { type SupervisedProcess, supervise } from "./child-process";
import { waitForHttp } from "./ports";
import { REPO_ROOT } from "./wrangler-dev";

export type PolarProcess = SupervisedProcess;

/**
 * Runs `polar ARGS…` (through `bin/polar.mjs`) with extra environment variables.
 *
 * @example
 * ```ts
 * const sim = spawnPolar("sim", ["sim-engine", "--port", "30000"]);
 * await waitForProcessHttp(sim, "http://127.0.0.1:30000/health");
 * ```
 */
export function spawnPolar(name: string, args: string[], env: Record<string, string> = {}): PolarProcess {
  const child = execa(process.execPath, [join(REPO_ROOT, "bin", "polar.mjs"), ...args], {
    cwd: REPO_ROOT,
    env: { ...env, NO_COLOR: "1" },
    reject: false,
  });
  return supervise(name, child);
}

/** Waits for a child's HTTP endpoint, failing with the child's output if it dies first. */
export async function waitForProcessHttp(proc: PolarProcess, url: string, timeoutMs = 60_000): Promise<void> {
  try {
    await waitForHttp(url, timeoutMs, proc.alive);
  } catch (err) {
    throw new Error(`${proc.name}: ${(err as Error).message}\n--- output ---\n${proc.output()}`);
  }
}
