/**
 * The `local` runtime: a fresh folder per session on the gateway host. When bubblewrap is
 * installed every command runs inside it (see `bwrap.ts`); without it the runtime says so loudly
 * and falls back to plain process isolation (own process group, allow-listed environment).
 * `cpus`/`memory_mb` (and a process cap) are enforced by cgroups where the host allows, else only
 * rlimits apply and the runtime warns (see `limits.ts`).
 *
 * Commands run with `bash -c`, not a login shell: Debian's /etc/profile resets PATH, which would
 * drop the allow-listed PATH of the gateway (where the agent CLIs are installed).
 *
 * Layout: `<workRoot>/sessions/<name>/{workspace,logs,home,artifacts}`; commands see the same paths.
 * With a session user, the files only the gateway may touch (the user's passwd/group, internal
 * logs) live in `<workRoot>/private/<name>-XXXXXX` (0700, the gateway's): under the work root, so a
 * gateway killed mid-session leaves them where its next start removes them.
 *
 * When the gateway runs as root every command runs as an unprivileged uid of the session's own
 * (see `session-user.ts`): the session folder is that user's (0700, in a `sessions/` folder that
 * others cannot list), its HOME is the session's `home/`, its hard `RLIMIT_NPROC` caps its
 * processes, and what it leaves running is killed after each command. The gateway never writes
 * through a path the session controls: uploads are staged in a fresh folder and moved into place
 * by the session user, a working folder is created only where its real path stays inside the
 * session folder.
 *
 * @module
 */
