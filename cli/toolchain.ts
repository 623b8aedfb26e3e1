/**
 * Commands that run the control plane (`polar dev`, `polar deploy`) need its toolchain: the
 * Worker's sources with `wrangler.toml`, and wrangler (which brings workerd and miniflare). A
 * clone has them after `npm ci`; the lean gateway package leaves them out on purpose. There
 * `polar deploy` hands over to the control-plane package (`@polar-ts/control-plane`, which carries
 * the bundled Worker and wrangler) when it is installed beside the CLI, and otherwise these
 * commands stop with one line naming what to install instead of crashing on a missing file.
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { basename, dirname, join } from "node:path";
import { PACKAGE_ROOT } from "./version";

/**
 * The control-plane package's npm name.
 *
 * @example
 * ```ts
 * `npm install -g ${CONTROL_PLANE_PACKAGE}`;
 * ```
 */
export const CONTROL_PLANE_PACKAGE = "@polar-ts/control-plane";

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
        `The gateway package leaves out wrangler and the Worker: install the control-plane package beside it ` +
        `(\`npm install -g ${CONTROL_PLANE_PACKAGE}\`, then \`polar-control-plane --help\`; \`polar deploy\` uses it ` +
        "once installed), or run from a clone of the Polar-TS repository after `npm ci` (then `npx polar …`).",
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
  const missing = missingToolchain(root);
  if (missing.length) throw new MissingToolchainError(command, missing);
}

/**
 * What `root` lacks of a clone's control-plane toolchain (`wrangler.toml`, the installed wrangler);
 * empty in a clone after `npm ci`.
 *
 * @example
 * ```ts
 * if (missingToolchain().length) console.log("not a clone");
 * ```
 */
export function missingToolchain(root: string = PACKAGE_ROOT): string[] {
  return ["wrangler.toml", join("node_modules", ".bin", "wrangler")].filter(
    (f) => !existsSync(join(root, f)),
  );
}

/** The `polar-control-plane` script of the package in `dir`, or null when `dir` holds another package. */
function controlPlaneBin(dir: string): string | null {
  try {
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
      name?: string;
      bin?: Record<string, string>;
    };
    const bin = pkg.bin?.["polar-control-plane"];
    return pkg.name === CONTROL_PLANE_PACKAGE && bin ? join(dir, bin) : null;
  } catch {
    return null;
  }
}

/**
 * The `polar-control-plane` script of the control-plane package installed beside the CLI at
 * `root`, or null. Looked for where npm puts it: the sibling folder of a scoped install
 * (`…/node_modules/@polar-ts/gateway` → `…/@polar-ts/control-plane`, as `npm install -g` of both
 * leaves them), then whatever `root` resolves as a dependency.
 *
 * @example
 * ```ts
 * const bin = findControlPlanePackage(); // ".../@polar-ts/control-plane/bin/polar-control-plane.mjs" or null
 * ```
 */
export function findControlPlanePackage(root: string = PACKAGE_ROOT): string | null {
  if (basename(dirname(root)) === "@polar-ts") {
    const sibling = controlPlaneBin(join(dirname(root), "control-plane"));
    if (sibling) return sibling;
  }
  try {
    const manifest = createRequire(join(root, "package.json")).resolve(
      `${CONTROL_PLANE_PACKAGE}/package.json`,
    );
    return controlPlaneBin(dirname(manifest));
  } catch {
    return null;
  }
}
