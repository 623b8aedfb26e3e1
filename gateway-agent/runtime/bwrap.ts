/**
 * Bubblewrap argument construction for the `local` runtime: the host's filesystem read-only, the
 * session folder the only writable place, a private /tmp, /proc and PID namespace, the gateway's
 * work root (other sessions, the result journal) and the gateway user's home hidden, and no
 * network when the task says `allow_internet: false`.
 *
 * With a session user (the gateway runs as root) bubblewrap still sets the sandbox up as root, and
 * the command inside starts through `setpriv` as that user (see `session-user.ts`): the private
 * `/tmp` and `/dev/shm` are world-writable (sticky), the session sees a `passwd`/`group` naming
 * its user, and the gateway's home is hidden even when it holds the work root.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";
import { type SessionUser, sessionCommand, switchesUsers } from "./session-user";

/** Where the proxy socket appears inside a network-less sandbox (a private tmpfs). */
export const SANDBOX_PROXY_SOCKET = "/tmp/.polar-proxy.sock";
/**
 * Where the proxy shim appears (read-only) in a session user's sandbox: it starts as root there,
 * so it must not be a file the session can write.
 */
export const SANDBOX_SHIM = "/tmp/.polar-shim.mjs";

/** Inputs of {@link bwrapArgs}. */
export interface BwrapPlan {
  bwrapPath: string;
  /** The session's host folder (bound read-write at the same path). */
  sessionDir: string;
  /** The gateway's work root: hidden behind an empty tmpfs. */
  workRoot: string;
  cwd: string;
  allowInternet: boolean;
  /** With no network: host socket bridged to the proxy, plus the shim that serves it inside. */
  bridge?: { socketPath: string; shimPath: string; proxyPort: number };
  /** The gateway user's home, hidden unless it holds the work root or the node binary. */
  hostHome?: string;
  /**
   * Pre-installed harness CLIs (`POLAR_HARNESS_DIR`): shown read-only even when they sit under
   * the private /tmp or in the hidden home, so the sessions' PATH entry resolves in the sandbox.
   */
  harnessDir?: string;
  /** Size of the private `/tmp` tmpfs (bytes; `runtime.storage_mb`), when bwrap has `--size`. */
  tmpSizeBytes?: number;
  /**
   * Run the command as this unprivileged user (the gateway is root), with these `passwd` and
   * `group` files shown at `/etc/passwd` and `/etc/group`.
   */
  user?: SessionUser & { passwd?: string; group?: string };
}

const isInside = (child: string, parent: string) => {
  const rel = path.relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
};

/**
 * The tmpfs mounts of a sandbox, in order. With a session user, a mount point inside an earlier
 * tmpfs gets the folders on its way made 0755 first (bubblewrap makes them 0700, which the user
 * cannot pass).
 */
function tmpfsMounts(user: BwrapPlan["user"]) {
  const tmpfs: string[] = [];
  const made = new Set<string>();
  /** The `--dir` arguments for the folders bubblewrap would create on the way to `dest`. */
  const parents = (dest: string): string[] => {
    const base = user && [...tmpfs].reverse().find((m) => m !== dest && isInside(dest, m));
    if (!base) return [];
    const out: string[] = [];
    let dir = base;
    for (const part of path.relative(base, path.dirname(dest)).split(path.sep).filter(Boolean)) {
      dir = path.join(dir, part);
      if (!made.has(dir)) out.push("--perms", "0755", "--dir", dir);
      made.add(dir);
    }
    return out;
  };
  const mount = (dest: string, modifiers: string[] = []): string[] => {
    const out = [...parents(dest), ...modifiers, "--tmpfs", dest];
    tmpfs.push(dest);
    for (const d of made) if (isInside(d, dest)) made.delete(d);
    return out;
  };
  return { parents, mount };
}

/** The mounts: host read-only, private /dev/shm, /proc and /tmp, what is hidden, what is shown again. */
function mountArgs(plan: BwrapPlan): string[] {
  const user = plan.user;
  const size = plan.tmpSizeBytes !== undefined ? ["--size", String(plan.tmpSizeBytes)] : [];
  // bubblewrap makes its tmpfs mounts root's 0755: a session user needs /tmp and /dev/shm sticky 1777.
  const shared = user ? ["--perms", "1777"] : [];
  const { parents, mount } = tmpfsMounts(user);
  const args = [plan.bwrapPath, "--ro-bind", "/", "/", "--dev", "/dev"];
  if (user) args.push(...shared, ...size, "--tmpfs", "/dev/shm");
  args.push("--proc", "/proc", ...mount("/tmp", [...shared, ...size]), ...mount(plan.workRoot));
  const home = plan.hostHome;
  if (home && user && home !== "/") {
    // A session user could not enter root's home anyway: hide it whole, and show the node binary
    // (the proxy shim's interpreter) again when it is installed there.
    args.push(...mount(home));
    if (isInside(process.execPath, home))
      args.push(...parents(process.execPath), "--ro-bind", process.execPath, process.execPath);
  } else if (home && homeHidden(home, plan.workRoot, plan.bridge?.shimPath)) args.push(...mount(home));
  if (user?.passwd) args.push("--ro-bind", user.passwd, "/etc/passwd");
  if (user?.group) args.push("--ro-bind", user.group, "/etc/group");
  // After the tmpfs mounts that would hide it (a checkout under /tmp or in the home): bwrap
  // creates the mount point inside the fresh tmpfs, and nothing else of what it hides shows.
  // `-try`: a POLAR_HARNESS_DIR that does not exist (nothing installed yet) binds nothing instead
  // of failing every sandboxed command; sessions then simply find no pre-installed CLI.
  if (plan.harnessDir)
    args.push(...parents(plan.harnessDir), "--ro-bind-try", plan.harnessDir, plan.harnessDir);
  args.push(...parents(plan.sessionDir), "--bind", plan.sessionDir, plan.sessionDir);
  return args;
}

