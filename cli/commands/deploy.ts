/**
 * `polar deploy [--dry-run]`: builds the dashboard (`web/dist`, served as the Worker's static
 * assets), bundles and deploys the control plane with `wrangler deploy` (`--dry-run` only bundles
 * and checks), then prints the remaining one-time steps (R2 bucket,
 * secrets). Deploying needs a Cloudflare login (`npx wrangler login` or `CLOUDFLARE_API_TOKEN`).
 *
 * From an installed gateway package (no clone, no wrangler) it runs `polar-control-plane deploy`
 * of the control-plane package installed beside it, which deploys the same Worker prebuilt.
 *
 * @module
 */
import { join } from "node:path";
import { execa } from "execa";
import { findControlPlanePackage, missingToolchain, requireControlPlaneToolchain } from "../toolchain";
import { buildWeb } from "../web-build";
import { REPO_ROOT } from "../wrangler-dev";

export interface DeployOptions {
  dryRun?: boolean;
}

/** The one-time steps of a first deployment. */
export const FIRST_DEPLOY_STEPS = [
  "npx wrangler r2 bucket create polar-trajectories",
  "npx polar token create --role trainer   # then: wrangler secret put POLAR_TRAINER_TOKEN",
  "npx polar token create --role gateway   # shared gateway token: wrangler secret put POLAR_GATEWAY_TOKEN",
  "npx polar token create --role admin     # then: wrangler secret put POLAR_ADMIN_TOKEN",
];

/** Runs wrangler deploy and exits with its status. */
export async function runDeploy(opts: DeployOptions): Promise<void> {
  const packaged = missingToolchain().length ? findControlPlanePackage() : null;
  if (packaged) {
    // The package prints its own next steps (named after its commands) and exits with wrangler's status.
    const child = await execa(process.execPath, [packaged, "deploy", ...(opts.dryRun ? ["--dry-run"] : [])], {
      stdio: "inherit",
      reject: false,
    });
    process.exitCode = child.exitCode ?? 1;
    return;
  }
  requireControlPlaneToolchain("polar deploy");
  // Always a fresh build: what is deployed is what the sources say, whatever web/dist holds.
  await buildWeb();
  const args = [
    "deploy",
    "--config",
    join(REPO_ROOT, "wrangler.toml"),
    ...(opts.dryRun ? ["--dry-run"] : []),
  ];
  const child = await execa(join(REPO_ROOT, "node_modules", ".bin", "wrangler"), args, {
    cwd: REPO_ROOT,
    stdio: "inherit",
    reject: false,
  });
  if (child.exitCode !== 0) {
    process.exitCode = child.exitCode ?? 1;
    return;
  }
  console.log(opts.dryRun ? "\nBundle OK (dry run, nothing deployed)." : "\nDeployed.");
  console.log("First deployment? The Worker refuses every request until its secrets exist:");
  for (const step of FIRST_DEPLOY_STEPS) console.log(`  ${step}`);
}