import { chmod, chown, cp, mkdir, mkdtemp, readFile, rm, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { quote } from "shell-quote";
import type { RuntimeSpec } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";
import { baseEnv, harnessDir } from "../harness/env";
import { bwrapArgs, bwrapSupportsSize, gatewayHome } from "./bwrap";
import { SessionLimits } from "./limits";
import { mkdirInside, placeScript } from "./local-files";
import { claimSessionUser, createSessionDir, type LocalSessionUser, localHost } from "./local-setup";
import { runProcess } from "./process";
import { type ProxyBridge, startProxyBridge } from "./proxy-bridge";
import {
  handOver,
  handOverThen,
  killUserProcesses,
  ROOT_STAGE_ENV,
  sessionCommand,
  type UidClaim,
} from "./session-user";
import { diskUsage } from "./storage";
import type { CommandResult, ExecOptions, Runtime, RuntimeContext } from "./types";

export { createSessionDir, PRIVATE_DIR } from "./local-setup";

const SHIM_SOURCE = fileURLToPath(new URL("./sandbox-shim.mjs", import.meta.url));
/** Sessions' roots (and sandbox kinds) whose session users were seen to use their folders. */
const probedRoots = new Set<string>();

/**
 * A session's local workspace, sandboxed by bwrap when available.
 *
 * @example
 * ```ts
 * const rt = await LocalRuntime.create(spec, ctx);
 * const r = await rt.exec("git init", { env: rt.baseEnv(), logName: "prepare-0" });
 * await rt.teardown({ keep: false });
 * ```
 */
export class LocalRuntime implements Runtime {
  readonly backend = "local";
  readonly logsDir: string;
  readonly workspace: string;
  private bridge: ProxyBridge | null = null;
  private shimPath = "";
  private limits: SessionLimits | null = null;
  /** The session's own user (a root gateway), with the passwd/group files the sandbox shows. */
  private sessionUser: LocalSessionUser | null = null;
  private claim: UidClaim | null = null;
  /** Gateway-only folder of this runtime (passwd/group, internal logs); null without a session user. */
  private privateDir: string | null = null;
  /** Commands running now (leftovers are killed when the last one ends). */
  private running = 0;

  private constructor(
    readonly hostDir: string,
    private readonly spec: RuntimeSpec,
    private readonly ctx: RuntimeContext,
    /** True when commands run inside bubblewrap. */
    readonly sandboxed: boolean,
  ) {
    this.logsDir = path.join(hostDir, "logs");
    this.workspace = path.join(hostDir, "workspace");
  }

  get sessionPath(): string {
    return this.hostDir;
  }

  get workdir(): string {
    return this.spec.workdir ? this.resolve(this.spec.workdir, "runtime.workdir") : this.workspace;
  }

  static async create(spec: RuntimeSpec, ctx: RuntimeContext): Promise<LocalRuntime> {
    const { sandboxed, setpriv, support } = localHost(spec, ctx);
    const dir = await createSessionDir(ctx.workRoot, ctx.name);
    const rt = new LocalRuntime(dir, spec, ctx, sandboxed);
    if (setpriv) {
      try {
        const claimed = await claimSessionUser(ctx, dir, sandboxed, setpriv);
        rt.claim = claimed.claim;
        rt.privateDir = claimed.privateDir;
        rt.sessionUser = claimed.user;
      } catch (err) {
        await rt.releaseUser();
        await rm(dir, { recursive: true, force: true });
        throw new SessionFailure("infra", `runtime: cannot set up the session's user: ${messageOf(err)}`);
      }
    }
    try {
      rt.limits = await SessionLimits.create(
        ctx.name,
        {
          cpus: spec.cpus,
          memory_mb: spec.memory_mb,
          ...(ctx.settings.local.maxPids !== undefined ? { maxPids: ctx.settings.local.maxPids } : {}),
          ownUid: setpriv !== null,
        },
        support,
      );
    } catch (err) {
      await rt.releaseUser();
      await rm(dir, { recursive: true, force: true });
      throw new SessionFailure("infra", `runtime: cannot set up the session's cgroup: ${messageOf(err)}`);
    }
    return rt;
  }

  /** Releases the session's uid claim and private folder (idempotent). */
  private async releaseUser(): Promise<void> {
    await this.claim?.release();
    this.claim = null;
    if (this.privateDir) await rm(this.privateDir, { recursive: true, force: true });
    this.privateDir = null;
  }

  /** The host uid/gid of the session's commands and files (null: the gateway's own). */
  get user(): { uid: number; gid: number } | null {
    return this.sessionUser ? { uid: this.sessionUser.uid, gid: this.sessionUser.gid } : null;
  }

  baseEnv(): Record<string, string> {
    const env = baseEnv();
    // The session user's home is the session's: the gateway's HOME is hidden and not its to write.
    if (this.sessionUser) {
      Object.assign(env, {
        HOME: path.join(this.hostDir, "home"),
        USER: this.sessionUser.name,
        LOGNAME: this.sessionUser.name,
      });
    }
    return env;
  }

  async start(): Promise<void> {
    if (this.sandboxed && !this.spec.allow_internet) {
      // Copied into the session so the sandbox can read it wherever the gateway is installed;
      // a session user's runs as root at first: a copy of the gateway's own, shown read-only.
      this.shimPath = path.join(this.privateDir ?? this.hostDir, ".polar-shim.mjs");
      await cp(SHIM_SOURCE, this.shimPath);
      this.bridge = await startProxyBridge(this.ctx.proxyUrl);
      // Connecting needs write access to the socket: the session user's alone.
      if (this.sessionUser) {
        await chown(this.bridge.socketPath, this.sessionUser.uid, this.sessionUser.gid);
        await chmod(this.bridge.socketPath, 0o600);
      }
    }
    // Whether a session user can use its folder depends on the folders above the sessions' root
    // (and on bubblewrap), the same for every session: once it passed, later sessions skip the
    // probe, which saves a fork per session (each costs tens of ms in a gateway this size).
    if (this.sessionUser && !probedRoots.has(this.probeKey())) {
      await this.probeSessionUser();
      probedRoots.add(this.probeKey());
    }
  }

  private probeKey(): string {
    return `${path.dirname(this.hostDir)}\0${this.sandboxed ? "bwrap" : "plain"}`;
  }

  /** Fails INIT with a clear message when the session user cannot use its folder here. */
  private async probeSessionUser(): Promise<void> {
    const dirs = [this.workspace, path.join(this.hostDir, "home")];
    const failed = await this.runInternal(
      dirs
        .map((d) => `test -w ${quote([d])} -a -x ${quote([d])} || { echo ${quote([d])} >&2; exit 1; }`)
        .join("; "),
      "probe",
    );
    if (failed) {
      throw new SessionFailure(
        "infra",
        `runtime: the session user (uid ${this.sessionUser?.uid}) cannot use its session folder: ${failed.stderr.trim().slice(0, 400) || failed.exit}. The work root's parent folders must be traversable by other users (o+x)`,
      );
    }
  }

  /**
   * Runs an internal command (probe, upload placement) in the session folder with a bare PATH,
   * its logs in the private folder: null when it succeeded, else its stderr and exit.
   */
  private async runInternal(
    script: string,
    logName: string,
  ): Promise<{ stderr: string; exit: string } | null> {
    const r = await this.run(
      script,
      { env: { PATH: baseEnv().PATH ?? "/usr/bin:/bin" }, logName, cwd: this.hostDir },
      true,
    );
    if (r.exitCode === 0) return null;
    const stderr = await this.internalLog(logName).catch(() => "");
    return { stderr, exit: `exit ${r.exitCode ?? r.signal}` };
  }

  /** stderr of an internal command (probe, upload placement). */
  private internalLog(name: string): Promise<string> {
    return readFile(path.join(this.privateDir ?? this.logsDir, `${name}.stderr.log`), "utf8");
  }

  /** Resolves a path as commands see it; refuses anything outside the session folder. */
  resolve(target: string, field: string): string {
    const resolved = path.resolve(this.workspace, target);
    const rel = path.relative(this.hostDir, resolved);
    if (rel.startsWith("..") || path.isAbsolute(rel)) {
      throw new SessionFailure("infra", `${field}: '${target}' is outside the session folder`);
    }
    return resolved;
  }

  async exec(command: string, opts: ExecOptions): Promise<CommandResult> {
    const cwd = opts.cwd ? this.resolve(opts.cwd, "cwd") : this.workdir;
    return this.run(command, { ...opts, cwd });
  }

  /**
   * Runs a command in the sandbox (as the session user when there is one). `internal`: logs go to
   * the runtime's private folder, not the session's.
   */
  private async run(
    command: string,
    opts: ExecOptions & { cwd: string },
    internal = false,
  ): Promise<CommandResult> {
    this.running++;
    try {
      return await this.runCommand(command, opts, internal);
    } finally {
      this.running--;
      // Nothing the session started outlives its command, not even what left the process group.
      if (this.sessionUser && this.running === 0) await killUserProcesses(this.sessionUser.uid);
    }
  }

  private async runCommand(
    command: string,
    opts: ExecOptions & { cwd: string },
    internal: boolean,
  ): Promise<CommandResult> {
    const { cwd } = opts;
    const user = this.sessionUser;
    if (user) await mkdirInside(this.hostDir, cwd);
    else await mkdir(cwd, { recursive: true });
    const commandArgv = this.sandboxed
      ? this.sandboxArgv(cwd, command)
      : user
        ? sessionCommand(user, command)
        : ["bash", "-c", command];
    // The folder (and what the gateway wrote into it since the last command) becomes the
    // session user's in the command's own process, before it drops privileges.
    const handOverErrors = user && this.privateDir ? path.join(this.privateDir, "handover.stderr.log") : null;
    const argv =
      user && handOverErrors ? handOverThen(user, this.hostDir, handOverErrors, commandArgv) : commandArgv;
    const env = internal ? opts.env : { ...this.spec.env, ...opts.env };
    const oomBefore = (await this.limits?.oomKills()) ?? 0;
    const result = await runProcess(this.limits ? this.limits.wrap(argv) : argv, {
      // A session user's environment reaches only the command (fd 3), never the root stages.
      ...(user ? { env: ROOT_STAGE_ENV, envFd: env } : { env }),
      cwd,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
      logsDir: internal ? (this.privateDir ?? this.logsDir) : this.logsDir,
      logName: opts.logName,
      capture: opts.capture,
    });
    if (handOverErrors) {
      const failed = (await readFile(handOverErrors, "utf8").catch(() => "")).trim();
      if (failed)
        this.ctx.warn(
          "runtime: could not give the gateway's files in the session folder to the session user",
          { session_id: this.ctx.session_id, error: failed.slice(0, 800) },
        );
    }
    // The kernel's OOM killer picks a process inside the cgroup (the harness's biggest one, not
    // necessarily the one we spawned), so the counter is the evidence, not the exit signal.
    if (this.limits && (await this.limits.oomKills()) > oomBefore) {
      return {
        ...result,
        limitHit: `memory limit of ${this.spec.memory_mb} MiB (runtime.memory_mb) hit: killed by the kernel OOM killer`,
      };
    }
    return result;
  }

  /** The bubblewrap argv of a command (see `bwrap.ts`). */
  private sandboxArgv(cwd: string, command: string): string[] {
    const local = this.ctx.settings.local;
    return bwrapArgs(
      {
        bwrapPath: local.bwrapPath,
        sessionDir: this.hostDir,
        workRoot: path.resolve(this.ctx.workRoot),
        cwd,
        allowInternet: this.spec.allow_internet,
        bridge: this.bridge
          ? {
              socketPath: this.bridge.socketPath,
              shimPath: this.shimPath,
              proxyPort: Number(new URL(this.ctx.proxyUrl).port),
            }
          : undefined,
        hostHome: gatewayHome(),
        harnessDir: harnessDir(),
        // The private /tmp is RAM: bound it by storage_mb too, where bwrap can.
        ...(this.spec.storage_mb !== undefined && bwrapSupportsSize(local.bwrapPath)
          ? { tmpSizeBytes: this.spec.storage_mb * 1024 * 1024 }
          : {}),
        ...(this.sessionUser ? { user: this.sessionUser } : {}),
      },
      command,
    );
  }

  /** What the session folder takes on disk: with bubblewrap the only writable place but `/tmp`. */
  storageBytes(): Promise<number> {
    return diskUsage(this.hostDir);
  }

  /** The session's resource limits (null before `create` finished). */
  get resourceLimits(): SessionLimits | null {
    return this.limits;
  }

  async uploadFile(source: string, target: string): Promise<void> {
    const dest = this.resolve(target, "target");
    const info = await stat(source).catch(() => null);
    if (!info?.isFile()) throw new SessionFailure("infra", `upload_file: source '${source}' is not a file`);
    if (this.sessionUser) return this.placeAsUser(source, dest, "file");
    await mkdir(path.dirname(dest), { recursive: true });
    await cp(source, dest);
  }

  async uploadDir(source: string, target: string): Promise<void> {
    const dest = this.resolve(target, "target");
    const info = await stat(source).catch(() => null);
    if (!info?.isDirectory())
      throw new SessionFailure("infra", `upload_dir: source '${source}' is not a folder`);
    if (this.sessionUser) return this.placeAsUser(source, dest, "dir");
    await cp(source, dest, { recursive: true });
  }

  /**
   * An upload with a session user: the gateway copies into a fresh folder of its own in the
   * session folder, then the session user moves the copy into place from inside the sandbox, so a
   * symlink the session planted on the way leads only where the session itself may write.
   */
  private async placeAsUser(source: string, dest: string, kind: "file" | "dir"): Promise<void> {
    const stage = await mkdtemp(path.join(this.hostDir, ".polar-upload-"));
    try {
      const staged = path.join(stage, "item");
      await cp(source, staged, { recursive: kind === "dir" });
      const failed = await this.runInternal(placeScript(staged, dest, kind), "upload");
      if (failed) {
        throw new SessionFailure(
          "infra",
          `upload_${kind}: cannot place '${source}' at '${dest}': ${failed.stderr.trim().split("\n").at(-1) || failed.exit}`,
        );
      }
    } finally {
      await rm(stage, { recursive: true, force: true });
    }
  }

  async teardown(opts: { keep: boolean }): Promise<void> {
    await this.bridge?.close();
    this.bridge = null;
    if (this.sessionUser) await killUserProcesses(this.sessionUser.uid);
    await this.limits?.destroy();
    this.limits = null;
    if (!opts.keep) await rm(this.hostDir, { recursive: true, force: true });
    else if (this.sessionUser) {
      // A kept folder goes back to the gateway: its uid may be handed to a later session.
      await handOver(this.hostDir, process.getuid?.() ?? 0, process.getgid?.() ?? 0);
    }
    await this.releaseUser();
  }
}
