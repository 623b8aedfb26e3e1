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
 *
 * @module
 */
import { cp, mkdir, rm, stat } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { RuntimeSpec } from "../../protocol";
import { messageOf, SessionFailure } from "../errors";
import { baseEnv, harnessDir } from "../harness/env";
import { bwrapArgs, bwrapAvailable, bwrapSupportsSize, gatewayHome } from "./bwrap";
import { detectLimits, SessionLimits } from "./limits";
import { runProcess } from "./process";
import { type ProxyBridge, startProxyBridge } from "./proxy-bridge";
import { diskUsage } from "./storage";
import type { CommandResult, ExecOptions, Runtime, RuntimeContext } from "./types";

const SHIM_SOURCE = fileURLToPath(new URL("./sandbox-shim.mjs", import.meta.url));
let warnedNoBwrap = false;
let warnedNoLimits = false;

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
    const mode = ctx.settings.local.sandbox;
    const have = mode !== "never" && bwrapAvailable(ctx.settings.local.bwrapPath);
    if (mode === "always" && !have) {
      throw new SessionFailure(
        "infra",
        `runtime: bubblewrap ('${ctx.settings.local.bwrapPath}') is required by the gateway's local.sandbox=always but does not run here`,
      );
    }
    if (!have && mode === "auto" && !warnedNoBwrap) {
      warnedNoBwrap = true;
      ctx.warn(
        "BUBBLEWRAP NOT FOUND: local sessions run WITHOUT a sandbox (plain process isolation only: they can write anywhere this user can and reach the network). Install bubblewrap (apt-get install bubblewrap) on GPU hosts.",
      );
    }
    const support = detectLimits();
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
    const dir = await createSessionDir(ctx.workRoot, ctx.name);
    const rt = new LocalRuntime(dir, spec, ctx, have);
    try {
      rt.limits = await SessionLimits.create(
        ctx.name,
        { cpus: spec.cpus, memory_mb: spec.memory_mb },
        support,
      );
    } catch (err) {
      await rm(dir, { recursive: true, force: true });
      throw new SessionFailure("infra", `runtime: cannot set up the session's cgroup: ${messageOf(err)}`);
    }
    return rt;
  }

  baseEnv(): Record<string, string> {
    return baseEnv();
  }

  async start(): Promise<void> {
    if (this.sandboxed && !this.spec.allow_internet) {
      // Copied into the session so the sandbox can read it wherever the gateway is installed.
      this.shimPath = path.join(this.hostDir, ".polar-shim.mjs");
      await cp(SHIM_SOURCE, this.shimPath);
      this.bridge = await startProxyBridge(this.ctx.proxyUrl);
    }
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
    await mkdir(cwd, { recursive: true });
    const argv = this.sandboxed
      ? bwrapArgs(
          {
            bwrapPath: this.ctx.settings.local.bwrapPath,
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
            ...(this.spec.storage_mb !== undefined && bwrapSupportsSize(this.ctx.settings.local.bwrapPath)
              ? { tmpSizeBytes: this.spec.storage_mb * 1024 * 1024 }
              : {}),
          },
          command,
        )
      : ["bash", "-c", command];
    const oomBefore = (await this.limits?.oomKills()) ?? 0;
    const result = await runProcess(this.limits ? this.limits.wrap(argv) : argv, {
      env: { ...this.spec.env, ...opts.env },
      cwd,
      signal: opts.signal,
      timeoutMs: opts.timeoutMs,
      logsDir: this.logsDir,
      logName: opts.logName,
      capture: opts.capture,
    });
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
    await mkdir(path.dirname(dest), { recursive: true });
    await cp(source, dest);
  }

  async uploadDir(source: string, target: string): Promise<void> {
    const dest = this.resolve(target, "target");
    const info = await stat(source).catch(() => null);
    if (!info?.isDirectory())
      throw new SessionFailure("infra", `upload_dir: source '${source}' is not a folder`);
    await cp(source, dest, { recursive: true });
  }

  async teardown(opts: { keep: boolean }): Promise<void> {
    await this.bridge?.close();
    this.bridge = null;
    await this.limits?.destroy();
    this.limits = null;
    if (!opts.keep) await rm(this.hostDir, { recursive: true, force: true });
  }
}
