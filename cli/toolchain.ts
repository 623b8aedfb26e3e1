/**
 * Commands that run the control plane (`polar dev`, `polar deploy`) need its toolchain: the
 * Worker's sources with `wrangler.toml`, and wrangler (which brings workerd and miniflare). A
 * clone has them after `npm ci`; the lean gateway package leaves them out on purpose, so there
 * these commands stop with one line naming what to install instead of crashing on a missing file.
 *
 * @module
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "./version";

/**
 * Thrown when a control-plane command runs without the control plane's toolchain; exit code 1.
 *
 * @example
 * ```ts
 * throw new MissingToolchainError("polar dev", ["wrangler.toml"]);
 * ```
 */
export class MissingToolchainError extends Error {
  override name = "MissingToolchainError";
  readonly exitCode = 1;
  constructor(command: string, missing: string[]) {
    super(
      `${command} runs the control plane, whose toolchain this install lacks (missing: ${missing.join(", ")}). ` +
        "The gateway package leaves out wrangler and the Worker's sources: run it from a clone of the " +
        "Polar-TS repository after `npm ci` (then `npx polar …`).",
    );
  }
}

/**
 * Throws {@link MissingToolchainError} unless `root` holds `wrangler.toml` and
 * `node_modules/.bin/wrangler`.
 *
 * @example
 * ```ts
 * requireControlPlaneToolchain("polar deploy");
 * ```
 */
export function requireControlPlaneToolchain(command: string, root: string = PACKAGE_ROOT): void {
  const missing = ["wrangler.toml", join("node_modules", ".bin", "wrangler")].filter(
    (f) => !existsSync(join(root, f)),
  );
  if (missing.length) throw new MissingToolchainError(command, missing);
}
