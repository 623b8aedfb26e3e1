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
 *   and systemd) and are claimed host-wide (`session-uids.ts`).
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
 *   session's uid is killed (`user-processes.ts`), including those that left the command's
 *   process group.
 *
 * @module
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import path from "node:path";
import { DEFAULT_SESSION_UIDS, type UidRange } from "./session-uids";

export {
  claimSessionUid,
  DEFAULT_SESSION_UIDS,
  SESSION_UID_REGISTRY,
  type UidClaim,
  type UidRange,
} from "./session-uids";
export { killUserProcesses, PROC_SCAN_BATCH_MS, userPids } from "./user-processes";

/** Name of the session user inside the bubblewrap sandbox (`/etc/passwd` shown there). */
export const SESSION_USER_NAME = "polar-session";

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
