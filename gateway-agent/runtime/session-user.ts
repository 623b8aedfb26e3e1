/**
 * Session users: when the gateway runs as root, every command of a `local` session runs as an
 * unprivileged uid of its own, never as root.
 *
 * Why a real host uid per session and not a user namespace mapped to the gateway's uid: a
 * namespace mapped to root outside is still root to the kernel's accounting (`RLIMIT_NPROC` does
 * not apply to the host's root, so a fork bomb is not contained without a cgroup) and to every
 * file owned by root that the sandbox can see (root's 0600 files stay readable). A uid of its own
 * gives the session nothing of root's: it cannot read the gateway's files or `/proc/<pid>/environ`,
 * cannot signal other sessions' processes, cannot reach root-only Unix sockets, and its hard
 * `RLIMIT_NPROC` bounds its processes, on any kernel, with or without cgroups.
 *
 * - **Allocation**: uids come from a range ({@link DEFAULT_SESSION_UIDS}, unused by distributions
 *   and systemd) and are claimed host-wide in a root-only registry folder (`/run/polar-session-uids`,
 *   one folder per uid naming the owning gateway's pid and start time), so several gateways on one
 *   host never share one. A claim left by a gateway that died is taken over, after the processes
 *   still running as that uid are killed. A uid named in `/etc/passwd` is skipped.
 * - **Dropping privileges**: `setpriv --reuid --regid --clear-groups` with no inheritable or
 *   bounding capabilities and `no_new_privs` (setuid binaries cannot give root back), run as the
 *   last step before the command: inside bubblewrap (which sets up its mounts as root), or
 *   directly without it.
 * - **Files**: the session folder belongs to the session's uid. Whatever the gateway writes into it
 *   between commands (uploads, harness config files, a grader's folders) is handed over before the
 *   next command ({@link handOver}); entries the gateway makes writable for everyone on purpose
 *   (mode `o+w`, e.g. a `0733` report folder the session may write into but not list) keep their
 *   owner. A folder kept after the session is handed back to the gateway's uid.
 * - **Leftovers**: after each command (and at teardown) every process still running as the
 *   session's uid is killed ({@link killUserProcesses}), including those that left the command's
 *   process group.
 *
 * @module
 */
import { execFile, execFileSync } from "node:child_process";
import { randomBytes, randomInt } from "node:crypto";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";

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

/** Name of the session user inside the bubblewrap sandbox (`/etc/passwd` shown there). */
export const SESSION_USER_NAME = "polar-session";

/** Where claims are kept (root-only); `os.tmpdir()` when `/run` is missing. */
export const SESSION_UID_REGISTRY = existsSync("/run")
  ? "/run/polar-session-uids"
  : path.join(tmpdir(), "polar-session-uids");

/** A session's own unprivileged user. */
export interface SessionUser {
  uid: number;
  gid: number;
  name: string;
  /** Absolute `setpriv` path: commands start with {@link dropPrivileges}(user). */
  setpriv: string;
  /** Absolute `bash` path (the first stage after the drop: no PATH lookup of the session's). */
  bash: string;
}

/** A claimed uid, released at teardown. */
export interface UidClaim {
  uid: number;
  release(): Promise<void>;
}

/** True when every id of `range` is mapped in this process's user namespace (`/proc/self/{uid,gid}_map`). */
function rangeMapped(range: UidRange): boolean {
  const covered = (file: string) => {
    let text: string;
    try {
      text = readFileSync(file, "utf8");
    } catch {
      return true; // no user namespaces here: every id exists
    }
    return text
      .trim()
      .split("\n")
      .some((line) => {
        const [inside, , count] = line.trim().split(/\s+/).map(Number);
        return (
          inside !== undefined &&
          count !== undefined &&
          inside <= range.first &&
          range.first + range.count <= inside + count
        );
      });
  };
  return covered("/proc/self/uid_map") && covered("/proc/self/gid_map");
}

const mappedRanges = new Map<string, boolean>();

