// The `polar` CLI bundled once and reused, so a start does not pay tsx's loader (about 1.5 s of CPU
// per process measured on a 2-core machine: a gateway, a simulated engine, every short command).
// Plain JavaScript: it runs before any TypeScript can be loaded.
//
// esbuild bundles cli/main.ts into `.polar-cli/` at the repository's root: ES modules, one entry
// and a chunk per lazily imported subcommand, third-party packages external (resolved from
// node_modules as before): cli/bundle-options.mjs, the gateway package's settings. The folder sits one
// level below the root, as the package's `dist/` does, so the code that finds the root one level
// up (cli/wrangler-dev.ts, cli/version.ts) and the files it finds beside itself (cli/runtime-assets.json,
// copied in) work unchanged.
//
// `current.json` names the entry and every input of the build with its size and mtime; a change to
// any of them builds again, before the command runs. Outputs are named by content hash and each is
// written to a temporary name and renamed, so a process loading an older build, or one racing this
// build, never reads a half-written file; files of older builds are left for the running
// processes that may still load their chunks, and removed after a day.
//
// POLAR_CLI_BUNDLE=0 runs the sources through tsx instead (as does a failed build, after saying why).
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join, relative } from "node:path";
import { cliBundleOptions } from "../cli/bundle-options.mjs";

const BUNDLE_DIR = ".polar-cli";
const DAY_MS = 86_400_000;

function fingerprint(root, path) {
  try {
    const s = statSync(join(root, path));
    return [s.size, s.mtimeMs];
  } catch {
    return null;
  }
}

function upToDate(root, manifest) {
  if (!manifest || !existsSync(join(root, BUNDLE_DIR, manifest.entry))) return false;
  for (const [path, [size, mtime]] of Object.entries(manifest.inputs)) {
    const now = fingerprint(root, path);
    if (now === null || now[0] !== size || now[1] !== mtime) return false;
  }
  return true;
}

function writeAtomically(path, contents) {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, path);
}

function copyAtomically(from, to) {
  if (statSync(from).isDirectory()) {
    mkdirSync(to, { recursive: true });
    for (const name of readdirSync(from)) copyAtomically(join(from, name), join(to, name));
    return;
  }
  const tmp = `${to}.${process.pid}.tmp`;
  copyFileSync(from, tmp);
  renameSync(tmp, to);
}

function filesOf(root, path) {
  const abs = join(root, path);
  if (!statSync(abs).isDirectory()) return [path];
  return readdirSync(abs).flatMap((name) => filesOf(root, join(path, name)));
}

function prune(dir, keep) {
  const cutoff = Date.now() - DAY_MS;
  for (const name of readdirSync(dir)) {
    if (keep.has(name)) continue;
    const path = join(dir, name);
    try {
      const s = statSync(path);
      if (s.isFile() && s.mtimeMs < cutoff) rmSync(path, { force: true });
    } catch {
      // removed by a parallel build meanwhile
    }
  }
}

async function build(root) {
  const { build: esbuild } = await import("esbuild");
  const dir = join(root, BUNDLE_DIR);
  mkdirSync(dir, { recursive: true });
  const assets = JSON.parse(readFileSync(join(root, "cli", "runtime-assets.json"), "utf8"));
  const result = await esbuild({
    ...cliBundleOptions(root, dir),
    // Content-hashed entry too: a process loading an older build keeps its own files.
    entryNames: "[name]-[hash]",
    write: false,
    logLevel: "silent",
  });
  const outputs = new Set();
  let entry = null;
  for (const file of result.outputFiles) {
    const name = relative(dir, file.path);
    outputs.add(name);
    if (!existsSync(file.path)) writeAtomically(file.path, file.contents);
    const meta = result.metafile.outputs[relative(root, file.path)];
    if (meta?.entryPoint === "cli/main.ts") entry = name;
  }
  if (!entry) throw new Error("the build has no entry for cli/main.ts");
  for (const asset of assets) {
    if (outputs.has(asset.to)) throw new Error(`${BUNDLE_DIR}/${asset.to} is both a chunk and an asset`);
    copyAtomically(join(root, asset.from), join(dir, asset.to));
    outputs.add(asset.to);
  }
  const manifest = { entry, inputs: {} };
  const inputs = [
    ...Object.keys(result.metafile.inputs),
    "cli/runtime-assets.json",
    // How it is built: a change to the settings builds again too.
    "cli/bundle-options.mjs",
    "bin/cli-bundle.mjs",
    ...assets.flatMap((a) => filesOf(root, a.from)),
  ];
  for (const path of inputs) {
    const print = fingerprint(root, path);
    if (print) manifest.inputs[path] = print;
  }
  writeAtomically(join(dir, "current.json"), JSON.stringify(manifest));
  prune(dir, new Set([...outputs, "current.json"]));
  return join(dir, entry);
}

/**
 * The entry module of the CLI bundled from the current sources (building it first when there is
 * none or an input changed), or null: POLAR_CLI_BUNDLE=0, or the build failed (said on stderr).
 */
export async function bundledCli(root) {
  const flag = process.env.POLAR_CLI_BUNDLE;
  if (flag === "0" || flag === "false") return null;
  let manifest = null;
  try {
    manifest = JSON.parse(readFileSync(join(root, BUNDLE_DIR, "current.json"), "utf8"));
  } catch {
    manifest = null;
  }
  if (upToDate(root, manifest)) return join(root, BUNDLE_DIR, manifest.entry);
  try {
    return await build(root);
  } catch (err) {
    process.stderr.write(
      `polar: could not bundle the CLI (${err.message.split("\n")[0]}); running the sources through tsx\n`,
    );
    return null;
  }
}
