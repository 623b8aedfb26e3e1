/**
 * Setting up a `local` session before its first command: what the host allows (bubblewrap,
 * `setpriv` for a session user, cgroups), said once in a warning when it is less than asked; the
 * session folder; and, for a root gateway, the session's own user with its gateway-only folder
 * (see `local.ts` for the layout and `session-user.ts` for why a uid of its own).
 *
 * @module
 */
import { chmod, mkdir, mkdtemp, rm, stat } from "node:fs/promises";
import path from "node:path";
import type { RuntimeSpec } from "../../protocol";
import { SessionFailure } from "../errors";
import { bwrapAvailable, gatewayHome } from "./bwrap";
import { detectLimits, type LimitSupport, RLIMIT_ONLY } from "./limits";
import {
  claimSessionUid,
  DEFAULT_SESSION_UIDS,
  findTool,
  SESSION_USER_NAME,
  type SessionUser,
  setprivPath,
  switchesUsers,
  type UidClaim,
  writeIdentityFiles,
} from "./session-user";
import type { RuntimeContext } from "./types";

/** Folder of the work root holding each session user's gateway-only files (see `privateDir`). */
export const PRIVATE_DIR = "private";

let warnedNoBwrap = false;
let warnedNoLimits = false;
let warnedUnmapped = false;
const warnedOpened = new Set<string>();
let bashFound: string | null | undefined;

/**
 * Creates the session folder, replacing a leftover one of the same name.
 *
 * @example
 * ```ts
 * const dir = await createSessionDir("/var/polar", "b1.t1.0");
 * ```
 */
export async function createSessionDir(workRoot: string, name: string): Promise<string> {
  const root = path.resolve(workRoot, "sessions");
  const dir = path.resolve(root, name);
  if (path.dirname(dir) !== root) {
    throw new SessionFailure("infra", `session id '${name}' is not a plain folder name`);
  }
  await rm(dir, { recursive: true, force: true });
  for (const sub of ["workspace", "logs", "home", "artifacts"]) {
    await mkdir(path.join(dir, sub), { recursive: true });
  }
  return dir;
}

/** What the host gives a local session. */
export interface LocalHost {
  /** Commands run inside bubblewrap. */
  sandboxed: boolean;
  /** `setpriv`'s path when sessions run as users of their own (a root gateway), else null. */
  setpriv: string | null;
  /** How resource limits are enforced here. */
  support: LimitSupport;
}

/**
 * What this host gives the session: fails when the gateway's settings require what is missing,
 * warns (once, or per session for a limit the task asked for) when sessions get less.
 *
 * @example
 * ```ts
 * const { sandboxed, setpriv, support } = localHost(spec, ctx);
 * ```
 */
export function localHost(spec: RuntimeSpec, ctx: RuntimeContext): LocalHost {
  const mode = ctx.settings.local.sandbox;
  const sandboxed = mode !== "never" && bwrapAvailable(ctx.settings.local.bwrapPath);
  if (mode === "always" && !sandboxed) {
    throw new SessionFailure(
      "infra",
      `runtime: bubblewrap ('${ctx.settings.local.bwrapPath}') is required by the gateway's local.sandbox=always but does not run here`,
    );
  }
  const setpriv = sessionUserTool(ctx);
  if (!sandboxed && mode === "auto" && !warnedNoBwrap) {
    warnedNoBwrap = true;
    ctx.warn(
      "BUBBLEWRAP NOT FOUND: local sessions run WITHOUT a sandbox (plain process isolation only: they can write anywhere this user can and reach the network). Install bubblewrap (apt-get install bubblewrap) on GPU hosts.",
    );
  }
  const support = ctx.settings.local.cgroups === false ? RLIMIT_ONLY : detectLimits();
  warnLimits(spec, ctx, support);
  return { sandboxed, setpriv, support };
}

/** `setpriv` when sessions run as users of their own; warns when a root gateway cannot switch. */
function sessionUserTool(ctx: RuntimeContext): string | null {
  const range = ctx.settings.local.sessionUids ?? DEFAULT_SESSION_UIDS;
  const switching = switchesUsers(range);
  if (!switching && process.getuid?.() === 0 && !warnedUnmapped) {
    warnedUnmapped = true;
    ctx.warn(
      `SESSIONS RUN AS THE GATEWAY'S ROOT: the gateway is root in a user namespace that does not map the session uids ${range.first}…${range.first + range.count - 1}; map them (or run the gateway as a non-root user) so every session gets a uid of its own`,
    );
  }
  const setpriv = switching ? setprivPath() : null;
  if (switching && !setpriv) {
    throw new SessionFailure(
      "infra",
      "runtime: the gateway runs as root, so every local session runs as an unprivileged user of its own, which needs `setpriv` (util-linux); it is not installed",
    );
  }
  return setpriv;
}

