/**
 * `runtime.storage_mb`: a bound on what a session may write, enforced by a watchdog around every
 * command of its runtime. The runtime measures its own writable storage
 * ({@link Runtime.storageBytes}: the session folder for `local` and `apptainer`, whose overlay
 * lives there, plus the container's writable layer for `docker`/`podman`); the watchdog samples
 * it while a command runs and once more when it ends, and kills the command's process tree when
 * the session holds more than the limit. The command then ends with `limitHit` (`storage limit of
 * 100 MiB (runtime.storage_mb) hit: the session holds 131 MiB`), like the memory limit, and every
 * later command of the session is refused the same way without running: its storage is full.
 *
 * Why a watchdog and not a quota: the gateway usually runs unprivileged, on whatever filesystem
 * the host has (project quotas need XFS or ext4 with quota options and root; loop-mounted images
 * need root; a tmpfs would hold the workspace in RAM). Measuring works everywhere; the cost is a
 * window of one sampling interval in which a fast writer can exceed the limit before it is
 * stopped. Sampling is adaptive: the next sample waits at least {@link MIN_SAMPLE_INTERVAL_MS}
 * and 20 × the last measurement's duration, so the walk costs at most ~5 % of one core.
 *
 * @module
 */
import { lstat, opendir } from "node:fs/promises";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { execa } from "execa";
import type { CommandResult, ExecOptions, Runtime } from "./types";

/** Shortest wait between two samples of a running command (ms). */
export const MIN_SAMPLE_INTERVAL_MS = 1000;
/** Samples wait this many times the last measurement's duration (bounds the watchdog's CPU). */
const SAMPLE_COST_FACTOR = 20;

/**
 * Bytes the files under `root` take on disk (allocated blocks): hard links counted once, symlinks
 * not followed, other filesystems mounted inside not entered. Asks `du -skx` (an order of
 * magnitude faster than a walk from JavaScript on big trees), else walks the tree itself
 * ({@link walkDiskUsage}). A missing `root` is 0.
 *
 * @example
 * ```ts
 * const used = await diskUsage("/var/polar/sessions/b.0.1"); // 1_234_944
 * ```
 */
export async function diskUsage(root: string): Promise<number> {
  const top = await lstat(root).catch(() => null);
  if (!top) return 0;
  return (await duBytes(root)) ?? (await walkDiskUsage(root));
}

/** `du -skx root` in bytes, or null when du is missing or printed no total. */
async function duBytes(root: string): Promise<number | null> {
  const r = await execa("du", ["-skx", root], { reject: false, timeout: 120_000, stdin: "ignore" });
  // du exits 1 when a file vanished during its walk, yet still prints the total.
  const kib = Number(/^(\d+)\s/.exec(String(r.stdout ?? ""))?.[1] ?? Number.NaN);
  return Number.isFinite(kib) ? kib * 1024 : null;
}

/**
 * The same measure as {@link diskUsage} by walking the tree (`lstat` per entry): files that vanish
 * during the walk are skipped.
 *
 * @example
 * ```ts
 * await walkDiskUsage(dir); // equals `du -skx dir` × 1024
 * ```
 */
export async function walkDiskUsage(root: string): Promise<number> {
  const top = await lstat(root).catch(() => null);
  if (!top) return 0;
  const seen = new Set<string>();
  let total = 0;
  const walk = async (dir: string): Promise<void> => {
    let handle: Awaited<ReturnType<typeof opendir>>;
    try {
      handle = await opendir(dir);
    } catch {
      return; // removed meanwhile, or unreadable
    }
    for await (const entry of handle) {
      if (entry.isSymbolicLink()) continue; // the target is counted where it lives, if inside
      const file = path.join(dir, entry.name);
      const info = await lstat(file).catch(() => null);
      if (!info || info.dev !== top.dev) continue;
      const key = `${info.dev}:${info.ino}`;
      if (info.nlink > 1) {
        if (seen.has(key)) continue;
        seen.add(key);
      }
      total += info.blocks * 512;
      if (entry.isDirectory()) await walk(file);
    }
  };
  total += top.blocks * 512;
  await walk(root);
  return total;
}

const mib = (bytes: number) => Math.ceil(bytes / (1024 * 1024));

/**
 * Wraps `runtime` so that every command is stopped once the session holds more than
 * `limitMb` MiB. The runtime must implement `storageBytes()`.
 *
 * @example
 * ```ts
 * const rt = limitStorage(await createRuntime(spec, ctx), spec.storage_mb);
 * const r = await rt.exec("dd if=/dev/zero of=big bs=1M count=500", { env, logName: "x" });
 * r.limitHit; // "storage limit of 100 MiB (runtime.storage_mb) hit: the session holds 500 MiB"
 * ```
 */
export function limitStorage(runtime: Runtime, limitMb: number): Runtime & StorageLimited {
  const measure = runtime.storageBytes?.bind(runtime);
  if (!measure) throw new TypeError(`runtime '${runtime.backend}' cannot measure its storage`);
  const limit = limitMb * 1024 * 1024;
  let exceeded: string | null = null;
  const over = (used: number) =>
    `storage limit of ${limitMb} MiB (runtime.storage_mb) hit: the session holds ${mib(used)} MiB`;
  const sample = async (): Promise<number> => {
    const t0 = performance.now();
    const used = await measure();
    if (used > limit && !exceeded) exceeded = over(used);
    return performance.now() - t0;
  };
  const exec = async (command: string, opts: ExecOptions): Promise<CommandResult> => {
    if (exceeded) {
      // Full: a further command could only write more.
      return {
        exitCode: null,
        signal: null,
        interrupted: false,
        timedOut: false,
        durationMs: 0,
        limitHit: exceeded,
      };
    }
    const stop = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    let running = true;
    let timer: NodeJS.Timeout | undefined;
    const tick = async () => {
      if (!running) return;
      const took = await sample().catch(() => 0);
      if (exceeded) {
        stop.abort();
        return;
      }
      if (running) timer = setTimeout(tick, Math.max(MIN_SAMPLE_INTERVAL_MS, took * SAMPLE_COST_FACTOR));
    };
    timer = setTimeout(tick, MIN_SAMPLE_INTERVAL_MS);
    let result: CommandResult;
    try {
      result = await runtime.exec(command, { ...opts, signal });
    } finally {
      running = false;
      clearTimeout(timer);
    }
    // A fast writer may have finished between samples: the last word is a measurement after exit.
    if (!exceeded) await sample().catch(() => 0);
    if (exceeded && !opts.signal?.aborted) return { ...result, interrupted: false, limitHit: exceeded };
    return result;
  };
  // Everything else is the runtime's own (getters included), so the wrapper is transparent.
  return new Proxy(runtime, {
    get(target, prop) {
      if (prop === "exec") return exec;
      if (prop === "storageExceeded") return exceeded;
      const value = Reflect.get(target, prop, target);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as Runtime & StorageLimited;
}

/** What {@link limitStorage} adds to a runtime. */
export interface StorageLimited {
  /** The limit message once the session went over its storage limit, else null. */
  readonly storageExceeded: string | null;
}
