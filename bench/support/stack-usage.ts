/**
 * What the benchmarks read off a local control plane (`wrangler dev`): its processes' CPU time and
 * memory from process accounting, and the size of its Durable Objects' state on disk.
 *
 * `wrangler dev` runs two workerd processes: the Worker with every Durable Object (what a
 * deployment runs and pays CPU for), and a proxy in front of it that owns the public port (local
 * only: it forwards every request and WebSocket frame). They are told apart by that port.
 *
 * @module
 */
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { descendants, usageOf } from "../../test/support/process-tree";

/** The processes of a `wrangler dev` under `root` (its supervisor's pid), listening on `port`. */
export interface DevProcesses {
  /** workerd running the Worker and the Durable Objects. */
  runtime: number;
  /** workerd in front of it on the public port (local only). */
  devProxy: number;
  /** wrangler's own node process. */
  wrangler: number;
}

/**
 * Finds the processes of a running `wrangler dev`.
 *
 * @example
 * ```ts
 * const procs = devProcesses(cp.pid!, cp.port);
 * const cpu = usageOf(procs.runtime)!.cpuSeconds;
 * ```
 */
export function devProcesses(root: number, port: number): DevProcesses {
  const tree = descendants(root);
  const workerds = tree.filter((p) => /(^|\/)workerd serve\b/.test(p.cmdline));
  const devProxy = workerds.find((p) => p.cmdline.includes(`entry=127.0.0.1:${port} `));
  const runtime = workerds.find((p) => p !== devProxy);
  const wrangler = tree.find((p) => p.cmdline.includes("wrangler-dist/cli.js"));
  if (!runtime || !devProxy || !wrangler)
    throw new Error(
      `wrangler dev's processes not found under pid ${root} (${tree.map((p) => p.cmdline.slice(0, 60)).join("; ")})`,
    );
  return { runtime: runtime.pid, devProxy: devProxy.pid, wrangler: wrangler.pid };
}

/** CPU seconds so far and resident bytes of each of a `wrangler dev`'s processes. */
export interface DevUsage {
  runtimeCpu: number;
  runtimeRss: number;
  devProxyCpu: number;
  wranglerCpu: number;
}

/**
 * Reads {@link DevUsage} now (throws when a process is gone).
 *
 * @example
 * ```ts
 * const before = devUsage(procs); // … work … devUsage(procs).runtimeCpu - before.runtimeCpu
 * ```
 */
export function devUsage(p: DevProcesses): DevUsage {
  const read = (pid: number, what: string) => {
    const u = usageOf(pid);
    if (!u) throw new Error(`${what} (pid ${pid}) is gone`);
    return u;
  };
  const runtime = read(p.runtime, "workerd (Worker)");
  return {
    runtimeCpu: runtime.cpuSeconds,
    runtimeRss: runtime.rssBytes,
    devProxyCpu: read(p.devProxy, "workerd (dev proxy)").cpuSeconds,
    wranglerCpu: read(p.wrangler, "wrangler").cpuSeconds,
  };
}

/**
 * Bytes of every file under a folder (the Durable Objects' `--persist-to` state: SQLite files and
 * their write-ahead logs).
 *
 * @example
 * ```ts
 * const bytes = folderBytes(persistDir);
 * ```
 */
export function folderBytes(dir: string): number {
  let total = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true }))
    if (entry.isFile()) total += statSync(join(entry.parentPath, entry.name)).size;
  return total;
}

/**
 * The p-th percentile of sorted numbers (nearest rank).
 *
 * @example
 * ```ts
 * percentile([1, 2, 3, 4], 50); // 3
 * ```
 */
export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}
