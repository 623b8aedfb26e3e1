/**
 * Session uids: the range they come from and their host-wide claims. Uids are claimed in a
 * root-only registry folder (`/run/polar-session-uids`, one folder per uid naming the owning
 * gateway's pid and start time), so several gateways on one host never share one. A claim left by
 * a gateway that died is taken over, after the processes still running as that uid are killed. A
 * uid named in `/etc/passwd` is skipped.
 *
 * @module
 */
import { randomBytes, randomInt } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { killUserProcesses } from "./user-processes";

/** A uid range: `first` … `first + count - 1` (gid = uid). */
export interface UidRange {
  first: number;
  count: number;
}

/**
 * Session uids when the topology names none: above the ranges distributions, systemd (its
 * container and dynamic users) and common LDAP/AD id maps use, below 2^31.
 */
export const DEFAULT_SESSION_UIDS: UidRange = { first: 2_100_000_000, count: 65_536 };

/** Where claims are kept (root-only); `os.tmpdir()` when `/run` is missing. */
export const SESSION_UID_REGISTRY = existsSync("/run")
  ? "/run/polar-session-uids"
  : path.join(tmpdir(), "polar-session-uids");

/** A claimed uid, released at teardown. */
export interface UidClaim {
  uid: number;
  release(): Promise<void>;
}

/** Start time of a process (clock ticks since boot, `/proc/<pid>/stat` field 22), or null. */
function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

const ownerTag = () => `${process.pid} ${startTime(process.pid) ?? "?"}\n`;

/** True when the claim folder `dir` belongs to a live gateway (or is being written right now). */
async function claimAlive(dir: string): Promise<boolean> {
  const owner = await readFile(path.join(dir, "owner"), "utf8").catch(() => null);
  if (owner === null) {
    // Claimed a moment ago and the owner file not written yet, unless it is old.
    const made = await stat(dir).catch(() => null);
    return made !== null && Date.now() - made.mtimeMs < 60_000;
  }
  const [pid, started] = owner.trim().split(" ");
  return started !== undefined && startTime(Number(pid)) === started;
}

/** uids `/etc/passwd` names (never handed to a session). */
function passwdUids(): Set<number> {
  const out = new Set<number>();
  try {
    for (const line of readFileSync("/etc/passwd", "utf8").split("\n")) {
      const uid = Number(line.split(":")[2]);
      if (Number.isInteger(uid)) out.add(uid);
    }
  } catch {
    // No passwd file: nothing to avoid.
  }
  return out;
}

/**
 * Claims a free uid of `range` host-wide (see the module notes); kills what still runs as a uid
 * taken over from a dead gateway.
 *
 * @example
 * ```ts
 * const claim = await claimSessionUid();
 * // … run the session as claim.uid …
 * await claim.release();
 * ```
 */
export async function claimSessionUid(
  range: UidRange = DEFAULT_SESSION_UIDS,
  registry: string = SESSION_UID_REGISTRY,
): Promise<UidClaim> {
  await mkdir(registry, { recursive: true, mode: 0o700 });
  const taken = passwdUids();
  const start = randomInt(range.count);
  for (let i = 0; i < range.count; i++) {
    const uid = range.first + ((start + i) % range.count);
    if (taken.has(uid)) continue;
    const dir = path.join(registry, String(uid));
    let claimed = await mkdir(dir).then(
      () => true,
      () => false,
    );
    if (!claimed && !(await claimAlive(dir))) {
      // Stale: one gateway wins the rename, then claims the uid afresh like anyone else.
      const grave = path.join(registry, `.stale-${uid}-${randomBytes(4).toString("hex")}`);
      if (
        await rename(dir, grave).then(
          () => true,
          () => false,
        )
      ) {
        await rm(grave, { recursive: true, force: true });
        claimed = await mkdir(dir).then(
          () => true,
          () => false,
        );
      }
    }
    if (!claimed) continue;
    await writeFile(path.join(dir, "owner"), ownerTag());
    // A dead gateway's session may have left processes running as this uid.
    await killUserProcesses(uid);
    return { uid, release: () => rm(dir, { recursive: true, force: true }) };
  }
  throw new Error(`no free session uid in ${range.first}…${range.first + range.count - 1}`);
}