function warnLimits(spec: RuntimeSpec, ctx: RuntimeContext, support: LimitSupport): void {
  if (support.mechanism === "rlimit" && (spec.cpus !== undefined || spec.memory_mb !== undefined)) {
    // Loud on every such session: the task asked for a limit that this host cannot give.
    ctx.warn(
      `RESOURCE LIMITS NOT ENFORCED: runtime.cpus/runtime.memory_mb are ignored by the local runtime on this host (${support.detail})`,
      { session_id: ctx.session_id, cpus: spec.cpus, memory_mb: spec.memory_mb },
    );
  } else if (support.mechanism === "rlimit" && !warnedNoLimits) {
    warnedNoLimits = true;
    ctx.warn(`local runtime: no writable cgroup, ${support.detail}`);
  }
  if (spec.gpus > 0) {
    ctx.warn("runtime: gpus are enforced by container backends only; ignored by local", {
      session_id: ctx.session_id,
    });
  }
}

/** A session's own user, with the passwd/group files the sandbox shows. */
export type LocalSessionUser = SessionUser & { passwd: string; group: string };

/** The session user of a local runtime, and what it holds until teardown. */
export interface ClaimedUser {
  user: LocalSessionUser;
  claim: UidClaim;
  /** Gateway-only folder (passwd/group, internal logs). */
  privateDir: string;
}

/**
 * Claims a uid for the session and gives it the session folder (see `local.ts`). On a failure
 * what was claimed so far is released.
 *
 * @example
 * ```ts
 * const { user, claim, privateDir } = await claimSessionUser(ctx, hostDir, sandboxed, setpriv);
 * ```
 */
export async function claimSessionUser(
  ctx: RuntimeContext,
  hostDir: string,
  sandboxed: boolean,
  setpriv: string,
): Promise<ClaimedUser> {
  const claim = await claimSessionUid(ctx.settings.local.sessionUids ?? DEFAULT_SESSION_UIDS);
  let privateDir: string | null = null;
  try {
    bashFound ??= findTool("bash");
    const bash = bashFound;
    if (!bash) throw new Error("no bash in /usr/bin or /bin");
    const user = { uid: claim.uid, gid: claim.uid, name: SESSION_USER_NAME, setpriv, bash };
    // Under the work root, which the gateway empties at start: a gateway killed mid-session
    // leaves nothing behind in the host's /tmp. 0700, the gateway's own: no session user enters.
    const privateRoot = path.join(ctx.workRoot, PRIVATE_DIR);
    await mkdir(privateRoot, { recursive: true, mode: 0o700 });
    privateDir = await mkdtemp(path.join(privateRoot, `${ctx.name}-`));
    const identity = await writeIdentityFiles(privateDir, user, path.join(hostDir, "home"));
    // Other sessions' folders: not listable, each its own user's only.
    await chmod(path.dirname(hostDir), 0o711);
    await chmod(hostDir, 0o700);
    if (!sandboxed) await openPath(ctx, hostDir);
    // The folder becomes the user's before its first command (the runtime hands it over), so
    // what the gateway sets up in it before then is done on a folder still its own.
    return { user: { ...user, ...identity }, claim, privateDir };
  } catch (err) {
    await claim.release();
    if (privateDir) await rm(privateDir, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Without bubblewrap the session user reaches its folder through the host's folders above it:
 * those it cannot pass get `o+x` (pass, not list), said once in a warning; never the gateway
 * user's home (the probe at start then says what to change).
 */
async function openPath(ctx: RuntimeContext, hostDir: string): Promise<void> {
  const home = gatewayHome();
  const opened: string[] = [];
  for (let dir = path.dirname(hostDir); ; dir = path.dirname(dir)) {
    const mode = (await stat(dir)).mode & 0o7777;
    if ((mode & 0o001) === 0 && !(home && path.resolve(home) === dir)) {
      await chmod(dir, mode | 0o001);
      opened.push(dir);
    }
    if (dir === path.dirname(dir)) break;
  }
  if (opened.length > 0 && !warnedOpened.has(opened.join(":"))) {
    warnedOpened.add(opened.join(":"));
    ctx.warn(
      `local runtime without bubblewrap: made ${opened.join(", ")} passable by other users (o+x, not listable) so each session's own user reaches its folder`,
    );
  }
}
