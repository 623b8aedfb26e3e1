/**
 * The gateway package as a user gets it, for tests: built from this checkout into a scratch copy
 * of `packages/polar-gateway` (so parallel test files never race on one `dist/`), packed with
 * `npm pack`, and installed with `npm install -g --prefix` into a folder outside the repository.
 *
 * @module
 */
import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { buildGatewayPackage, GATEWAY_PACKAGE_DIR } from "../../scripts/build-gateway-package";

const run = promisify(execFile);

/**
 * Builds and packs the gateway package; resolves to the tarball's path (in a fresh temp folder).
 *
 * @example
 * ```ts
 * const tgz = await packGateway(); // …/polar-ts-gateway-0.1.0.tgz
 * ```
 */
export async function packGateway(): Promise<string> {
  const work = mkdtempSync(join(tmpdir(), "polar-pack-"));
  const pkgDir = join(work, "package");
  // Everything but a previous build: the scratch copy gets its own dist/.
  cpSync(GATEWAY_PACKAGE_DIR, pkgDir, {
    recursive: true,
    filter: (src) => !src.startsWith(join(GATEWAY_PACKAGE_DIR, "dist")),
  });
  await buildGatewayPackage(pkgDir);
  const out = join(work, "out");
  mkdirSync(out);
  await run("npm", ["pack", "--silent", "--pack-destination", out], { cwd: pkgDir });
  const tgz = readdirSync(out).find((f) => f.endsWith(".tgz"));
  if (!tgz) throw new Error(`npm pack left no tarball in ${out}`);
  return join(out, tgz);
}

/**
 * Installs a packed tarball globally under `prefix` (as `npm install -g` would under /usr/local);
 * resolves to the installed `polar` binary and the install's wall time.
 *
 * @example
 * ```ts
 * const { bin } = await installPacked(await packGateway(), mkdtempSync(join(tmpdir(), "p-")));
 * ```
 */
export async function installPacked(tgz: string, prefix: string): Promise<{ bin: string; seconds: number }> {
  const t0 = performance.now();
  // cwd is the prefix, outside the repository: npm must not see the workspace's package.json.
  await run(
    "npm",
    ["install", "-g", "--prefix", prefix, "--no-audit", "--no-fund", "--loglevel=error", tgz],
    {
      cwd: prefix,
      maxBuffer: 16 * 1024 * 1024,
    },
  );
  const bin = join(prefix, "bin", "polar");
  if (!existsSync(bin)) throw new Error(`npm install -g left no ${bin}`);
  return { bin, seconds: (performance.now() - t0) / 1000 };
}
