/**
 * `polar sim-engine`: the simulated SGLang engine (a test double for the GPU, clearly labelled).
 *
 * @module
 */
import { SIM_ENGINE_HELP, startSimEngine } from "../../sim/server";

export interface SimEngineOptions {
  port: number;
  host: string;
  model: string;
  seed: number;
}

/** Runs until SIGINT/SIGTERM. */
export async function runSimEngine(opts: SimEngineOptions): Promise<void> {
  const engine = await startSimEngine({
    port: opts.port,
    host: opts.host,
    model: opts.model,
    seed: opts.seed,
  });
  console.log(SIM_ENGINE_HELP);
  console.log(`polar sim-engine (SIMULATOR, not a model) serving "${opts.model}" at ${engine.url}`);
  const stop = async () => {
    await engine.close();
    process.exit(0);
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
