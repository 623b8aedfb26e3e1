/**
 * The control plane's Worker built once and reused: `wrangler deploy --dry-run --outdir` writes the
 * bundle a deployment would upload, and `wrangler dev --no-bundle ENTRY` runs it as is.
 *
 * Why: `wrangler dev` bundles the Worker with esbuild at every start and then keeps esbuild
 * watching the sources, which polls the file system for as long as it runs. Measured on a 2-core
 * machine, a start costs about 2 s less CPU without it (wrangler's Node process and esbuild), and
 * the polling about 1 s of CPU per minute per control plane. Test suites and `polar stack` start a
 * control plane many times and never edit it while it runs; `polar dev` keeps wrangler's own
 * bundling, so an edit reloads.
 *
 * The bundle is cached under `.polar/worker-build/`, with the esbuild inputs it was built from
 * (size and mtime each, and `wrangler.toml`'s): a change to any of them builds it again. Builds
 * go to a fresh folder and `current.json` is swapped in by a rename, so parallel starters never
 * see half a bundle; two that race both build, and the later one's manifest wins.
 *
 * @module
 */
import { spawn } from "node:child_process";
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./repo-root";

/** Where built bundles and their manifest live. */
export const WORKER_BUILD_DIR = join(REPO_ROOT, ".polar", "worker-build");

/** A build as `current.json` records it. */
interface Manifest {
  /** The bundle's entry module (absolute). */
  entry: string;
  /** Every input of the build, relative to the repository: [size, mtimeMs]. */
  inputs: Record<string, [number, number]>;
}

/** The build failed; `output` is wrangler's. */
export class WorkerBuildError extends Error {
  override readonly name = "WorkerBuildError";
  constructor(
    message: string,
    readonly output: string,
  ) {
    super(`${message}\n${output.slice(-4_000)}`);
  }
}

function fingerprint(path: string): [number, number] | null {
  try {
    const s = statSync(join(REPO_ROOT, path));
    return [s.size, s.mtimeMs];
  } catch {
    return null;
  }
}

function upToDate(manifest: Manifest): boolean {
  if (!existsSync(manifest.entry)) return false;
  for (const [path, [size, mtime]] of Object.entries(manifest.inputs)) {
    const now = fingerprint(path);
    if (now === null || now[0] !== size || now[1] !== mtime) return false;
  }
  return true;
}

function readManifest(): Manifest | null {
  try {
    return JSON.parse(readFileSync(join(WORKER_BUILD_DIR, "current.json"), "utf8")) as Manifest;
  } catch {
    return null;
  }
}

function runWrangler(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(join(REPO_ROOT, "node_modules", ".bin", "wrangler"), args, {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        WRANGLER_SEND_METRICS: "false",
        WRANGLER_HIDE_BANNER: "true",
        CI: "true",
        NO_COLOR: "1",
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (d: Buffer) => (output += d.toString()));
    child.stderr.on("data", (d: Buffer) => (output += d.toString()));
    child.on("error", (err) => reject(new WorkerBuildError(`cannot run wrangler: ${err.message}`, output)));
    child.on("exit", (code) =>
      code === 0
        ? resolve(output)
        : reject(new WorkerBuildError(`wrangler deploy --dry-run exited ${code}`, output)),
    );
  });
}

async function build(): Promise<Manifest> {
  mkdirSync(WORKER_BUILD_DIR, { recursive: true });
  const out = mkdtempSync(join(WORKER_BUILD_DIR, "b-"));
  const meta = join(out, "meta.json");
  await runWrangler([
    "deploy",
    "--dry-run",
    "--config",
    join(REPO_ROOT, "wrangler.toml"),
    "--outdir",
    out,
    "--metafile",
    meta,
  ]);
  const { inputs } = JSON.parse(readFileSync(meta, "utf8")) as { inputs: Record<string, unknown> };
  const manifest: Manifest = { entry: join(out, "index.js"), inputs: {} };
  // esbuild names its inputs relative to the working directory (the repository here).
  for (const path of [...Object.keys(inputs), "wrangler.toml"]) {
    const print = fingerprint(path);
    if (print) manifest.inputs[path] = print;
  }
  if (!existsSync(manifest.entry)) throw new WorkerBuildError(`the build wrote no ${manifest.entry}`, "");
  const tmp = join(out, "current.json.tmp");
  writeFileSync(tmp, JSON.stringify(manifest));
  renameSync(tmp, join(WORKER_BUILD_DIR, "current.json"));
  pruneOldBuilds(out);
  return manifest;
}

/** Older builds, an hour after they were made: a control plane started from one has read it by then. */
function pruneOldBuilds(keep: string): void {
  const cutoff = Date.now() - 3_600_000;
  for (const name of readdirSync(WORKER_BUILD_DIR)) {
    const dir = join(WORKER_BUILD_DIR, name);
    if (!name.startsWith("b-") || dir === keep) continue;
    try {
      if (statSync(dir).mtimeMs < cutoff) rmSync(dir, { recursive: true, force: true });
    } catch {
      // removed by a parallel build meanwhile
    }
  }
}

let pending: Promise<string> | null = null;

/**
 * The entry module of the Worker built from the current sources, building it when there is none
 * or a source changed since (once per process at a time).
 *
 * @example
 * ```ts
 * const entry = await prebuiltWorker();
 * // wrangler dev --config wrangler.toml --no-bundle <entry> …
 * ```
 */
export function prebuiltWorker(): Promise<string> {
  const current = readManifest();
  if (current && upToDate(current)) return Promise.resolve(current.entry);
  pending ??= build()
    .then((m) => m.entry)
    .finally(() => {
      pending = null;
    });
  return pending;
}
