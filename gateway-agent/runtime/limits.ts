/**
 * Resource limits of the `local` runtime (`runtime.cpus`, `runtime.memory_mb`, plus a process
 * cap against fork bombs), enforced with the best mechanism the host allows, detected once per
 * gateway process:
 *
 * 1. **cgroup v2** — a child of the gateway's own cgroup (from `/proc/self/cgroup`, `0::` line)
 *    with the `memory`, `cpu` and `pids` controllers: `memory.max`, `memory.swap.max 0`,
 *    `cpu.max`, `pids.max`; OOM kills read from `memory.events`.
 * 2. **cgroup v1** — per-controller hierarchies (`memory`, `cpu`, `cpuacct`, `pids`), each under
 *    the gateway's own cgroup in that hierarchy: `memory.limit_in_bytes` (+ `memsw` = same, no
 *    swap), `cpu.cfs_quota_us`/`cpu.cfs_period_us`, `pids.max`; OOM kills from
 *    `memory.oom_control` (`oom_kill`, kernels ≥ 4.13).
 * 3. **rlimits** — only `RLIMIT_NPROC` and `RLIMIT_NOFILE` (set by `ulimit` in the wrapper shell).
 *    Memory and CPU are NOT enforced (RLIMIT_AS would kill Node/Go harnesses that merely reserve
 *    large virtual ranges) and the runtime says so loudly.
 *
 * `RLIMIT_NPROC` counts the processes of a real uid, and the kernel never applies it to root. A
 * session with a uid of its own (the gateway runs as root, see `session-user.ts`) gets it as a
 * HARD limit of `maxPids` (the session cannot raise it): a per-session process cap on every host,
 * cgroups or not. Otherwise (the session shares the gateway's uid) only a soft, host-wide brake
 * of {@link RLIMIT_NPROC_CAP} is set.
 *
 * Every command joins its session's cgroup through a tiny `bash` wrapper (bash, not `sh`: dash's
 * `ulimit` has no `-u`) that writes its own
 * pid (`$$`) to `cgroup.procs` and then `exec`s the command: the harness is inside the limits from
 * its first instruction, and nothing it forks can escape in a window between spawn and a later
 * write by the gateway.
 *
 * @module
 */
import { existsSync, mkdirSync, readdirSync, readFileSync, rmdirSync, writeFileSync } from "node:fs";
import { readFile, rmdir, writeFile } from "node:fs/promises";
import path from "node:path";

/** Processes (tasks) one session may have at once under cgroups (`pids.max`). */
export const SESSION_MAX_PIDS = 4096;
/** Scheduler period for `cpus` (µs): quota = cpus × period. */
export const CPU_PERIOD_US = 100_000;
/** RLIMIT_NPROC set by the rlimit fallback (per user, host-wide: a fork-bomb brake, not a quota). */
export const RLIMIT_NPROC_CAP = 16_384;
/** RLIMIT_NOFILE set in every local command's wrapper. */
export const RLIMIT_NOFILE_CAP = 65_536;

/** Mechanism in force on this host. */
export type LimitMechanism = "cgroup2" | "cgroup1" | "rlimit";

/** What {@link detectLimits} found. */
export interface LimitSupport {
  mechanism: LimitMechanism;
  /** One-line human description (logged at start, shown on `/health`). */
  detail: string;
  /** cgroup folders that hold the session cgroups: one (v2) or one per v1 controller. */
  parents: Partial<Record<"unified" | "memory" | "cpu" | "cpuacct" | "pids", string>>;
}

const CGROUP_ROOT = "/sys/fs/cgroup";

/** `/proc/self/cgroup` → controller list → path. */
function ownCgroups(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync("/proc/self/cgroup", "utf8").split("\n")) {
    const m = /^\d+:([^:]*):(.*)$/.exec(line);
    if (!m) continue;
    for (const c of (m[1] ?? "").split(",")) out.set(c, m[2] ?? "/");
  }
  return out;
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

/** Removes empty folders left by gateways that died without cleaning up (SIGKILL, crash). */
function sweepStale(base: string): void {
  let names: string[];
  try {
    names = readdirSync(base);
  } catch {
    return;
  }
  for (const name of names) {
    const pid = Number(/^polar-gateway-(\d+)$/.exec(name)?.[1] ?? Number.NaN);
    if (!Number.isInteger(pid) || pid === process.pid || alive(pid)) continue;
    const dir = path.join(base, name);
    for (const child of readdirSafe(dir)) {
      try {
        rmdirSync(path.join(dir, child));
      } catch {
        // A control file, or a session cgroup with processes still in it: left alone.
      }
    }
    try {
      rmdirSync(dir);
    } catch {
      // Not empty: left alone.
    }
  }
}

