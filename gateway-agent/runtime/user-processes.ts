/**
 * The processes running as a session's uid: found by one batched scan of `/proc`, and killed
 * after each command and at teardown, including those that left the command's process group.
 *
 * @module
 */
import { execFile } from "node:child_process";
import { readdirSync, readFileSync, statSync } from "node:fs";

/**
 * Live (not zombie) processes whose real uid is `uid`, from `/proc`.
 *
 * One scan of `/proc` answers every call made within {@link PROC_SCAN_BATCH_MS} of it: sessions
 * ending together each ask after their command, and a scan per ask reads every process's status
 * (1,000 sessions: thousands of processes, read a thousand times). A call never gets a scan that
 * started before it.
 *
 * @example
 * ```ts
 * if ((await userPids(user.uid)).length > 0) await killUserProcesses(user.uid);
 * ```
 */
export function userPids(uid: number): Promise<number[]> {
  if (!scan) {
    const wanted = new Set<number>();
    const result = new Promise<Map<number, number[]>>((resolve) =>
      setTimeout(() => {
        scan = null;
        resolve(scanProcesses(wanted));
      }, PROC_SCAN_BATCH_MS),
    );
    scan = { wanted, result };
  }
  scan.wanted.add(uid);
  return scan.result.then((found) => found.get(uid) ?? []);
}

/** How long a `/proc` scan waits for more callers to answer at once (ms). */
export const PROC_SCAN_BATCH_MS = 5;

/** The scan that the next calls of {@link userPids} join. */
let scan: { wanted: Set<number>; result: Promise<Map<number, number[]>> } | null = null;

/**
 * The live processes of each uid in `wanted`. Synchronous on purpose: procfs reads never block on
 * a disk, and a few hundred small reads take a millisecond or two where as many promises take a
 * hundred on a loaded host. A process's folder is owned by its effective uid, or by root when it
 * is not dumpable: only folders owned by root or by a wanted uid have their status read.
 */
function scanProcesses(wanted: Set<number>): Map<number, number[]> {
  const found = new Map<number, number[]>();
  let names: string[] = [];
  try {
    names = readdirSync("/proc");
  } catch {
    return found;
  }
  for (const pid of names) {
    if (!/^\d+$/.test(pid)) continue;
    let status: string;
    try {
      const owner = statSync(`/proc/${pid}`).uid;
      if (owner !== 0 && !wanted.has(owner)) continue;
      status = readFileSync(`/proc/${pid}/status`, "utf8");
    } catch {
      continue; // gone meanwhile
    }
    // A zombie is dead already (its parent has not reaped it yet).
    if (/^State:\s+[ZX]/m.test(status)) continue;
    const uid = Number(/^Uid:\s+(\d+)/m.exec(status)?.[1] ?? -1);
    if (wanted.has(uid)) found.set(uid, [...(found.get(uid) ?? []), Number(pid)]);
  }
  return found;
}

const runAs = (uid: number, gid: number, file: string, args: string[]) =>
  new Promise<void>((resolve) => {
    execFile(file, args, { uid, gid, env: { PATH: "/usr/bin:/bin" }, timeout: 10_000 }, () => resolve());
  });

/**
 * Kills every process whose real uid is `uid`: `kill -KILL -1` run as that uid (which reaches
 * exactly its processes, in every PID namespace below the gateway's), repeated while a scan of
 * `/proc` still finds one (a process forking while the signal went round). Resolves to the
 * number of rounds that found processes.
 *
 * @example
 * ```ts
 * await killUserProcesses(user.uid);
 * ```
 */
export async function killUserProcesses(uid: number): Promise<number> {
  let rounds = 0;
  for (; rounds < 50; rounds++) {
    if ((await userPids(uid)).length === 0) return rounds;
    await runAs(uid, uid, "bash", ["-c", "kill -KILL -1 2>/dev/null; exit 0"]);
    if (rounds > 0) await new Promise((r) => setTimeout(r, 10 * rounds));
  }
  return rounds;
}