/**
 * True when this gateway must (and can) run sessions as users of their own: it runs as root and
 * the uids of `range` exist in its user namespace (a root gateway in a container whose namespace
 * maps only a few ids is not the host's root, and keeps its sessions as its own uid).
 *
 * @example
 * ```ts
 * if (switchesUsers()) user = await claimSessionUid();
 * ```
 */
export function switchesUsers(range: UidRange = DEFAULT_SESSION_UIDS): boolean {
  if (process.getuid?.() !== 0) return false;
  const key = `${range.first}+${range.count}`;
  let mapped = mappedRanges.get(key);
  if (mapped === undefined) {
    mapped = rangeMapped(range);
    mappedRanges.set(key, mapped);
  }
  return mapped;
}

/**
 * Run by the session user right after the privilege drop (`bash --noprofile --norc -c`): drops
 * the clean environment the root stages ran with, exports the session's, read NUL-separated
 * from fd 3 (names bash cannot export are skipped), and `exec`s `bash -c "$1"`. The session's
 * environment never reaches a process running as root (no `LD_PRELOAD`, `BASH_ENV`, exported
 * functions or a `PATH` of the session's making for the gateway's wrappers), and never a
 * command line (others may read those).
 */
export const ENV_LOADER =
  'for v in $(compgen -e); do unset "$v"; done; ' +
  // biome-ignore lint/suspicious/noTemplateCurlyInString: a shell parameter expansion
  'while IFS= read -r -d "" kv; do n=${kv%%=*}; [[ $n =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] && export "$kv"; done <&3; ' +
  'unset kv n; exec 3<&-; exec bash -c "$1"';

/** The environment of the stages that still run as root (the wrappers, bubblewrap, setpriv). */
export const ROOT_STAGE_ENV: Record<string, string> = {
  PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
};

/**
 * The argv that runs `command` as `user` with the environment given on fd 3: setpriv, then
 * {@link ENV_LOADER}.
 *
 * @example
 * ```ts
 * runProcess(sessionCommand(user, "make"), { env: ROOT_STAGE_ENV, envFd: sessionEnv, … });
 * ```
 */
export function sessionCommand(user: SessionUser, command: string): string[] {
  return [
    ...dropPrivileges(user),
    user.bash,
    "--noprofile",
    "--norc",
    "-c",
    ENV_LOADER,
    "polar-env",
    command,
  ];
}

let setprivFound: string | null | undefined;

/**
 * The absolute path of `setpriv` (util-linux), or null when it is missing.
 *
 * @example
 * ```ts
 * const setpriv = setprivPath() ?? fail("install util-linux");
 * ```
 */
export function setprivPath(): string | null {
  if (setprivFound === undefined) setprivFound = findTool("setpriv");
  return setprivFound;
}

/** The absolute path of a system tool that runs (`--version`), or null. */
export function findTool(name: string): string | null {
  for (const dir of ["/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"]) {
    const candidate = path.join(dir, name);
    if (!existsSync(candidate)) continue;
    try {
      execFileSync(candidate, ["--version"], { stdio: "ignore" });
      return candidate;
    } catch {
      // Not runnable: try the next.
    }
  }
  return null;
}

/**
 * The argv prefix that runs the rest of an argv as `user`: no supplementary groups, no
 * inheritable, ambient or bounding capabilities, `no_new_privs`.
 *
 * @example
 * ```ts
 * [...dropPrivileges(user), "bash", "-c", "make"];
 * ```
 */