function readdirSafe(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((d) => d.isDirectory())
      .map((d) => d.name);
  } catch {
    return [];
  }
}

/** Creates a folder for this gateway under `base`; null when the kernel refuses. */
function makeParent(base: string): string | null {
  sweepStale(base);
  const dir = path.join(base, `polar-gateway-${process.pid}`);
  try {
    mkdirSync(dir, { recursive: false });
    return dir;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "EEXIST") return dir;
    return null;
  }
}

function tryV2(own: Map<string, string>): LimitSupport | null {
  const rel = own.get("");
  if (rel === undefined) return null;
  // Pure v2 hosts mount it at /sys/fs/cgroup; hybrid hosts at /sys/fs/cgroup/unified.
  const mount = existsSync(path.join(CGROUP_ROOT, "cgroup.controllers"))
    ? CGROUP_ROOT
    : path.join(CGROUP_ROOT, "unified");
  const base = path.join(mount, rel);
  const want = ["memory", "cpu", "pids"];
  try {
    const available = readFileSync(path.join(base, "cgroup.controllers"), "utf8").trim().split(/\s+/);
    if (!want.every((c) => available.includes(c))) return null;
    const parent = makeParent(base);
    if (!parent) return null;
    // Controllers must be enabled in every ancestor's subtree_control to reach the sessions.
    try {
      writeFileSync(path.join(base, "cgroup.subtree_control"), want.map((c) => `+${c}`).join(" "));
      writeFileSync(path.join(parent, "cgroup.subtree_control"), want.map((c) => `+${c}`).join(" "));
    } catch {
      rmdirSync(parent);
      return null;
    }
    return {
      mechanism: "cgroup2",
      detail: `cgroup v2 under ${parent}: memory.max, cpu.max, pids.max=${SESSION_MAX_PIDS}`,
      parents: { unified: parent },
    };
  } catch {
    return null;
  }
}

function tryV1(own: Map<string, string>): LimitSupport | null {
  const parents: LimitSupport["parents"] = {};
  for (const c of ["memory", "cpu", "cpuacct", "pids"] as const) {
    const rel = own.get(c);
    // The hierarchy's mount point is named after its controllers (`cpu,cpuacct` when combined).
    const mount = [c, "cpu,cpuacct", "cpuacct,cpu"]
      .map((n) => path.join(CGROUP_ROOT, n))
      .find((p) => path.basename(p).split(",").includes(c) && existsSync(path.join(p, "cgroup.procs")));
    if (rel === undefined || !mount) return null;
    const parent = makeParent(path.join(mount, rel));
    if (!parent) return null;
    parents[c] = parent;
  }
  return {
    mechanism: "cgroup1",
    detail: `cgroup v1 (memory, cpu, cpuacct, pids) under ${parents.memory}: memory.limit_in_bytes, cpu.cfs_quota_us, pids.max=${SESSION_MAX_PIDS}`,
    parents,
  };
}

let detected: LimitSupport | null = null;

/** The fallback: no writable cgroup (also what a gateway told not to use cgroups gets). */
export const RLIMIT_ONLY: LimitSupport = {
  mechanism: "rlimit",
  detail: `rlimits only (RLIMIT_NPROC≤${RLIMIT_NPROC_CAP}, or a hard per-session cap for session users; RLIMIT_NOFILE≤${RLIMIT_NOFILE_CAP}); runtime.memory_mb and runtime.cpus are NOT enforced: no writable cgroup`,
  parents: {},
};

/**
 * Finds (once per process) how local sessions can be limited here.
 *
 * @example
 * ```ts
 * const s = detectLimits();
 * logger.info("local runtime limits", { mechanism: s.mechanism, detail: s.detail });
 * ```
 */
export function detectLimits(): LimitSupport {
  if (detected) return detected;
  let own: Map<string, string> | null = null;
  try {
    own = ownCgroups();
  } catch {
    own = null;
  }
  detected = (own && (tryV2(own) ?? tryV1(own))) ?? RLIMIT_ONLY;
  // Empty cgroups outlive their creator: remove this gateway's folders when it exits (sessions
  // are torn down first; a non-empty one is left, and a restart makes a fresh one by pid).
  if (Object.keys(detected.parents).length > 0) process.once("exit", releaseLimits);
  return detected;
}

