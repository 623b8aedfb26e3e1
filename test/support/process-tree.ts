/**
 * Looking at real processes from a test (Linux `/proc`): the descendants of a pid, whether a pid is
 * gone, whether a TCP port is free. Used by the tests that kill launchers and check that nothing
 * they started is left. Test-only.
 *
 * @module
 */
import { readdirSync, readFileSync } from "node:fs";
import net from "node:net";

interface ProcInfo {
  pid: number;
  ppid: number;
  /** One-letter state: R, S, D, Z (zombie), … */
  state: string;
  cmdline: string;
}

function readProc(pid: number): ProcInfo | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // `pid (comm) state ppid …`; comm may hold spaces and parentheses, so split after the last ')'.
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    let cmdline = "";
    try {
      cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\0", " ").trim();
    } catch {
      // Exited in between.
    }
    return { pid, ppid: Number(rest[1]), state: rest[0]!, cmdline };
  } catch {
    return null;
  }
}

/** Every live process on the machine. */
export function processes(): ProcInfo[] {
  return readdirSync("/proc")
    .filter((name) => /^\d+$/.test(name))
    .map((name) => readProc(Number(name)))
    .filter((p): p is ProcInfo => p !== null);
}

/**
 * The pids below `pid` (children, grandchildren, …), not `pid` itself.
 *
 * @example
 * ```ts
 * const tree = descendants(launcher.pid!); // reaper, wrangler, workerd, …
 * ```
 */
export function descendants(pid: number): ProcInfo[] {
  const all = processes();
  const out: ProcInfo[] = [];
  const frontier = [pid];
  while (frontier.length) {
    const parent = frontier.pop()!;
    for (const p of all)
      if (p.ppid === parent) {
        out.push(p);
        frontier.push(p.pid);
      }
  }
  return out;
}

/** True when `pid` no longer runs (no /proc entry, or a zombie nobody has reaped yet). */
export function isGone(pid: number): boolean {
  const p = readProc(pid);
  return p === null || p.state === "Z";
}

/**
 * Waits until every pid is gone; returns those still running after `timeoutMs` (empty = all gone).
 *
 * @example
 * ```ts
 * expect(await waitGone(tree.map((p) => p.pid), 10_000)).toEqual([]);
 * ```
 */
export async function waitGone(pids: number[], timeoutMs: number): Promise<ProcInfo[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const left = pids.filter((pid) => !isGone(pid));
    if (left.length === 0 || Date.now() > until)
      return left.map((pid) => readProc(pid)).filter((p): p is ProcInfo => p !== null);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** True when nothing listens on `127.0.0.1:port` (we could bind it). */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once("error", () => resolve(false));
    server.listen(port, "127.0.0.1", () => server.close(() => resolve(true)));
  });
}

/**
 * The pids below `pid` once there are at least `min` of them (throws after `timeoutMs`).
 *
 * @example
 * ```ts
 * const tree = await waitForTree(launcher.pid!, 3); // reaper, child, grandchild
 * ```
 */
export async function waitForTree(pid: number, min: number, timeoutMs = 10_000): Promise<number[]> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const tree = descendants(pid).map((p) => p.pid);
    if (tree.length >= min) return tree;
    if (Date.now() > until) throw new Error(`pid ${pid} has ${tree.length} descendants, expected ${min}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** CPU time used so far and resident memory of one process, from `/proc/<pid>/stat`. */
export interface ProcessUsage {
  pid: number;
  /** Executable name (`comm`), e.g. `workerd`. */
  comm: string;
  /** User plus system CPU time of the process itself (seconds). */
  cpuSeconds: number;
  /** Resident set (bytes). */
  rssBytes: number;
}

/** Clock ticks per second of `/proc/<pid>/stat` times (USER_HZ; 100 on every Linux we run on). */
const USER_HZ = 100;

/**
 * CPU time and resident memory of a live process (null once it is gone). Process accounting,
 * not wall time: what a benchmark charges to one process of a stack sharing the machine.
 *
 * @example
 * ```ts
 * const workerd = descendants(cp.pid!).find((p) => p.cmdline.includes("workerd"))!;
 * const before = usageOf(workerd.pid)!; // … work … then usageOf(workerd.pid)!.cpuSeconds - before.cpuSeconds
 * ```
 */
export function usageOf(pid: number): ProcessUsage | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const comm = stat.slice(stat.indexOf("(") + 1, stat.lastIndexOf(")"));
    // After `pid (comm) `: state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime stime … rss is the 22nd field after comm (pages).
    const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    const utime = Number(rest[11]);
    const stime = Number(rest[12]);
    const rssPages = Number(rest[21]);
    return { pid, comm, cpuSeconds: (utime + stime) / USER_HZ, rssBytes: rssPages * 4096 };
  } catch {
    return null;
  }
}
