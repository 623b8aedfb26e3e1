/**
 * `polar dev`: the control plane on this machine, through `wrangler dev`.
 *
 * @module
 */
import { resolve } from "node:path";
import { DEV_TOKENS, tokensFromEnv } from "../dev-tokens";
import { requireControlPlaneToolchain } from "../toolchain";
import { startControlPlaneDev } from "../wrangler-dev";

export interface DevOptions {
  port: number;
  persistTo: string;
}

/**
 * Runs until SIGINT, SIGTERM or SIGHUP (a closed terminal), then stops wrangler. Were this process
 * killed outright (SIGKILL, a crash), wrangler and workerd still go down with it: they run under the
 * reaper (`cli/child-process.ts`), which watches a pipe from this process.
 */
export async function runDev(opts: DevOptions): Promise<void> {
  requireControlPlaneToolchain("polar dev");
  const tokens = tokensFromEnv(process.env);
  const cp = await startControlPlaneDev({
    port: opts.port,
    persistTo: resolve(opts.persistTo),
    tokens,
    inheritOutput: true,
  });
  const usingDefaults =
    tokens.trainer === DEV_TOKENS.trainer ||
    tokens.gateway === DEV_TOKENS.gateway ||
    tokens.admin === DEV_TOKENS.admin ||
    tokens.viewer === DEV_TOKENS.viewer;
  console.log(`\nPolar-TS control plane (local) at ${cp.url}, state in ${opts.persistTo}`);
  if (usingDefaults) {
    console.log("Using the documented dev tokens (set POLAR_*_TOKEN to override):");
    console.log(`  export POLAR_URL=${cp.url}`);
    console.log(`  export POLAR_TRAINER_TOKEN=${tokens.trainer}`);
    console.log(`  export POLAR_GATEWAY_TOKEN=${tokens.gateway}`);
    console.log(`  export POLAR_ADMIN_TOKEN=${tokens.admin}`);
    console.log(`  export POLAR_VIEWER_TOKEN=${tokens.viewer}`);
  }
  const stop = async () => {
    await cp.stop();
    process.exit(0);
  };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, stop);
  await cp.exited;
}