/**
 * Removes this process's cgroup folders (once every session is torn down); the next
 * {@link detectLimits} creates them again.
 *
 * @example
 * ```ts
 * afterAll(releaseLimits);
 * ```
 */
export function releaseLimits(): void {
  for (const p of Object.values(detected?.parents ?? {})) {
    try {
      rmdirSync(p);
    } catch {
      // Still busy or gone.
    }
  }
  detected = null;
}

/** Limits asked by a session. */
export interface LimitRequest {
  cpus?: number;
  memory_mb?: number;
  /** Process cap under cgroups, and of a session user (default {@link SESSION_MAX_PIDS}). */
  maxPids?: number;
  /**
   * The session's commands run as a uid of their own: `RLIMIT_NPROC` becomes a hard limit of
   * `maxPids` (see the module notes) instead of the soft host-wide brake.
   */
  ownUid?: boolean;
}

/**
 * The wrapper script. `$$` is the shell's pid, which `exec` hands on to the command: writing it
 * first puts the command (and everything it forks) in the cgroup before it runs a single
 * instruction.
 */
function joinScript(request: LimitRequest): string {
  const cap = request.maxPids ?? SESSION_MAX_PIDS;
  const nproc = request.ownUid
    ? // Soft and hard (the session's uid can never raise it), never above a hard limit already set.
      `h=$(ulimit -H -u); if [ "$h" != unlimited ] && [ "$h" -lt ${cap} ]; then c=$h; else c=${cap}; fi; ` +
      'ulimit -u "$c" || { echo "polar: cannot set RLIMIT_NPROC" >&2; exit 125; }; '
    : `u=$(ulimit -u); if [ "$u" = unlimited ] || [ "$u" -gt ${RLIMIT_NPROC_CAP} ]; then ulimit -S -u ${RLIMIT_NPROC_CAP} 2>/dev/null; fi; `;
  return (
    'p=$$; for f; do shift; [ "$f" = -- ] && break; echo "$p" > "$f" || { echo "polar: cannot join cgroup $f" >&2; exit 125; }; done; ' +
    `n=$(ulimit -n); [ "$n" = unlimited ] || [ "$n" -gt ${RLIMIT_NOFILE_CAP} ] && ulimit -S -n ${RLIMIT_NOFILE_CAP}; ` +
    nproc +
    'exec "$@"'
  );
}

/**
 * One session's limits: its cgroup(s), the wrapper every command runs through, OOM detection and
 * removal at teardown.
 *
 * @example
 * ```ts
 * const lim = await SessionLimits.create("b1.t1.0", { cpus: 1, memory_mb: 2048 });
 * const argv = lim.wrap(["bash", "-c", "make"]);
 * const oom = await lim.oomKills();
 * await lim.destroy();
 * ```
 */
export class SessionLimits {
  private constructor(
    readonly support: LimitSupport,
    readonly request: LimitRequest,
    /** The session's cgroup folders (empty under the rlimit fallback). */
    readonly dirs: Partial<Record<keyof LimitSupport["parents"], string>>,
  ) {}

  /** Creates the session's cgroups with the requested limits. */
  static async create(name: string, request: LimitRequest, support = detectLimits()): Promise<SessionLimits> {
    const dirs: SessionLimits["dirs"] = {};
    for (const [c, parent] of Object.entries(support.parents) as [keyof LimitSupport["parents"], string][]) {
      const dir = path.join(parent, name);
      mkdirSync(dir, { recursive: true });
      dirs[c] = dir;
    }
    const lim = new SessionLimits(support, request, dirs);
    await lim.apply();
    return lim;
  }

