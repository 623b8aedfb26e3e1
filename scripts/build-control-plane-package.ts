/**
 * Builds the control-plane package (`packages/polar-control-plane`): what `wrangler deploy` needs
 * to deploy the Worker from an install, with no clone and no TypeScript around.
 *
 * - `dist/worker.js`: the Worker (control-plane/index.ts and everything it imports: hono, drizzle,
 *   zod, the protocol, the drizzle migrations inlined as text) bundled by esbuild into one ES module,
 *   so the package's only dependency is wrangler. Only `cloudflare:*` and Node built-ins stay
 *   imports: the Workers runtime provides them (`nodejs_compat`), and wrangler's own bundling at
 *   deploy time handles them as it does for the sources.
 * - `dist/assets/`: the dashboard (web/dist, built by Vite when stale), the Worker's static assets.
 * - `dist/wrangler.json`: the repository's wrangler.toml (Durable Object bindings and migrations,
 *   the R2 bucket, assets routing) pointed at the two above. Generated, so the package can never
 *   deploy bindings or migrations other than the ones the repository tests.
 *
 * The build refuses to finish when the bundle imports a package (it would be missing at deploy
 * time), when it does not export a Durable Object class the config binds, or when the package's
 * wrangler pin differs from the version the repository's lock file installs.
 *
 *   npx tsx scripts/build-control-plane-package.ts   # then: cd packages/polar-control-plane && npm pack
 *
 * @module
 */

import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { builtinModules } from "node:module";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { build } from "esbuild";
import { parse as parseToml } from "smol-toml";
import { ensureWebBuild, WEB_DIST } from "../cli/web-build";

const REPO = resolve(import.meta.dirname, "..");

/**
 * The package's folder in the repository (package.json, README, CHANGELOG, bin/; `dist/` built).
 *
 * @example
 * ```ts
 * join(CONTROL_PLANE_PACKAGE_DIR, "dist", "wrangler.json");
 * ```
 */
export const CONTROL_PLANE_PACKAGE_DIR = join(REPO, "packages", "polar-control-plane");

/** The parts of a wrangler config this build reads or rewrites. */
interface WranglerConfig {
  main?: string;
  assets?: { directory?: string } & Record<string, unknown>;
  durable_objects?: { bindings?: Array<{ name: string; class_name: string }> };
  rules?: unknown;
  [key: string]: unknown;
}

/**
 * The packaged wrangler config made from the repository's: `main` and the assets folder point into
 * the package's `dist/`, and the module rules go (the bundle inlines the `.sql` files they were for).
 * Everything else — name, compatibility date and flags, Durable Object bindings and migrations,
 * the R2 bucket, assets routing — is kept as the repository's tests run it.
 *
 * @example
 * ```ts
 * packagedConfig({ main: "control-plane/index.ts", assets: { directory: "./web/dist" } });
 * // { main: "worker.js", assets: { directory: "./assets" } }
 * ```
 */
export function packagedConfig(repoConfig: WranglerConfig): WranglerConfig {
  const { rules: _inlined, ...rest } = repoConfig;
  if (!rest.assets?.directory) throw new Error("wrangler.toml: [assets] directory is missing");
  return { ...rest, main: "worker.js", assets: { ...rest.assets, directory: "./assets" } };
}

/**
 * What is wrong with a bundle: packages it still imports (absent from an install, whose only
 * dependency is wrangler) and Durable Object classes the config binds but the Worker does not
 * export (wrangler would refuse the deploy). One line per problem, empty when it is fine.
 *
 * @example
 * ```ts
 * bundleProblems(["cloudflare:workers", "hono"], ["default"], ["BatchDO"]);
 * // ["the Worker bundle still imports hono (bundle it, or the installed package lacks it)",
 * //  "the Worker does not export BatchDO, which wrangler.json binds"]
 * ```
 */
export function bundleProblems(imports: string[], exports: string[], classes: string[]): string[] {
  const problems: string[] = [];
  for (const path of [...new Set(imports)].sort()) {
    const bare = path.replace(/^node:/, "");
    if (path.startsWith("cloudflare:") || builtinModules.includes(bare.split("/")[0]!)) continue;
    problems.push(`the Worker bundle still imports ${path} (bundle it, or the installed package lacks it)`);
  }
  for (const cls of classes)
    if (!exports.includes(cls)) problems.push(`the Worker does not export ${cls}, which wrangler.json binds`);
  return problems;
}

/** The version of `name` that package-lock.json installs. */
function lockedVersion(name: string): string | undefined {
  const lock = JSON.parse(readFileSync(join(REPO, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  return lock.packages[`node_modules/${name}`]?.version;
}

/**
 * Builds `dist/` of the control-plane package; throws listing every problem. Returns the bundle's
 * size in bytes and the Durable Object classes it exports.
 *
 * @example
 * ```ts
 * const { bytes, classes } = await buildControlPlanePackage();
 * ```
 */
export async function buildControlPlanePackage(
  dir: string = CONTROL_PLANE_PACKAGE_DIR,
): Promise<{ bytes: number; classes: string[] }> {
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
  };
  const deps = pkg.dependencies ?? {};
  const locked = lockedVersion("wrangler");
  if (Object.keys(deps).join() !== "wrangler" || deps.wrangler !== locked)
    throw new Error(
      `${join(dir, "package.json")}: dependencies must be exactly {"wrangler": "${locked}"} ` +
        `(the wrangler package-lock.json installs), got ${JSON.stringify(deps)}`,
    );
  const config = parseToml(readFileSync(join(REPO, "wrangler.toml"), "utf8")) as WranglerConfig;
  const packaged = packagedConfig(config);
  const classes = (config.durable_objects?.bindings ?? []).map((b) => b.class_name);

  const dist = join(dir, "dist");
  rmSync(dist, { recursive: true, force: true });
  mkdirSync(dist, { recursive: true });
  const result = await build({
    absWorkingDir: REPO,
    entryPoints: [join(REPO, config.main ?? "control-plane/index.ts")],
    outfile: join(dist, "worker.js"),
    bundle: true,
    format: "esm",
    target: "es2022",
    // What wrangler resolves a Worker's packages with, so the bundle holds the same code a deploy
    // from the sources would.
    conditions: ["workerd", "worker", "browser"],
    external: ["cloudflare:*", "node:*", ...builtinModules],
    loader: { ".sql": "text" },
    metafile: true,
    logLevel: "warning",
  });
  const out = Object.values(result.metafile.outputs)[0]!;
  const problems = bundleProblems(
    out.imports.filter((i) => i.external).map((i) => i.path),
    out.exports,
    classes,
  );
  if (problems.length)
    throw new Error(`the control-plane bundle is not deployable:\n  ${problems.join("\n  ")}`);

  // The dashboard as the repository's `wrangler deploy` serves it (built once, under its lock).
  await ensureWebBuild();
  cpSync(WEB_DIST, join(dist, "assets"), { recursive: true });
  writeFileSync(join(dist, "wrangler.json"), `${JSON.stringify(packaged, null, 2)}\n`);
  return { bytes: out.bytes, classes };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { bytes, classes } = await buildControlPlanePackage();
  console.log(
    `built ${join(CONTROL_PLANE_PACKAGE_DIR, "dist")} (worker.js ${(bytes / 1024).toFixed(0)} KiB; Durable Objects: ${classes.join(", ")})`,
  );
}
