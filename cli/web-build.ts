/**
 * Builds the dashboard (`web/`, Vite) once, when its output is missing or older than its sources.
 *
 * `wrangler.toml`'s `[assets]` serves `web/dist`, and both `wrangler dev` and the workers test pool
 * refuse to start when that folder is missing. Many test files start `wrangler dev` at the same
 * time, so the build runs under a lock (a folder created atomically) and the first file builds
 * while the others wait and then find it fresh; it is never rebuilt per `wrangler dev` start.
 * The build goes to a temporary folder renamed into place, so a reader never sees half of it.
 *
 * @module
 */
import { mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { execa } from "execa";

/** The dashboard's folder and its build output (what `[assets] directory` names). */
export const WEB_ROOT = resolve(import.meta.dirname, "..", "web");
export const WEB_DIST = join(WEB_ROOT, "dist");
/** A lock older than this was left by a build that died. */
const STALE_LOCK_MS = 120_000;

/** Newest modification time under `path` (a file or folder), 0 when it does not exist. */
function newest(path: string): number {
  let st: ReturnType<typeof statSync>;
  try {
    st = statSync(path);
  } catch {
    return 0;
  }
  if (!st.isDirectory()) return st.mtimeMs;
  let max = st.mtimeMs;
  for (const name of readdirSync(path)) max = Math.max(max, newest(join(path, name)));
  return max;
}

/**
 * Whether `web/dist` is missing or older than a source of the dashboard (its own, or the generated
 * client's in `clients/typescript/src`).
 *
 * @example
 * ```ts
 * if (webBuildStale()) console.log("the dashboard will be built");
 * ```
 */
export function webBuildStale(root = WEB_ROOT): boolean {
  let built: number;
  try {
    built = statSync(join(root, "dist", "index.html")).mtimeMs;
  } catch {
    return true;
  }
  const sources = Math.max(
    newest(join(root, "src")),
    newest(join(root, "index.html")),
    newest(join(root, "vite.config.ts")),
    // The generated TypeScript client the dashboard imports is bundled with it.
    newest(join(root, "..", "clients", "typescript", "src")),
  );
  return sources > built;
}

/**
 * Runs the Vite build now (to a temporary folder, then renamed to `web/dist`).
 *
 * @example
 * ```ts
 * await buildWeb();
 * ```
 */
export async function buildWeb(): Promise<void> {
  const tmp = join(WEB_ROOT, `.dist-${process.pid}`);
  rmSync(tmp, { recursive: true, force: true });
  await execa(
    join(WEB_ROOT, "..", "node_modules", ".bin", "vite"),
    ["build", "--config", join(WEB_ROOT, "vite.config.ts"), "--outDir", tmp, "--logLevel", "warn"],
    { cwd: WEB_ROOT, env: { NO_COLOR: "1" } },
  );
  rmSync(WEB_DIST, { recursive: true, force: true });
  renameSync(tmp, WEB_DIST);
}

/** Options of {@link ensureWebBuild} (tests point it at another folder and build). */
export interface EnsureWebBuildOptions {
  /** The dashboard's folder (default `web/`). */
  root?: string;
  /** The build to run (default {@link buildWeb}). */
  build?: () => Promise<void>;
}

/**
 * Builds the dashboard if {@link webBuildStale}, once across processes. Returns whether this call built it.
 *
 * @example
 * ```ts
 * await ensureWebBuild(); // before `wrangler dev`
 * ```
 */
export async function ensureWebBuild(opts: EnsureWebBuildOptions = {}): Promise<boolean> {
  const root = opts.root ?? WEB_ROOT;
  const lock = join(root, ".build-lock");
  if (!webBuildStale(root)) return false;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      try {
        if (Date.now() - statSync(lock).mtimeMs > STALE_LOCK_MS)
          rmSync(lock, { recursive: true, force: true });
      } catch {
        // Released between the two calls: take it on the next turn.
      }
      await sleep(200);
    }
  }
  try {
    writeFileSync(join(lock, "pid"), String(process.pid));
    // Another process may have built it while this one waited for the lock.
    if (!webBuildStale(root)) return false;
    await (opts.build ?? buildWeb)();
    return true;
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}