  private async apply(): Promise<void> {
    const { cpus, memory_mb } = this.request;
    const pids = String(this.request.maxPids ?? SESSION_MAX_PIDS);
    const bytes = memory_mb !== undefined ? String(memory_mb * 1024 * 1024) : undefined;
    const quota = cpus !== undefined ? String(Math.max(1000, Math.round(cpus * CPU_PERIOD_US))) : undefined;
    const u = this.dirs.unified;
    if (u) {
      await writeFile(path.join(u, "pids.max"), pids);
      if (bytes) {
        await writeFile(path.join(u, "memory.max"), bytes);
        // Absent when the kernel has no swap accounting; then there is no swap to limit.
        if (existsSync(path.join(u, "memory.swap.max")))
          await writeFile(path.join(u, "memory.swap.max"), "0");
      }
      if (quota) await writeFile(path.join(u, "cpu.max"), `${quota} ${CPU_PERIOD_US}`);
      return;
    }
    if (this.dirs.pids) await writeFile(path.join(this.dirs.pids, "pids.max"), pids);
    if (bytes && this.dirs.memory) {
      await writeFile(path.join(this.dirs.memory, "memory.limit_in_bytes"), bytes);
      // memsw = memory + swap; equal to the memory limit means no swap (must be set after it).
      const memsw = path.join(this.dirs.memory, "memory.memsw.limit_in_bytes");
      if (existsSync(memsw)) await writeFile(memsw, bytes);
    }
    if (quota && this.dirs.cpu) {
      await writeFile(path.join(this.dirs.cpu, "cpu.cfs_period_us"), String(CPU_PERIOD_US));
      await writeFile(path.join(this.dirs.cpu, "cpu.cfs_quota_us"), quota);
    }
  }

  /** True when memory and CPU requests are really enforced. */
  get enforced(): boolean {
    return this.support.mechanism !== "rlimit";
  }

  /** `argv` behind the join-and-exec wrapper. */
  wrap(argv: string[]): string[] {
    const procs = Object.values(this.dirs).map((d) => path.join(d, "cgroup.procs"));
    return ["bash", "-c", joinScript(this.request), "polar-limits", ...procs, "--", ...argv];
  }

  /** OOM kills so far in the session's memory cgroup (0 without one). */
  async oomKills(): Promise<number> {
    const file = this.dirs.unified
      ? path.join(this.dirs.unified, "memory.events")
      : this.dirs.memory
        ? path.join(this.dirs.memory, "memory.oom_control")
        : null;
    if (!file) return 0;
    const text = await readFile(file, "utf8").catch(() => "");
    return Number(/^oom_kill (\d+)$/m.exec(text)?.[1] ?? 0);
  }

  /** CPU used by the session (µs) and scheduler periods elapsed, for measuring the quota. */
  async cpuStat(): Promise<{ usageUsec: number; periods: number }> {
    const read = (d: string | undefined, f: string) =>
      d ? readFile(path.join(d, f), "utf8").catch(() => "") : Promise.resolve("");
    const field = (text: string, key: string) =>
      Number(new RegExp(`^${key} (\\d+)$`, "m").exec(text)?.[1] ?? 0);
    if (this.dirs.unified) {
      const s = await read(this.dirs.unified, "cpu.stat");
      return { usageUsec: field(s, "usage_usec"), periods: field(s, "nr_periods") };
    }
    const usageNs = Number((await read(this.dirs.cpuacct, "cpuacct.usage")).trim() || 0);
    const periods = field(await read(this.dirs.cpu, "cpu.stat"), "nr_periods");
    return { usageUsec: Math.round(usageNs / 1000), periods };
  }

  /** Forks refused because the process cap was reached (`pids.events` `max`). */
  async forksRefused(): Promise<number> {
    const dir = this.dirs.unified ?? this.dirs.pids;
    if (!dir) return 0;
    const text = await readFile(path.join(dir, "pids.events"), "utf8").catch(() => "");
    return Number(/^max (\d+)$/m.exec(text)?.[1] ?? 0);
  }

  /** Kills whatever is left in the cgroups and removes them. */
  async destroy(): Promise<void> {
    for (const dir of Object.values(this.dirs)) {
      // v2 has a one-shot kill switch; v1 needs a kill per listed pid (repeated: a forking
      // process may add entries between read and kill).
      if (existsSync(path.join(dir, "cgroup.kill")))
        await writeFile(path.join(dir, "cgroup.kill"), "1").catch(() => {});
      for (let round = 0; round < 50; round++) {
        const pids = (await readFile(path.join(dir, "cgroup.procs"), "utf8").catch(() => ""))
          .split("\n")
          .filter(Boolean)
          .map(Number);
        if (pids.length === 0) break;
        for (const pid of pids) {
          try {
            process.kill(pid, "SIGKILL");
          } catch {
            // Gone already.
          }
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      await rmdir(dir).catch(() => {});
    }
  }
}