/**
 * The full argv that runs `command` with `bash -c` inside the sandbox.
 *
 * @example
 * ```ts
 * const argv = bwrapArgs({ bwrapPath: "bwrap", sessionDir, workRoot, cwd, allowInternet: true }, "make");
 * ```
 */
export function bwrapArgs(plan: BwrapPlan, command: string): string[] {
  const user = plan.user;
  const args = [
    ...mountArgs(plan),
    // Own PID namespace: the harness sees only its own processes, and when bwrap dies the
    // namespace's init dies and the kernel kills everything left inside.
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--chdir",
    plan.cwd,
  ];
  // With a session user the environment comes on fd 3 (see ENV_LOADER), not from bwrap's.
  const inner = user ? sessionCommand(user, command) : ["bash", "-c", command];
  if (plan.allowInternet) return [...args, "--", ...inner];
  args.push("--unshare-net");
  if (!plan.bridge) return [...args, "--", ...inner];
  args.push("--bind", plan.bridge.socketPath, SANDBOX_PROXY_SOCKET);
  // The shim listens as root (any port), then becomes the user; the command drops itself.
  if (user) args.push("--ro-bind", plan.bridge.shimPath, SANDBOX_SHIM);
  return [
    ...args,
    "--",
    process.execPath,
    user ? SANDBOX_SHIM : plan.bridge.shimPath,
    SANDBOX_PROXY_SOCKET,
    String(plan.bridge.proxyPort),
    ...(user ? ["--user", `${user.uid}:${user.gid}`] : []),
    ...inner,
  ];
}

/** True when {@link bwrapArgs} hides the gateway user's `home` (it must not hold what sessions need). */
function homeHidden(home: string, workRoot: string, shimPath?: string): boolean {
  return (
    home !== "/" &&
    !isInside(workRoot, home) &&
    !isInside(process.execPath, home) &&
    !isInside(shimPath ?? "/", home)
  );
}

/**
 * True when a host path is invisible to commands in the sandbox {@link bwrapArgs} builds: under
 * the private `/tmp`, the work root or the hidden home, unless it is under the re-bound harness
 * folder. Used to tell whether a CLI the gateway sees on PATH is usable by sessions.
 *
 * @example
 * ```ts
 * hiddenInSandbox("/root/.npm-global/bin/codex", { workRoot: "/srv/polar", hostHome: "/root" }); // true
 * ```
 */
export function hiddenInSandbox(
  hostPath: string,
  o: { workRoot: string; hostHome?: string; harnessDir?: string; sessionUser?: boolean },
): boolean {
  if (o.harnessDir && isInside(hostPath, o.harnessDir)) return false;
  if (isInside(hostPath, "/tmp") || isInside(hostPath, o.workRoot)) return true;
  // With session users (a root gateway) the home is hidden whole: see bwrapArgs.
  const sessionUser = o.sessionUser ?? switchesUsers();
  const hidden = !!o.hostHome && o.hostHome !== "/" && (sessionUser || homeHidden(o.hostHome, o.workRoot));
  return hidden && isInside(hostPath, o.hostHome as string);
}

/** `probe` run once per bubblewrap path; a probe that throws says false. */
function probeOnce(probe: (bwrapPath: string) => boolean): (bwrapPath: string) => boolean {
  const seen = new Map<string, boolean>();
  return (bwrapPath) => {
    let ok = seen.get(bwrapPath);
    if (ok === undefined) {
      try {
        ok = probe(bwrapPath);
      } catch {
        ok = false;
      }
      seen.set(bwrapPath, ok);
    }
    return ok;
  };
}

const runs = probeOnce((bwrapPath) => {
  execFileSync(bwrapPath, ["--version"], { stdio: "ignore" });
  return true;
});

const knowsSize = probeOnce((bwrapPath) =>
  execFileSync(bwrapPath, ["--help"], { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).includes(
    "--size",
  ),
);

/**
 * True when `bwrapPath` runs here (checked once per path: `bwrap --version`).
 *
 * @example
 * ```ts
 * if (!bwrapAvailable("bwrap")) logger.warn("no sandbox");
 * ```
 */
export function bwrapAvailable(bwrapPath: string): boolean {
  return runs(bwrapPath);
}

/**
 * True when `bwrapPath` knows `--size` (bubblewrap ≥ 0.7), so a tmpfs can be bounded.
 *
 * @example
 * ```ts
 * const tmpSizeBytes = bwrapSupportsSize("bwrap") ? storageMb * 1024 * 1024 : undefined;
 * ```
 */
export function bwrapSupportsSize(bwrapPath: string): boolean {
  return knowsSize(bwrapPath);
}

/** The gateway user's home folder (what {@link bwrapArgs} hides). */
export function gatewayHome(): string | undefined {
  return process.env.HOME ?? os.homedir();
}