export function dropPrivileges(user: SessionUser): string[] {
  return [
    user.setpriv,
    "--reuid",
    String(user.uid),
    "--regid",
    String(user.gid),
    "--clear-groups",
    "--inh-caps=-all",
    "--bounding-set=-all",
    "--no-new-privs",
    "--",
  ];
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

/** `find` arguments that give `uid:gid` what {@link handOver} describes. */
function handOverArgs(dir: string, uid: number, gid: number): string[] {
  return [
    dir,
    "(",
    "-type",
    "d",
    "-o",
    "(",
    "-type",
    "f",
    "-links",
    "1",
    ")",
    ")",
    "!",
    "-uid",
    String(uid),
    "!",
    "-perm",
    "-0002",
    "-execdir",
    "chown",
    "-h",
    `${uid}:${gid}`,
    "{}",
    "+",
  ];
}

/**
 * Gives `uid:gid` every folder and single-linked regular file under `dir` (and `dir` itself)
 * that has another owner, except entries writable by everyone (`o+w`: shared on purpose) and
 * symlinks. Runs `find … -execdir chown -h`, which acts on each entry from its own folder, so a
 * path swapped for a symlink while it runs cannot redirect the change outside `dir`; files with
 * several links are left alone (a hard link the session made to a file it does not own).
 * Resolves to the error output ("" when all went well).
 *
 * @example
 * ```ts
 * await handOver(runtime.hostDir, user.uid, user.gid);
 * ```
 */
export function handOver(dir: string, uid: number, gid: number): Promise<string> {
  const args = handOverArgs(dir, uid, gid);
  return new Promise((resolve) => {
    // -execdir refuses a PATH with relative entries: give it a plain one.
    execFile("find", args, { env: { PATH: "/usr/bin:/bin" }, timeout: 600_000 }, (err, _out, stderr) =>
      resolve(err ? `${String(stderr).trim() || err.message}`.slice(0, 800) : ""),
    );
  });
}

/**
 * `argv` preceded by {@link handOver}'s `find`, in the same process: `bash` (still the gateway's
 * user) runs `find`, its errors into `errorFile`, then `exec`s `argv`. One fork from the gateway
 * instead of two: each fork of a gateway holding a tokenizer copies hundreds of MB of page
 * tables (10–35 ms on the CI machine), which at hundreds of sessions was most of its CPU.
 *
 * @example
 * ```ts
 * runProcess(handOverThen(user, hostDir, `${privateDir}/handover.err`, argv), opts);
 * ```
 */
export function handOverThen(
  user: Pick<SessionUser, "uid" | "gid" | "bash">,
  dir: string,
  errorFile: string,
  argv: string[],
): string[] {
  const find = handOverArgs(dir, user.uid, user.gid);
  return [
    user.bash,
    "--noprofile",
    "--norc",
    "-c",
    // -execdir refuses a PATH with relative entries: give it a plain one.
    `PATH=/usr/bin:/bin find "\${@:1:${find.length}}" 2>"$0"; shift ${find.length}; exec "$@"`,
    errorFile,
    ...find,
    ...argv,
  ];
}

/**
 * Writes `passwd` and `group` files for the sandbox into `dir`: the host's, with the session
 * user (home `home`) in place of any entry of the same name or id, so tools that look the user
 * up (`whoami`, Node's `os.userInfo()`, git, ssh) find it.
 *
 * @example
 * ```ts
 * const { passwd, group } = await writeIdentityFiles(privateDir, user, `${hostDir}/home`);
 * ```
 */
export async function writeIdentityFiles(
  dir: string,
  user: Pick<SessionUser, "uid" | "gid" | "name">,
  home: string,
): Promise<{ passwd: string; group: string }> {
  const keep = (file: string, idField: number, id: number) => {
    let text = "";
    try {
      text = readFileSync(file, "utf8");
    } catch {
      // None on the host: only the session's entry.
    }
    return text
      .split("\n")
      .filter((line) => {
        const f = line.split(":");
        return line !== "" && f[0] !== user.name && Number(f[idField]) !== id;
      })
      .join("\n");
  };
  const passwd = path.join(dir, "passwd");
  const group = path.join(dir, "group");
  const passwdText = keep("/etc/passwd", 2, user.uid);
  const groupText = keep("/etc/group", 2, user.gid);
  const entry = `${user.name}:x:${user.uid}:${user.gid}:Polar session:${home}:/bin/bash\n`;
  await writeFile(passwd, `${passwdText ? `${passwdText}\n` : ""}${entry}`, { mode: 0o644 });
  await writeFile(group, `${groupText ? `${groupText}\n` : ""}${user.name}:x:${user.gid}:\n`, {
    mode: 0o644,
  });
  return { passwd, group };
}
