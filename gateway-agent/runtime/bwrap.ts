/**
 * Bubblewrap argument construction for the `local` runtime: the host's filesystem read-only, the
 * session folder the only writable place, a private /tmp, /proc and PID namespace, the gateway's
 * work root (other sessions, the result journal) and the gateway user's home hidden, and no
 * network when the task says `allow_internet: false`.
 *
 * @module
 */
import { execFileSync } from "node:child_process";
import os from "node:os";
import path from "node:path";

/** Where the proxy socket appears inside a network-less sandbox (a private tmpfs). */
export const SANDBOX_PROXY_SOCKET = "/tmp/.polar-proxy.sock";

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
}

const isInside = (child: string, parent: string) => {
  const rel = path.relative(parent, child);
  return rel === "" || (!rel.startsWith("..") && !path.isAbsolute(rel));
};

/**
 * The full argv that runs `command` with `bash -c` inside the sandbox.
 *
 * @example
 * ```ts
 * const argv = bwrapArgs({ bwrapPath: "bwrap", sessionDir, workRoot, cwd, allowInternet: true }, "make");
 * ```
 */
export function bwrapArgs(plan: BwrapPlan, command: string): string[] {
  const args = [
    plan.bwrapPath,
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    ...(plan.tmpSizeBytes !== undefined ? ["--size", String(plan.tmpSizeBytes)] : []),
    "--tmpfs",
    "/tmp",
    "--tmpfs",
    plan.workRoot,
  ];
  const home = plan.hostHome;
  if (home && homeHidden(home, plan.workRoot, plan.bridge?.shimPath)) args.push("--tmpfs", home);
  // After the tmpfs mounts that would hide it (a checkout under /tmp or in the home): bwrap
  // creates the mount point inside the fresh tmpfs, and nothing else of what it hides shows.
  // `-try`: a POLAR_HARNESS_DIR that does not exist (nothing installed yet) binds nothing instead
  // of failing every sandboxed command; sessions then simply find no pre-installed CLI.
  if (plan.harnessDir) args.push("--ro-bind-try", plan.harnessDir, plan.harnessDir);
  args.push(
    "--bind",
    plan.sessionDir,
    plan.sessionDir,
    // Own PID namespace: the harness sees only its own processes, and when bwrap dies the
    // namespace's init dies and the kernel kills everything left inside.
    "--unshare-pid",
    "--unshare-ipc",
    "--unshare-uts",
    "--die-with-parent",
    "--chdir",
    plan.cwd,
  );
  if (!plan.allowInternet) {
    args.push("--unshare-net");
    if (plan.bridge) {
      args.push("--bind", plan.bridge.socketPath, SANDBOX_PROXY_SOCKET, "--");
      return [
        ...args,
        process.execPath,
        plan.bridge.shimPath,
        SANDBOX_PROXY_SOCKET,
        String(plan.bridge.proxyPort),
        "bash",
        "-c",
        command,
      ];
    }
  }
  return [...args, "--", "bash", "-c", command];
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
  o: { workRoot: string; hostHome?: string; harnessDir?: string },
): boolean {
  if (o.harnessDir && isInside(hostPath, o.harnessDir)) return false;
  if (isInside(hostPath, "/tmp") || isInside(hostPath, o.workRoot)) return true;
  return !!o.hostHome && homeHidden(o.hostHome, o.workRoot) && isInside(hostPath, o.hostHome);
}

let probed: Map<string, boolean> | null = null;

/**
 * True when `bwrapPath` runs here (checked once per path: `bwrap --version`).
 *
 * @example
 * ```ts
 * if (!bwrapAvailable("bwrap")) logger.warn("no sandbox");
 * ```
 */
export function bwrapAvailable(bwrapPath: string): boolean {
  probed ??= new Map();
  let ok = probed.get(bwrapPath);
  if (ok === undefined) {
    try {
      execFileSync(bwrapPath, ["--version"], { stdio: "ignore" });
      ok = true;
    } catch {
      ok = false;
    }
    probed.set(bwrapPath, ok);
  }
  return ok;
}

let sizeProbed: Map<string, boolean> | null = null;

/**
 * True when `bwrapPath` knows `--size` (bubblewrap ≥ 0.7), so a tmpfs can be bounded.
 *
 * @example
 * ```ts
 * const tmpSizeBytes = bwrapSupportsSize("bwrap") ? storageMb * 1024 * 1024 : undefined;
 * ```
 */
export function bwrapSupportsSize(bwrapPath: string): boolean {
  sizeProbed ??= new Map();
  let ok = sizeProbed.get(bwrapPath);
  if (ok === undefined) {
    try {
      ok = execFileSync(bwrapPath, ["--help"], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "pipe"],
      }).includes("--size");
    } catch {
      ok = false;
    }
    sizeProbed.set(bwrapPath, ok);
  }
  return ok;
}

/** The gateway user's home folder (what {@link bwrapArgs} hides). */
export function gatewayHome(): string | undefined {
  return process.env.HOME ?? os.homedir();
}
