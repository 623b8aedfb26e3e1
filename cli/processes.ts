/**
 * Starting `polar` subcommands as child processes (the demo and the end-to-end tests run every
 * part as its own process, the way a user would). Each runs under the reaper
 * (`cli/child-process.ts`), so none outlives the process that started it.
 *
 * @module
 */
import { join } from "node:path";
import { type SupervisedProcess, startSupervised } from "./child-process";
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
  // Under the reaper: the child dies with this process, even when this process is SIGKILLed.
  return startSupervised(name, process.execPath, [join(REPO_ROOT, "bin", "polar.mjs"), ...args], {
    cwd: REPO_ROOT,
    env: { ...env, NO_COLOR: "1" },
  });
}

/** Waits for a child's HTTP endpoint, failing with the child's output if it dies first. */
export async function waitForProcessHttp(proc: PolarProcess, url: string, timeoutMs = 60_000): Promise<void> {
  try {
    await waitForHttp(url, timeoutMs, proc.alive);
  } catch (err) {
    throw new Error(`${proc.name}: ${(err as Error).message}\n--- output ---\n${proc.output()}`);
  }
}
